"""The read API (docs/read-api.md), driven over HTTP as a consumer drives it: requests signed with
botocore's SigV4 signer (service "lambda") and sent with http.client to the local function URL
(vhs_ops.local.read_api), which checks the signature and calls the real handler, against moto's
server. One local stack and one server for the module."""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jsonschema
import pytest

from vhs import keys, settings, shapes
from vhs.layouts import Layout
from vhs.read_api import document as read_api_document
from vhs.read_api import problems, responses, routes
from vhs.store import VersionedHybridStore
from vhs_ops.local.read_api import LocalReadApi, signed_headers
from vhs_testing.bad_inputs import CASES, Accepted, valid_id
from vhs_testing.cli import local_env
from vhs_testing.damage import damages as damages_of
from vhs_testing.damage import plant, well_formed
from vhs_testing.stacks import fresh_stack

__all__ = ["local_env"]  # the fixture: `vhs local up` for this module

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_FILE = ROOT / "docs" / "read-api.openapi.json"
T1, T2, T3 = "2026-11-01T09:00:00Z", "2026-11-02T09:00:00Z", "2026-11-03T09:00:00Z"
# Low enough that a 64 KiB body is redirected and a 12 KiB one (from S3) is not.
RESPONSE_LIMIT = 32 * 1024
SERVED_FROM_S3 = random.Random("s3").randbytes(12 * 1024)
REDIRECTED = random.Random("big").randbytes(64 * 1024)
# Ids that a path would mangle unless the id is one percent-encoded segment.
AWKWARD_IDS = [
    "a/b",
    "a%2Fb",
    "..",
    ".",
    "../../etc/passwd",
    "q?x=1",
    "frag#1",
    "sp ace",
    "plus+sign",
    "%",
    "%%41",
    "~tilde",
    "ünïcødé/ñ",
    "\U0001f600 emoji",
    "a;b=c,d",
    "history",
    "x/history",
    "x/versions/1",
]


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def problem(self) -> dict[str, Any]:
        assert self.headers["Content-Type"] == "application/problem+json", self.body
        problem = self.json()
        assert problem["status"] == self.status
        assert {"type", "title", "detail"} <= set(problem)
        return problem


@dataclass
class Api:
    url: str
    region: str
    store: VersionedHybridStore | None = None

    def request(
        self,
        target: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        *,
        sign: bool = True,
        secret: str = "testing",
        service: str = "lambda",
    ) -> Answer:
        """`method` `target` (a path, percent-encoded as it is to be sent)."""
        parts = urlsplit(self.url)
        sent = dict(headers or {})
        if sign:
            sent = signed_headers(
                method,
                self.url + target,
                region=self.region,
                secret_key=secret,
                headers=sent,
                service=service,
            )
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            connection.request(method, target, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, response.headers, response.read())
        finally:
            connection.close()

    def get(self, id: str, suffix: str = "", **kw: Any) -> Answer:
        return self.request(f"/records/{segment(id)}{suffix}", **kw)


def segment(id: str) -> str:
    """An id as ONE path segment: every reserved character percent-encoded, "." too (so "."
    and ".." are never dot segments a client or proxy would resolve)."""
    encoded = quote(id.encode("utf-8", "surrogatepass"), safe="")
    return encoded.replace(".", "%2E")


def put_every_kind(store: VersionedHybridStore, prefix: str) -> None:
    """Records of every kind, ids `prefix`-json (two versions, the second with parts, one too
    large for a response), -scan (binary), -big (too large for a response), -gone (deleted)."""
    store.put(f"{prefix}-json", {"title": "Moby-Dick"}, updated_at=T1)
    store.put(
        f"{prefix}-json",
        {"title": "Moby-Dick; or, The Whale"},
        updated_at=T2,
        parts={"ocr": (b"Call me Ishmael.", "text/plain"), "scan": REDIRECTED},
    )
    store.put(f"{prefix}-scan", SERVED_FROM_S3, updated_at=T1, content_type="image/png")
    store.put(f"{prefix}-big", REDIRECTED, updated_at=T1, content_type="video/mp4")
    store.put(f"{prefix}-gone", {"v": 1}, updated_at=T1)
    store.delete(f"{prefix}-gone", deleted_at=T3)


@pytest.fixture(scope="module")
def api(moto_server: str) -> Iterator[Api]:
    stack = fresh_stack(moto_server, "readapi", pipeline=False)
    env = {settings.READ_API_RESPONSE_LIMIT: str(RESPONSE_LIMIT)}
    with LocalReadApi(stack, extra_env=env) as served:
        store = VersionedHybridStore.from_settings(
            settings.StoreSettings(stack.table_name, stack.bucket_name),
            s3_client=_client("s3", stack),
            dynamodb_client=_client("dynamodb", stack),
        )
        yield Api(served.url, stack.region, store)


def _client(service: str, stack: Any) -> Any:
    from vhs_ops.local.stack import client

    return client(service, stack.endpoint, stack.region)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- reading ----------------------------------------------------------------------------------


