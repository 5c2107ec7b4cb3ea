"""The read API's routes on Powertools' function URL resolver, its error handlers, and `serve`,
which answers one request with the store, logger and metrics the handler gives it (carried in
the resolver's routing context for the request: nothing here builds a client or reads the
environment for them)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.metrics import MetricUnit

from ..changes.feed import version_path
from ..codec import served_content_type
from ..errors import DamagedItem, InvalidInput, RecordNotFound
from ..model import StoredVersion
from ..parts import check_part_name
from ..store import VersionedHybridStore
from .document import (
    AS_OF,
    BODY_RESPONSES,
    CLOCK,
    CLOCKS,
    PART_RESPONSES,
    PROBLEMS,
    STORE_CLOCK,
    Diff,
    History,
    IdSegment,
    Part,
    PartName,
    Version,
    VersionNumber,
    document,
)
from .problems import (
    DAMAGED,
    DAMAGED_STATUS,
    INTERNAL,
    INVALID,
    NOT_ALLOWED,
    NOT_FOUND,
    problem,
)
from .responses import (
    base64_size,
    body_response,
    etag_matches,
    presign_seconds,
    response_limit,
    version_headers,
)

app = LambdaFunctionUrlResolver(enable_validation=True)

# The routing context's key for what `serve` is given.
_SERVED_WITH = "vhs_read_api"


@dataclass(frozen=True)
class ServedWith:
    """What a request is answered with: the store (built when a route first needs it), and
    the logger and metrics of the function."""

    store: Callable[[], VersionedHybridStore]
    logger: Logger
    metrics: Metrics


def serve(event: dict[str, Any], context: Any, served_with: ServedWith) -> dict[str, Any]:
    """The function URL's response to `event`: a HEAD's without the body, and one log line."""
    app.append_context(**{_SERVED_WITH: served_with})
    response = app.resolve(event, context)
    http = event.get("requestContext", {}).get("http", {})
    if str(http.get("method", "")).upper() == "HEAD":
        # The GET's status and headers, no body (RFC 9110, 9.3.2), problems included.
        response["body"] = ""
        response["isBase64Encoded"] = False
    # A function URL keeps no access log: this line is the request's record (the path is
    # still percent-encoded, so an id is never logged in a form that could forge a line).
    served_with.logger.info(
        "request",
        extra={
            "method": http.get("method"),
            "path": event.get("rawPath"),
            "status": response.get("statusCode"),
            "version": response.get("headers", {}).get("X-Vhs-Version"),
        },
    )
    return response


def _served_with() -> ServedWith:
    return app.context[_SERVED_WITH]


def store() -> VersionedHybridStore:
    return _served_with().store()


def _count(name: str, value: int, unit: MetricUnit = MetricUnit.Count) -> None:
    _served_with().metrics.add_metric(name=name, unit=unit, value=value)


# --- routes ---------------------------------------------------------------------------------
# No return annotation on the body routes: Powertools would validate the body against it, and
# so serialise it; a body leaves as `responses.body_response` encodes it.


# Every route answers HEAD as it answers GET, without the body (RFC 9110, 9.3.2: a
# general-purpose server supports HEAD wherever GET); `serve` drops a HEAD answer's body.
METHODS = ["GET", "HEAD"]


def _route(path: str, summary: str, responses: dict[int | str, Any] | None = None) -> Callable:
    return app.route(path, method=METHODS, summary=summary, responses=responses)


def _bytes_route(path: str, summary: str, responses: dict[int | str, Any]) -> Callable:
    """A route that serves a body or a part's bytes: a HEAD reads no bytes at all."""
    return _route(path, summary, responses)


@_bytes_route(
    "/records/<id>",
    "The latest version of a record, or the one current at a moment",
    BODY_RESPONSES,
)
def latest(id: IdSegment):
    return _send(store().locate(_id(id), **_moment()))


@_bytes_route("/records/<id>/versions/<version>", "A retained version of a record", BODY_RESPONSES)
def version(id: IdSegment, version: VersionNumber):
    return _send(store().locate(_id(id), int(version)))


@_bytes_route(
    "/records/<id>/parts/<name>", "A part of the latest version of a record", PART_RESPONSES
)
def latest_part(id: IdSegment, name: PartName):
    return _send_part(store().locate(_id(id)), _part_name(name))


