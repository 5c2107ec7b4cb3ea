"""The read API against its own OpenAPI document, property-based: schemathesis generates requests
from the document (valid ones, and ones the document says are invalid), sends them SigV4-signed to
the local function URL (vhs_ops.local.read_api) and runs every check it has on each answer, so any
place where the document and the API disagree fails here. Known ids, versions, part names and
ETags are mixed into the valid requests, so that 200, 304 and 307 answers are generated, not only
400 and 404. The checks that need unsigned requests (UNSIGNED_CHECKS) are left to
tests/core/test_read_api.py's own 403 tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, missing_required_header
from test_read_api import T1, T2, T3, Api, api, put_every_kind

from vhs.read_api import routes
from vhs_ops.local.read_api import signed_headers

__all__ = ["api"]  # the fixture: one local stack and read API for the module

pytestmark = pytest.mark.slow
EXAMPLES = 100
# The checks that send a request without its signature: ignored_auth, and
# missing_required_header, whose only required header is Authorization (the security scheme);
# this test's auth signs whatever it sends, so they would see a signed request.
UNSIGNED_CHECKS = [ignored_auth, missing_required_header]
# Filled by `seeded` once the records are stored: what the valid requests draw from.
KNOWN: dict[str, list[str]] = {}


def _schema(mode: GenerationMode) -> Any:
    schema = schemathesis.openapi.from_dict(json.loads(routes.openapi_document()))
    # Requests are signed by SigV4 below, not by a generated Authorization header.
    schema.config.generation.update(
        modes=[mode], max_examples=EXAMPLES, with_security_parameters=False
    )
    return schema


positive = _schema(GenerationMode.POSITIVE)
negative = _schema(GenerationMode.NEGATIVE)


@positive.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    """Half the time, each path parameter is one that names something stored."""
    drawn = {
        name: st.one_of(st.just(value), st.sampled_from(KNOWN[name]))
        for name, value in (path_parameters or {}).items()
    }
    return st.fixed_dictionaries(drawn)


@positive.hook
def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
    """as_of, when generated, is sometimes a moment the stored records changed at."""
    if not query or "as_of" not in query:
        return st.just(query)
    moments = st.one_of(st.just(query["as_of"]), st.sampled_from(KNOWN["as_of"]))
    return moments.map(lambda moment: {**query, "as_of": moment})


@positive.hook
def flatmap_headers(context: Any, headers: dict[str, Any] | None) -> Any:
    """If-None-Match, when generated, is sometimes a stored ETag (or a list naming one)."""
    if not headers or "If-None-Match" not in headers:
        return st.just(headers)
    tags = st.one_of(
        st.just(headers["If-None-Match"]),
        st.sampled_from(KNOWN["etag"]),
        st.sampled_from(KNOWN["etag"]).map(lambda tag: f'W/"other", {tag}'),
    )
    return tags.map(lambda tag: {**headers, "If-None-Match": tag})


class SigV4(requests.auth.AuthBase):
    """Signs each request as a consumer signs it for a function URL (service "lambda")."""

    def __init__(self, region: str) -> None:
        self.region = region

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(
            signed_headers(
                request.method, request.url, region=self.region, headers=dict(request.headers)
            )
        )
        return request


@pytest.fixture(scope="module")
def seeded(api: Api) -> Iterator[Api]:
    """Records of every kind (test_read_api.put_every_kind), and what names them."""
    put_every_kind(api.store, "fuzz")
    KNOWN.update(
        id=["fuzz-json", "fuzz-scan", "fuzz-big", "fuzz-gone"],
        version=["1", "2", "3"],
        a=["1", "2"],
        b=["1", "2", "3"],
        as_of=[T1, T2, T3, "2026-11-01T12:00:00+01:00"],
        name=["ocr", "scan"],
        etag=[
            api.get("fuzz-json").headers["ETag"],
            api.get("fuzz-json", "/versions/1").headers["ETag"],
            api.get("fuzz-json", "/parts/ocr").headers["ETag"],
            api.get("fuzz-scan").headers["ETag"],
        ],
    )
    yield api
    KNOWN.clear()


@pytest.fixture
def sent() -> Iterator[list[Any]]:
    """The cases one operation's test sent; once hypothesis has run them all, there were at
    least EXAMPLES of them (hypothesis stops early when a space is used up: only an operation
    with no parameters may have fewer)."""
    cases: list[Any] = []
    yield cases
    if cases and next(cases[0].operation.iter_parameters(), None) is not None:
        assert len(cases) >= EXAMPLES, (cases[0].operation.label, len(cases))


def _call_and_validate(case: Any, api: Api, sent: list[Any]) -> None:
    sent.append(case)
    with requests.Session() as session:
        case.call_and_validate(
            base_url=api.url,
            session=session,
            auth=SigV4(api.region),
            excluded_checks=UNSIGNED_CHECKS,
            timeout=30,
        )


@positive.parametrize()
@settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck), deadline=None)
def test_valid_requests_get_answers_the_document_declares(
    case: Any, seeded: Api, sent: list[Any]
) -> None:
    _call_and_validate(case, seeded, sent)


@negative.parametrize()
@settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck), deadline=None)
def test_invalid_requests_are_refused_as_the_document_declares(
    case: Any, seeded: Api, sent: list[Any]
) -> None:
    _call_and_validate(case, seeded, sent)