def test_latest_a_version_and_the_history(api: Api) -> None:
    api.store.put("book-1", {"title": "Moby-Dick"}, updated_at=T1)
    api.store.put("book-1", {"title": "Moby-Dick; or, The Whale"}, updated_at=T2)

    latest = api.get("book-1")
    assert latest.status == 200
    assert latest.json() == {"title": "Moby-Dick; or, The Whale"}
    assert latest.headers["Content-Type"] == "application/json"
    assert latest.headers["ETag"] == f'"{sha(latest.body)}"'
    assert latest.headers["X-Vhs-Version"] == "2"
    assert latest.headers["X-Vhs-Updated-At"] == "2026-11-02T09:00:00+00:00"

    first = api.get("book-1", "/versions/1")
    assert first.status == 200 and first.json() == {"title": "Moby-Dick"}
    assert first.headers["X-Vhs-Version"] == "1"
    assert first.headers["ETag"] == f'"{sha(first.body)}"'

    history = api.get("book-1", "/history")
    assert history.status == 200 and history.headers["Content-Type"] == "application/json"
    document = history.json()
    assert document["id"] == "book-1"
    assert [(v["version"], v["deleted"]) for v in document["versions"]] == [(1, False), (2, False)]
    assert document["versions"][1]["content_hash"] == sha(latest.body)
    assert document["versions"][0] == {
        "version": 1,
        "updated_at": "2026-11-01T09:00:00+00:00",
        "size": len(first.body),
        "content_hash": sha(first.body),
        "deleted": False,
        "content_type": "application/json",
        "parts": {},
    }


def test_a_binary_body_from_s3_comes_back_byte_for_byte_with_its_content_type(api: Api) -> None:
    api.store.put("scan-1", SERVED_FROM_S3, updated_at=T1, content_type="image/png")
    answer = api.get("scan-1")
    assert answer.status == 200
    assert answer.body == SERVED_FROM_S3
    assert answer.headers["Content-Type"] == "image/png"
    assert answer.headers["ETag"] == f'"{sha(SERVED_FROM_S3)}"'


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; charset=utf-8", "plain text, ünïcødé\n".encode()),
        ("application/json", b"\xff\xfe not UTF-8, though it says JSON"),
        ("application/xml", b"<a>\x00</a>"),
        ("application/octet-stream", bytes(range(256))),
    ],
)
def test_every_content_type_round_trips(api: Api, content_type: str, body: bytes) -> None:
    id = f"typed-{content_type}"
    if content_type == "application/json":
        # The doors refuse bytes that claim JSON and are not: this is one stored before they
        # did (put as bytes, then claimed: an entry without a content type is JSON).
        api.store.put(id, body, updated_at=T1, content_type="application/octet-stream")
        api.store.index.dynamodb.update_item(
            TableName=api.store.table_name,
            Key={"id": {"S": id}},
            UpdateExpression="REMOVE c[0].ct",
        )
    else:
        api.store.put(id, body, updated_at=T1, content_type=content_type)
    answer = api.get(id)
    assert (answer.status, answer.body) == (200, body)
    assert answer.headers["Content-Type"] == content_type


def test_a_stored_content_type_that_is_no_media_type_is_served_as_octet_stream(
    api: Api,
) -> None:
    """Written before content types were checked (or by hand): never reflected into the
    Content-Type header, whose value it cannot be."""
    from vhs.item import CONTENT_TYPE

    id = "legacy-type"
    api.store.put(id, b"legacy bytes", updated_at=T1, content_type="text/plain")
    index = api.store.index
    item = index.dynamodb.get_item(TableName=index.table, Key={"id": {"S": id}})["Item"]

    def retyped(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: {"S": "text/plain; x=日本"} if k == CONTENT_TYPE else retyped(v)
                for k, v in value.items()
            }
        return [retyped(v) for v in value] if isinstance(value, list) else value

    index.dynamodb.put_item(TableName=index.table, Item=retyped(item))
    assert api.store.get(id).content_type == "text/plain; x=日本"

    for method in ("GET", "HEAD"):
        answer = api.get(id, method=method)
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "application/octet-stream"
    assert api.get(id).body == b"legacy bytes"


def test_head_gives_the_headers_without_the_body(api: Api) -> None:
    api.store.put("head-1", {"n": 1}, updated_at=T1)
    answer = api.get("head-1", method="HEAD")
    assert answer.status == 200 and answer.body == b""
    assert answer.headers["X-Vhs-Version"] == "1"
    assert answer.headers["ETag"] == '"' + sha(b'{"n":1}') + '"'