@_bytes_route(
    "/records/<id>/versions/<version>/parts/<name>",
    "A part of a retained version of a record",
    PART_RESPONSES,
)
def version_part(id: IdSegment, version: VersionNumber, name: PartName):
    return _send_part(store().locate(_id(id), int(version)), _part_name(name))


@_route(
    "/records/<id>/history",
    "The retained versions of a record, deletes included",
    {
        200: {
            "description": "the retained versions, oldest first",
            "content": {"application/json": {"model": History}},
        },
        **PROBLEMS,
    },
)
def history(id: IdSegment) -> History:
    record_id = _id(id)
    versions = [
        Version(
            version=v.version,
            updated_at=v.updated_at.isoformat(),
            size=v.size,
            content_hash=v.content_hash,
            deleted=v.deleted,
            content_type=v.content_type,
            parts={
                name: Part(
                    content_hash=part.content_hash,
                    size=part.size,
                    content_type=part.content_type,
                    path=f"{version_path(record_id, v.version)}/parts/{name}",
                )
                for name, part in v.parts.items()
            },
        )
        for v in store().history(record_id)
    ]
    return History(id=record_id, versions=versions)


@_route(
    "/records/<id>/versions/<a>/diff/<b>",
    "What changed from retained version a to b: a JSON Patch for JSON records",
    {
        200: {
            "description": "the two versions, whether the bodies differ, a JSON Patch (JSON "
            "records), and each part's change",
            "content": {"application/json": {"model": Diff}},
        },
        **PROBLEMS,
    },
)
def diff(id: IdSegment, a: VersionNumber, b: VersionNumber):
    found = store().diff(_id(id), int(a), int(b))
    text = json.dumps(found.as_json(), ensure_ascii=False)
    if len(json.dumps(text)) > response_limit():  # as Lambda serialises the response
        reason = "the patch is more than a Lambda response carries"
        text = json.dumps(found.without_patch(reason).as_json(), ensure_ascii=False)
    return Response(200, "application/json", text)


@_route("/openapi.json", "This API's OpenAPI document")
def openapi() -> Response[str]:
    return Response(200, "application/json", openapi_document())


@functools.cache
def openapi_document() -> str:
    """The OpenAPI document of these routes (docs/read-api.openapi.json holds a copy)."""
    return document(app)


def _id(segment: str) -> str:
    """The id a path segment names: percent-decoded once, as UTF-8 (strictly: bytes that are
    not UTF-8 name no id). Validated by the store."""
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise InvalidInput("id", "is not percent-encoded UTF-8") from None


def _send(found: StoredVersion) -> Response:
    headers = version_headers(found.version, found.content_hash, found)
    content_type = served_content_type(found.content_type)
    early = _without_reading(
        headers, found.size, content_type, lambda seconds: store().body_url(found, seconds)
    )
    if early is not None:
        return early
    record = store().read(found)
    if record.version != found.version or record.content_hash != found.content_hash:
        # The body was collected under us and the item read again (store.read): another
        # version is current now, and the headers must name it.
        headers = version_headers(record.version, record.content_hash, record)
        content_type = served_content_type(record.content_type)
    _count("read_bytes", len(record.body), MetricUnit.Bytes)
    return body_response(record.body, content_type, response_limit(), headers)


def _moment() -> dict[str, str]:
    """`?as_of=T` (and `clock`) as `store.locate`'s arguments. Read from the raw query, where
    "+" is a plus (an offset's sign), not the space of a form's encoding."""
    query: dict[str, str] = {}
    for pair in filter(None, (app.current_event.raw_query_string or "").split("&")):
        raw_name, _, raw_value = pair.partition("=")
        name = unquote(raw_name, errors="replace")
        if name not in (AS_OF, CLOCK):  # not this API's: ignored, as before
            continue
        if name in query:
            raise InvalidInput(name, "is given more than once")
        try:
            query[name] = unquote(raw_value, errors="strict")
        except UnicodeDecodeError:
            raise InvalidInput(name, "is not percent-encoded UTF-8") from None
    clock = query.get(CLOCK, STORE_CLOCK)
    if clock not in CLOCKS:
        raise InvalidInput(CLOCK, f"must be one of {', '.join(CLOCKS)}")
    if AS_OF not in query:
        return {}
    return {CLOCKS[clock]: query[AS_OF]}