@pytest.mark.parametrize(
    "target",
    [
        "/records/head-2/history",
        "/records/head-2/versions/1/diff/2",
        "/openapi.json",
        "/records/never-stored/history",
        "/records/head-2/versions/1/diff/9",
        "/records/%00/history",
    ],
)
def test_head_answers_every_route_as_get_without_the_body(api: Api, target: str) -> None:
    """RFC 9110, 9.3.2: HEAD wherever GET, the same status and headers, no content."""
    api.store.put("head-2", {"n": 1}, updated_at=T1)
    api.store.put("head-2", {"n": 2}, updated_at=T2)
    got, head = api.request(target), api.request(target, method="HEAD")
    assert got.body and head.body == b""
    assert head.status == got.status
    assert head.headers["Content-Type"] == got.headers["Content-Type"]


def test_a_damaged_item_is_a_502_problem_naming_the_id_and_the_field(api: Api) -> None:
    """A text item whose `t` is not a time was a 500 (a bare ValueError)."""
    for layout in Layout:
        sound = well_formed(api.store, f"sound-{layout}", layout)
        for damage in [d for d in damages_of(layout) if d.in_current][:3]:
            record_id = f"api-{damage.name}"
            plant(api.store, damage.applied(sound, record_id))
            for suffix in ("", "/versions/3", "/history", "/versions/2/diff/3"):
                problem = api.get(record_id, suffix).problem()
                assert (problem["status"], problem["type"]) == (502, problems.DAMAGED), suffix
                assert (problem["id"], problem["field"]) == (record_id, damage.field)
                assert problem["detail"].startswith(f"this item is damaged: {record_id!r}")


# --- caching and redirects --------------------------------------------------------------------


def test_if_none_match_with_the_etag_gets_304(api: Api) -> None:
    api.store.put("cached-1", {"v": 1}, updated_at=T1)
    etag = api.get("cached-1").headers["ETag"]
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        answer = api.get("cached-1", headers={"If-None-Match": header})
        assert (answer.status, answer.body) == (304, b""), header
        assert answer.headers["ETag"] == etag
    assert api.get("cached-1", headers={"If-None-Match": '"other"'}).status == 200
    api.store.put("cached-1", {"v": 2}, updated_at=T2)
    changed = api.get("cached-1", headers={"If-None-Match": etag})
    assert changed.status == 200 and changed.json() == {"v": 2}


def test_a_body_too_large_for_the_response_is_a_redirect_to_a_presigned_url(api: Api) -> None:
    api.store.put("big-1", REDIRECTED, updated_at=T1, content_type="video/mp4")
    answer = api.get("big-1")
    assert answer.status == 307 and answer.body == b""
    assert answer.headers["ETag"] == f'"{sha(REDIRECTED)}"'
    assert answer.headers["X-Vhs-Version"] == "1"
    location = answer.headers["Location"]
    assert "X-Amz-Expires=60" in location and "X-Amz-Signature=" in location
    # The presigned URL needs no credentials of the consumer's.
    parts = urlsplit(location)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", f"{parts.path}?{parts.query}")
    fetched = connection.getresponse()
    assert fetched.status == 200
    assert fetched.read() == REDIRECTED
    assert fetched.headers["Content-Type"] == "video/mp4"
    connection.close()
    # A cached copy is confirmed before anything is presigned.
    cached = api.get("big-1", headers={"If-None-Match": answer.headers["ETag"]})
    assert cached.status == 304 and "Location" not in cached.headers


def test_parts_are_served_with_their_own_etag_304_and_redirect(api: Api) -> None:
    ocr, scan = b"recognised text", REDIRECTED
    api.store.put("parts-1", {"v": 1}, updated_at=T1, parts={"ocr": (ocr, "text/plain")})
    api.store.put("parts-1", {"v": 2}, updated_at=T2, parts={"ocr": b"newer", "scan": scan})
    answer = api.get("parts-1", "/versions/1/parts/ocr")
    assert (answer.status, answer.body) == (200, ocr)
    assert answer.headers["Content-Type"] == "text/plain"
    assert answer.headers["ETag"] == f'"{sha(ocr)}"' and answer.headers["X-Vhs-Version"] == "1"
    latest = api.get("parts-1", "/parts/ocr")
    assert (latest.status, latest.body) == (200, b"newer")
    cached = api.get("parts-1", "/parts/ocr", headers={"If-None-Match": latest.headers["ETag"]})
    assert (cached.status, cached.body) == (304, b"")
    head = api.get("parts-1", "/parts/ocr", method="HEAD")
    assert head.status == 200 and head.body == b""
    # A part too large for the response: a redirect to its own presigned S3 object.
    big = api.get("parts-1", "/parts/scan")
    assert big.status == 307 and big.headers["ETag"] == f'"{sha(scan)}"'
    assert sha(scan) in big.headers["Location"]
    # The record's own ETag names the whole version (JSON and parts), not the JSON alone.
    assert api.get("parts-1").headers["ETag"] == f'"{api.store.get("parts-1").content_hash}"'
    versions = api.get("parts-1", "/history").json()["versions"]
    assert [sorted(v["parts"]) for v in versions] == [["ocr"], ["ocr", "scan"]]
    listed = versions[1]["parts"]["scan"]
    assert listed["path"] == "/records/parts-1/versions/2/parts/scan"
    assert (listed["size"], f'"{listed["content_hash"]}"') == (len(scan), big.headers["ETag"])
    assert api.get("parts-1", listed["path"].removeprefix("/records/parts-1")).status == 307
    missing = api.get("parts-1", "/versions/1/parts/scan")
    assert missing.status == 404 and "no part 'scan'" in missing.problem()["detail"]
    bad = api.get("parts-1", "/parts/Scan")
    assert bad.status == 400 and bad.problem()["field"] == "parts"


def test_the_redirect_threshold_is_what_base64_needs() -> None:
    limit = responses.DEFAULT_RESPONSE_LIMIT
    largest = limit // 4 * 3
    assert responses.base64_size(largest) <= limit < responses.base64_size(largest + 1)
    assert limit < shapes.LAMBDA_RESPONSE_PAYLOAD_BYTES == 6 * 1024 * 1024


# --- not found, bad input -------------------------------------------------------------------


def test_unknown_ids_and_versions_are_404_problems(api: Api) -> None:
    api.store.put("known-1", {"v": 1}, updated_at=T1)
    for suffix in ("", "/versions/1", "/history"):
        assert api.get("never-stored", suffix).problem()["status"] == 404
    problem = api.get("known-1", "/versions/7").problem()
    assert problem["type"] == problems.NOT_FOUND and "version 7" in problem["detail"]
    assert api.request("/no/such/route").problem()["status"] == 404


def test_as_of_reads_the_version_current_then_by_either_clock(api: Api) -> None:
    api.store.put("asof-1", {"v": 1}, updated_at=T1)
    api.store.put("asof-1", {"v": 2}, updated_at=T2)
    later = "2999-01-01T00:00:00%2B01:00"  # an offset's "+" sent encoded, as a client must
    assert api.get("asof-1", f"?as_of={later}").json() == {"v": 2}
    between = "2026-11-01T21:00:00Z"
    answer = api.get("asof-1", f"?as_of={between}&clock=source")
    assert answer.json() == {"v": 1} and answer.headers["X-Vhs-Version"] == "1"
    # Parameters of no meaning here are ignored, repeated or not.
    query = "?x=1&x=2&y=%FF&as_of=2026-11-01T21:00:00Z&clock=source"
    assert api.get("asof-1", query).json() == {"v": 1}
    # The same with the "+" of an offset unencoded: a plus, not a form's space.
    assert api.get("asof-1", "?as_of=2026-11-01T22:00:00+01:00&clock=source").json() == {"v": 1}
    # Before anything was written, by either clock: a 404 that says so.
    for query in ("?as_of=2000-01-01T00:00:00Z", "?as_of=2000-01-01T00:00:00Z&clock=source"):
        assert "no version by 2000-01-01" in api.get("asof-1", query).problem()["detail"]
    api.store.delete("asof-1", deleted_at=T3)
    problem = api.get("asof-1", f"?as_of={later}&clock=source").problem()
    assert problem["status"] == 404 and "deleted" in problem["detail"]
    assert api.get("asof-1", f"?as_of={T2}&clock=source").json() == {"v": 2}


@pytest.mark.parametrize(
    "query, field",
    [
        ("?as_of=yesterday", "as_of"),
        ("?as_of=2026-11-01", "as_of"),
        ("?as_of=2026-02-30T00:00:00Z", "as_of"),
        ("?as_of=", "as_of"),
        ("?as_of=2026-11-01T00:00:00Z&as_of=2026-11-02T00:00:00Z", "as_of"),
        ("?clock=wall", "clock"),
        (f"?as_of={T1}&clock=", "clock"),
        ("?as_of=%FF", "as_of"),
    ],
)
def test_a_bad_moment_is_a_400_naming_it(api: Api, query: str, field: str) -> None:
    api.store.put("asof-2", {"v": 1}, updated_at=T1)
    problem = api.get("asof-2", query).problem()
    assert (problem["status"], problem["field"]) == (400, field), problem


def test_a_diff_is_a_json_patch_for_json_records_and_hashes_for_others(api: Api) -> None:
    api.store.put("diff-1", {"title": "Moby-Dick", "tags": ["whale"]}, updated_at=T1)
    api.store.put(
        "diff-1",
        {"title": "Moby-Dick", "tags": ["whale", "sea"]},
        updated_at=T2,
        parts={"ocr": (b"Call me Ishmael.", "text/plain")},
    )
    answer = api.get("diff-1", "/versions/1/diff/2").json()
    assert answer["kind"] == "json" and answer["body_changed"] is True
    assert answer["patch"] == [{"op": "add", "path": "/tags/1", "value": "sea"}]
    assert (answer["from"]["version"], answer["to"]["version"]) == (1, 2)
    assert answer["parts"]["ocr"]["change"] == "added" and answer["parts"]["ocr"]["from"] is None
    api.store.put("diff-2", SERVED_FROM_S3, updated_at=T1, content_type="image/png")
    api.store.put("diff-2", REDIRECTED, updated_at=T2, content_type="image/png")
    opaque = api.get("diff-2", "/versions/2/diff/1").json()
    assert (opaque["kind"], opaque["patch"], opaque["body_changed"]) == ("opaque", None, True)
    assert opaque["from"]["size"] == len(REDIRECTED) and opaque["to"]["size"] == len(SERVED_FROM_S3)
    assert api.get("diff-1", "/versions/1/diff/3").problem()["status"] == 404
    assert api.get("diff-1", "/versions/0/diff/1").problem()["field"] == "a"
    assert api.get("diff-1", "/versions/1/diff/x").problem()["field"] == "b"