def _part_name(segment: str) -> str:
    return check_part_name(_id(segment))


def _send_part(found: StoredVersion, name: str) -> Response:
    """A part, by the body's rules: the part's hash is its ETag (304 before anything is
    read), a part too large for the response is redirected to a presigned URL, and the bytes
    are read (and checked against the hash) only when they are sent."""
    part = store().stored_part(found, name)
    headers = version_headers(found.version, part.content_hash, found)
    content_type = served_content_type(part.content_type)
    early = _without_reading(
        headers, part.size, content_type, lambda s: store().part_url(found, name, s)
    )
    if early is not None:
        return early
    data = store().read_part(found, name)
    _count("read_bytes", len(data), MetricUnit.Bytes)
    return body_response(data, content_type, response_limit(), headers)


def _without_reading(
    headers: dict[str, str],
    size: int,
    content_type: str,
    presigned: Callable[[int], str | None],
) -> Response | None:
    """The answers that need no bytes read: 304 when If-None-Match names the ETag, 307 to
    `presigned(seconds)` when `size` bytes are too large for the response (None: inline,
    never that large), and a HEAD's 200. None: read the bytes and send them."""
    if etag_matches(app.current_event.headers.get("if-none-match") or "", headers["ETag"]):
        _count("read_not_modified", 1)
        return Response(304, headers=headers, body="")
    if base64_size(size) > response_limit():
        url = presigned(presign_seconds())
        if url is not None:
            _count("read_redirected", 1)
            return Response(
                307, headers={**headers, "Location": url, "Cache-Control": "no-store"}, body=""
            )
    if app.current_event.http_method.upper() == "HEAD":
        return Response(200, content_type, "", headers)
    return None


# --- errors -------------------------------------------------------------------------------


@app.exception_handler(InvalidInput)
def _invalid(error: InvalidInput) -> Response:
    return problem(400, INVALID, "Bad request", f"{error.field} {error.reason}", field=error.field)


@app.exception_handler(RequestValidationError)
def _unvalidated(error: RequestValidationError) -> Response:
    # Pydantic's own messages would name Python types; the field and a plain reason suffice.
    field = next((str(e["loc"][-1]) for e in error.errors() if e.get("loc")), "request")
    return problem(400, INVALID, "Bad request", f"{field} must be a whole number >= 1", field=field)


@app.exception_handler(RecordNotFound)
def _not_found(error: RecordNotFound) -> Response:
    return problem(404, NOT_FOUND, "Not found", str(error))


@app.exception_handler(DamagedItem)
def _damaged(error: DamagedItem) -> Response:
    _served_with().logger.error(
        "damaged item", extra={"id": error.id, "field": error.field, "reason": error.reason}
    )
    _count("read_damaged", 1)
    return problem(
        DAMAGED_STATUS,
        DAMAGED,
        "Damaged item",
        f"this item is damaged: {error.id!r}, field {error.field}: {error.reason}",
        field=error.field,
        id=error.id,
    )


@app.not_found
def _no_route(error: NotFoundError) -> Response:
    # A path that names a route answers a method it lacks, whichever method a client invents
    # (a function URL passes any on), with a 405 and the route's methods (RFC 9110), not a 404.
    # Powertools keeps its routes in these lists and gives no public way to match a path.
    path = app.context.get("_path", app.current_event.path)
    routes = app._static_routes + app._dynamic_routes
    allow = list(dict.fromkeys(r.method for r in routes if r.rule.match(path)))
    if not allow:
        return problem(404, NOT_FOUND, "Not found", "no such route: see /openapi.json")
    method = app.current_event.http_method.upper()
    answer = problem(405, NOT_ALLOWED, "Method not allowed", f"{method}: only {', '.join(allow)}")
    answer.headers["Allow"] = ", ".join(allow)
    return answer


@app.exception_handler(Exception)
def _fault(error: Exception) -> Response:
    _served_with().logger.exception("read failed", extra={"path": app.current_event.path})
    _count("read_failed", 1)
    return problem(500, INTERNAL, "Internal error", "the read failed; it is logged")