def test_a_diff_too_large_for_the_response_is_a_200_without_its_patch(api: Api) -> None:
    """The response limit here is RESPONSE_LIMIT (32 KiB): a patch that fits the diff's own
    bound but not the response is left out, saying why, never a failed invocation."""
    old = {"text": ""}
    new = {"text": "é" * (RESPONSE_LIMIT // 2)}  # escaped as \u00e9 in Lambda's response form
    api.store.put("diff-large", old, updated_at=T1)
    api.store.put("diff-large", new, updated_at=T2)
    assert api.store.diff("diff-large", 1, 2).patch is not None  # the library carries it
    answer = api.get("diff-large", "/versions/1/diff/2")
    assert answer.status == 200
    diff = answer.json()
    assert (diff["kind"], diff["patch"], diff["patch_omitted"]) == ("json", None, "too_large")
    assert diff["reason"] == "the patch is more than a Lambda response carries"
    _conforms(_document(), "/records/{id}/versions/{a}/diff/{b}", "get", answer)


def test_a_record_nested_to_the_limit_and_a_body_that_is_not_json_are_served(api: Api) -> None:
    from vhs.strict_json import MAX_DEPTH

    deep = [1]
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    api.store.put("diff-deep", deep, updated_at=T1)
    api.store.put("diff-deep", json.loads(json.dumps(deep).replace("1", "2")), updated_at=T2)
    assert json.loads(api.get("diff-deep").body) == json.loads(json.dumps(deep).replace("1", "2"))
    diff = api.get("diff-deep", "/versions/1/diff/2").json()
    assert diff["kind"] == "json" and len(diff["patch"]) == 1
    # A body that claims JSON and is not (stored before the doors parsed it): opaque, a reason.
    api.store.put("diff-legacy", {"a": 1}, updated_at=T1)
    api.store.put("diff-legacy", b"{not json", updated_at=T2, content_type="text/plain")
    api.store.index.dynamodb.update_item(
        TableName=api.store.table_name,
        Key={"id": {"S": "diff-legacy"}},
        UpdateExpression="REMOVE c[0].ct",
    )
    answer = api.get("diff-legacy", "/versions/1/diff/2")
    assert answer.status == 200
    diff = answer.json()
    assert (diff["kind"], diff["patch_omitted"]) == ("opaque", "unreadable")
    assert diff["reason"].startswith("version 2's body is not JSON: not valid JSON")
    _conforms(_document(), "/records/{id}/versions/{a}/diff/{b}", "get", answer)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "QUERY"])
def test_a_method_a_route_lacks_is_405_naming_the_ones_it_has(api: Api, method: str) -> None:
    # QUERY: a method HTTP leaves open to clients, which a function URL passes on like any other.
    api.store.put("known-2", {"v": 1}, updated_at=T1, parts={"ocr": (b"t", "text/plain")})
    for target, allow in [
        ("/records/known-2", "GET, HEAD"),
        ("/records/never-stored/versions/1", "GET, HEAD"),
        ("/records/known-2/parts/ocr", "GET, HEAD"),
        ("/records/known-2/versions/1/parts/ocr", "GET, HEAD"),
        ("/records/known-2/history", "GET, HEAD"),
        ("/records/known-2/versions/1/diff/1", "GET, HEAD"),
        ("/openapi.json", "GET, HEAD"),
    ]:
        answer = api.request(target, method=method)
        problem = answer.problem()
        assert (problem["status"], problem["type"]) == (405, problems.NOT_ALLOWED), target
        assert answer.headers["Allow"] == allow and method in problem["detail"]
    assert api.request("/no/such/route", method=method).problem()["status"] == 404


@pytest.mark.parametrize("version", ["0", "-1", "x", "1.0", "01", "1_0", "%2B1", "9" * 17, "%20"])
def test_a_bad_version_is_a_400_problem_naming_it(api: Api, version: str) -> None:
    api.store.put("versioned-1", {"v": 1}, updated_at=T1)
    problem = api.request(f"/records/versioned-1/versions/{version}").problem()
    assert problem["status"] == 400 and problem["field"] == "version"


@pytest.mark.parametrize(
    "target", ["/records/%FF", "/records/%00", "/records/b1%0A", "/records/%20"]
)
def test_a_bad_id_is_a_400_problem_naming_it(api: Api, target: str) -> None:
    problem = api.request(target).problem()
    assert problem["status"] == 400 and problem["field"] == "id"
    assert problem["type"] == problems.INVALID


def test_a_deleted_record_is_404_and_its_earlier_versions_stay_readable(api: Api) -> None:
    api.store.put("gone-1", {"v": 1}, updated_at=T1)
    api.store.delete("gone-1", deleted_at=T2)
    problem = api.get("gone-1").problem()
    assert problem["status"] == 404 and "deleted at version 2" in problem["detail"]
    assert api.get("gone-1", "/versions/1").json() == {"v": 1}
    assert api.get("gone-1", "/versions/2").problem()["status"] == 404
    versions = api.get("gone-1", "/history").json()["versions"]
    assert [(v["version"], v["deleted"], v["content_hash"]) for v in versions][1] == (2, True, None)


# --- the ids ----------------------------------------------------------------------------------


def test_every_awkward_id_round_trips_as_one_segment(api: Api) -> None:
    for n, id in enumerate(AWKWARD_IDS):
        api.store.put(id, {"id": id, "n": n}, updated_at=T1)
    for id in AWKWARD_IDS:
        answer = api.get(id)
        assert (answer.status, answer.json()["id"]) == (200, id), id
        assert api.get(id, "/versions/1").json()["id"] == id
        assert api.get(id, "/history").json()["id"] == id


def test_the_hostile_id_corpus_gets_400_or_404_never_500_nor_another_ids_body(api: Api) -> None:
    """Every id of vhs_testing.bad_inputs, percent-encoded as a client should and also
    sent raw where HTTP lets it through: the valid ones are stored and read back (their own
    body, by content hash), the others are 400 or 404."""
    stored: dict[str, bytes] = {}
    ids: list[Any] = []
    for case in CASES:
        if case.category != "id":
            continue
        if isinstance(case.expected, Accepted):
            api.store.put(case.expected.id, case.expected.body, updated_at=T1)
            # What the library reads now (another test may have stored the same id).
            stored[case.expected.id] = api.store.get(case.expected.id).body
            ids.append(case.expected.id)
        else:
            ids.append(json.loads(case.body).get("id"))
    assert stored and len(ids) > len(stored)
    targets = []
    for id in ids:
        text = id if isinstance(id, str) else json.dumps(id)
        targets.append((text, f"/records/{segment(text)}"))
        raw = text.encode("utf-8", "surrogatepass")
        if all(0x21 <= byte < 0x7F and byte not in b"?#" for byte in raw):
            # As typed, unencoded: the id it names when it is one segment with nothing to
            # decode; otherwise it names no stored id ("/" splits it).
            named = text if "/" not in text and "%" not in text else None
            targets.append((named, f"/records/{raw.decode()}"))
    for id, target in targets:
        for suffix in ("", "/versions/1", "/history"):
            answer = api.request(target + suffix)
            assert answer.status in (200, 400, 404), (target, answer.status, answer.body[:200])
            if answer.status != 200:
                answer.problem()
                continue
            assert id in stored, (target, "a 200 for an id never stored")
            if suffix == "/history":
                assert answer.json()["id"] == id
            elif suffix == "":
                assert answer.body == stored[id], target
            else:
                assert answer.body == api.store.get(id, 1).body, target


# --- authorisation --------------------------------------------------------------------------


def test_unsigned_or_wrongly_signed_requests_are_403(api: Api) -> None:
    api.store.put("secret-1", {"v": 1}, updated_at=T1)
    target = "/records/secret-1"
    for answer in (
        api.request(target, sign=False),
        api.request(target, secret="not-the-secret"),
        api.request(target, service="s3"),
    ):
        assert answer.status == 403 and b"secret-1" not in answer.body
        assert answer.json() == {"Message": "Forbidden"}
    # A signature for one path is not one for another.
    headers = signed_headers("GET", api.url + "/records/other", region=api.region)
    assert api.request(target, headers=headers, sign=False).status == 403
    assert api.request(target).status == 200


# --- the OpenAPI document ---------------------------------------------------------------------


def test_the_openapi_document_describes_the_routes_and_is_current(api: Api) -> None:
    answer = api.request("/openapi.json")
    assert answer.status == 200
    document = answer.json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert set(paths) == {
        "/records/{id}",
        "/records/{id}/versions/{version}",
        "/records/{id}/history",
        "/records/{id}/parts/{name}",
        "/records/{id}/versions/{version}/parts/{name}",
        "/records/{id}/versions/{a}/diff/{b}",
        "/openapi.json",
    }
    assert set(paths["/records/{id}"]) == {"get", "head"}
    moment = {p["name"]: p for p in paths["/records/{id}"]["get"]["parameters"]}
    assert moment["as_of"]["in"] == moment["clock"]["in"] == "query"
    assert {"200", "304", "307", "400", "404"} <= set(paths["/records/{id}"]["get"]["responses"])
    parameters = {
        p["name"]: p for p in paths["/records/{id}/versions/{version}"]["get"]["parameters"]
    }
    assert parameters["version"]["in"] == "path" and parameters["version"]["required"]
    assert set(document["components"]["schemas"]) >= {"Problem", "History", "Version", "Diff"}
    # docs/read-api.openapi.json is this document (make openapi writes it).
    assert json.loads(OPENAPI_FILE.read_text()) == document, "run: make openapi"


def test_local_up_serves_the_read_api_and_exports_its_url(local_env: dict[str, str]) -> None:
    url = local_env[settings.READ_API_URL]
    assert url.startswith("http://127.0.0.1:")
    local = Api(url, local_env["AWS_DEFAULT_REGION"])
    answer = local.request("/openapi.json")
    assert answer.status == 200 and "paths" in answer.json()
    assert local.request("/openapi.json", sign=False).status == 403


# --- the document states the rules the API enforces -------------------------------------------


def _document() -> dict[str, Any]:
    return json.loads(routes.openapi_document())


def _valid(document: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    """Whether `value` is valid by a schema of the document (its $refs resolve against the
    document's components), formats (date-time) checked."""
    rooted = {**schema, "components": document["components"]}
    checker = jsonschema.FormatChecker()
    return jsonschema.Draft202012Validator(rooted, format_checker=checker).is_valid(value)


def _parameter(document: dict[str, Any], route: str, name: str) -> dict[str, Any]:
    (schema,) = [
        p["schema"] for p in document["paths"][route]["get"]["parameters"] if p["name"] == name
    ]
    return schema


def test_the_id_pattern_is_validate_ids_rule_for_every_character() -> None:
    """Every code point alone and after a letter: the document's pattern (Python's regex
    engine, as jsonschema applies it) accepts exactly what keys.validate_id does. Surrogates
    aside: a URL's UTF-8 cannot carry one (the API's answer to one is asserted below)."""
    pattern = re.compile(_parameter(_document(), "/records/{id}", "id")["pattern"])
    for code in [*range(0xD800), *range(0xE000, 0x110000)]:
        for id in (chr(code), "a" + chr(code)):
            assert bool(pattern.search(id)) == valid_id(id), hex(code)


MAX_ID = keys.MAX_ID_LENGTH
ID_SAMPLE = [
    *AWKWARD_IDS,
    "x" * MAX_ID,
    "x" * (MAX_ID + 1),
    "\U0001f600" * MAX_ID,
    "\U0001f600" * (MAX_ID + 1),
    " ",
    "\u00a0\u2003\u3000",
    "\ufeff",
    "\u200b",
    " a ",
    "a\tb",
    "a\n",
    "a\x7f",
    "a\x85",
]


def test_the_documented_id_version_and_part_name_are_what_the_api_accepts(api: Api) -> None:
    document = _document()
    id_schema = _parameter(document, "/records/{id}", "id")
    for id in ID_SAMPLE:
        answer = api.get(id)
        assert _valid(document, id_schema, id) == (answer.status != 400), (id, answer.status)
    # A surrogate's would-be UTF-8 (what no conforming client sends) is refused all the same.
    assert api.get("\ud800").problem()["field"] == "id"

    api.store.put("doc-1", {"v": 1}, updated_at=T1, parts={"ocr": b"text"})
    route = "/records/{id}/versions/{version}"
    version_schema = _parameter(document, route, "version")
    largest = 10**read_api_document.MAX_VERSION_DIGITS - 1
    for version in (-1, 0, 1, 2, largest, largest + 1):
        answer = api.get("doc-1", f"/versions/{version}")
        documented = _valid(document, version_schema, version)
        assert documented == (answer.status != 400), (version, answer.status)

    name_schema = _parameter(document, "/records/{id}/parts/{name}", "name")
    for name in ("ocr", "a", "0", "a" * 63, "a" * 64, "Scan", "-x", ".x", "x.y_z-1", "x/y", "é"):
        answer = api.get("doc-1", f"/parts/{segment(name)}")
        assert _valid(document, name_schema, name) == (answer.status != 400), (name, answer)


def _conforms(document: dict[str, Any], route: str, method: str, answer: Answer) -> None:
    """`answer` is one the document declares for `method` `route`: its status, every header
    it declares (present when required, valid by its schema), and its body by media type."""
    responses = document["paths"][route][method.lower()]["responses"]
    assert str(answer.status) in responses, (route, method, answer.status)
    declared = responses[str(answer.status)]
    for name, header in declared.get("headers", {}).items():
        value = answer.headers[name]
        assert value is not None or not header.get("required"), (route, name)
        if value is None:
            continue
        schema = header["schema"]
        typed = int(value) if schema.get("type") == "integer" else value
        assert _valid(document, schema, typed), (route, name, value)
        if schema.get("format") == "uri":
            parts = urlsplit(value)
            assert parts.scheme in ("http", "https") and parts.netloc, value
    content = declared.get("content", {})
    if method == "HEAD" or not content:
        assert answer.body == b"", (route, method, answer.status)
        return
    media = (answer.headers["Content-Type"] or "").split(";", 1)[0].strip()
    assert media in content or "*/*" in content, (route, answer.status, media, list(content))
    schema = content.get(media, content.get("*/*"))["schema"]
    if schema.get("format") != "binary":
        assert _valid(document, schema, json.loads(answer.body)), (route, answer.body[:200])


def test_every_answer_is_one_the_document_declares(api: Api) -> None:
    document = _document()
    api.store.put("conform-json", {"title": "Moby-Dick", "n": [1, 2.5, None]}, updated_at=T1)
    api.store.put("conform-json", ["second", {"v": 2}], updated_at=T2)
    api.store.put("conform-bin", SERVED_FROM_S3, updated_at=T1, content_type="image/png")
    api.store.put("conform-big", REDIRECTED, updated_at=T1, content_type="video/mp4")
    api.store.put(
        "conform-parts",
        "plain",
        updated_at=T1,
        parts={"ocr": (b"text", "text/plain"), "scan": REDIRECTED},
    )
    api.store.put("conform-gone", {"v": 1}, updated_at=T1)
    api.store.delete("conform-gone", deleted_at=T3)
    etag = api.get("conform-json").headers["ETag"]
    part_etag = api.get("conform-parts", "/parts/ocr").headers["ETag"]
    body, part = "/records/{id}", "/records/{id}/parts/{name}"
    version = "/records/{id}/versions/{version}"
    version_part = f"{version}/parts/{{name}}"
    history = "/records/{id}/history"
    diff = "/records/{id}/versions/{a}/diff/{b}"
    requests = [
        (body, "conform-json", "", {}),
        (body, "conform-json", "", {"If-None-Match": etag}),
        (body, "conform-bin", "", {}),
        (body, "conform-big", "", {}),
        (body, "conform-gone", "", {}),
        (body, "never-stored", "", {}),
        (body, " ", "", {}),
        (body, "conform-json", "?as_of=2999-01-01T00:00:00Z", {}),
        (body, "conform-json", f"?as_of={T1}&clock=source", {}),
        (body, "conform-json", "?as_of=2000-01-01T00:00:00%2B01:00", {}),
        (body, "conform-gone", f"?as_of={T3}&clock=source", {}),
        (body, "conform-json", "?clock=wall", {}),
        (version, "conform-json", "/versions/1", {}),
        (version, "conform-json", "/versions/1", {"If-None-Match": "*"}),
        (version, "conform-gone", "/versions/2", {}),
        (version, "conform-json", "/versions/0", {}),
        (part, "conform-parts", "/parts/ocr", {}),
        (part, "conform-parts", "/parts/ocr", {"If-None-Match": part_etag}),
        (part, "conform-parts", "/parts/scan", {}),
        (part, "conform-parts", "/parts/none", {}),
        (part, "conform-parts", "/parts/Bad", {}),
        (version_part, "conform-parts", "/versions/1/parts/ocr", {}),
        (version_part, "conform-parts", "/versions/1/parts/scan", {}),
        (version_part, "conform-parts", "/versions/x/parts/ocr", {}),
        (version_part, "conform-parts", "/versions/1/parts/ocr", {"If-None-Match": part_etag}),
        (version_part, "conform-parts", "/versions/9/parts/ocr", {}),
        (history, "conform-json", "/history", {}),
        (history, "conform-parts", "/history", {}),
        (history, "conform-gone", "/history", {}),
        (history, "never-stored", "/history", {}),
        (history, "a\x00", "/history", {}),
        (diff, "conform-json", "/versions/1/diff/2", {}),
        (diff, "conform-parts", "/versions/1/diff/1", {}),
        (diff, "conform-bin", "/versions/1/diff/1", {}),
        (diff, "conform-json", "/versions/1/diff/9", {}),
        (diff, "conform-json", "/versions/0/diff/1", {}),
    ]
    seen: dict[str, set[int]] = {}
    for route, id, suffix, headers in requests:
        for method in ("GET", "HEAD"):
            answer = api.get(id, suffix, method=method, headers=headers)
            _conforms(document, route, method, answer)
            seen.setdefault(route, set()).add(answer.status)
    assert seen[body] == seen[part] == seen[version_part] == {200, 304, 307, 400, 404}
    assert seen[version] == {200, 304, 400, 404} and seen[history] == {200, 400, 404}
    assert seen[diff] == {200, 400, 404}
    for method in ("GET", "HEAD"):
        _conforms(document, "/openapi.json", method, api.request("/openapi.json", method=method))
    # A damaged item's 502, on every route that reads an item.
    raw = damages_of(Layout.TEXT)[0].applied(well_formed(api.store, "conform-sound", Layout.TEXT))
    raw["id"] = {"S": "conform-damaged"}
    plant(api.store, raw)
    for route, suffix in [(body, ""), (version, "/versions/1"), (history, "/history")]:
        for method in ("GET", "HEAD"):
            answer = api.get("conform-damaged", suffix, method=method)
            assert answer.status == problems.DAMAGED_STATUS
            _conforms(document, route, method, answer)
