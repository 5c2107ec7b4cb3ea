"""The read API Lambda: records over HTTP, behind a Lambda function URL (AuthType AWS_IAM).

Design notes:

* The front door is a function URL, not API Gateway: IAM (SigV4, service "lambda") already
  authorises every request, and the URL adds nothing per request to the Lambda invocation
  (API Gateway would add $1-3.50 a million). Powertools' `LambdaFunctionUrlResolver` routes
  (payload format 2.0) and generates the OpenAPI document from these routes
  (docs/read-api.openapi.json, checked by tests/core/test_read_api.py).
* An id is ONE path segment, percent-encoded: ids may hold "/", "%", spaces, anything. A
  function URL hands over `rawPath` still encoded and Powertools matches path parameters
  without decoding them (its pattern excludes "/", so "%2F" stays inside the segment), so the
  segment is decoded here, once, as UTF-8. A segment that does not decode, or an id that
  `keys.validate_id` refuses, is a 400.
* One item read per request (`store.locate`), and the body only when it is sent: an
  `If-None-Match` that names the content hash (the `ETag`) gets a 304 before any body is read
  or URL presigned, and a body too large for the response gets a 307 to a presigned S3 URL,
  also without reading it. A Lambda response carries at most 6 MB, and binary bodies travel
  base64 (4/3 larger): `response_limit()` is the budget of the encoded body, so a body is
  redirected when its base64 form would exceed it. Text bodies travel as JSON strings when
  that is no larger than the budget (escaping may exceed 4/3), else base64.
* Errors are RFC 9457 problem details (application/problem+json). Bad input (an id or version
  that cannot be one) is 400, an unknown id, version or route 404; a deleted record is 404
  too, not 410, because a later put brings the id back. A damaged item (errors.DamagedItem) is
  a 502 naming the id and the field. Anything else is a 500 problem with nothing of the error
  in it (it is logged), never a stack trace.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from handlers.read_api_document import (
    AS_OF,
    BODY_RESPONSES,
    CLOCK,
    CLOCKS,
    PART_RESPONSES,
    PROBLEM_JSON,
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
from vhs import settings
from vhs.bodies.parts import check_part_name
from vhs.changes.feed import version_path
from vhs.codec import served_content_type
from vhs.errors import DamagedItem, InvalidInput, RecordNotFound
from vhs.model import Record, StoredVersion
from vhs.resources import LAMBDA_RESPONSE_PAYLOAD_BYTES, READ_API
from vhs.settings import READ_API_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(READ_API_FUNCTION)

# A Lambda function URL's response payload may be 6 MB (6,291,456 bytes) of JSON: the body
# plus the status, headers and JSON framing. 64 KiB of that is left to the rest, so a body's
# encoded form may take the remainder; base64 makes 3 bytes 4, so binary bodies up to
# 4,669,440 bytes come back in the response and larger ones are redirected.
DEFAULT_RESPONSE_LIMIT = LAMBDA_RESPONSE_PAYLOAD_BYTES - 64 * 1024
# Problem types (RFC 9457 `type`), documented in docs/read-api.md.
INVALID = "urn:vhs:problem:invalid-input"
NOT_FOUND = "urn:vhs:problem:not-found"
NOT_ALLOWED = "urn:vhs:problem:method-not-allowed"
INTERNAL = "urn:vhs:problem:internal"
DAMAGED = "urn:vhs:problem:damaged-item"
# A damaged item is the store's answer failing its checks, not a fault of this function nor of
# the request: 502, the status of an invalid answer from the server behind this one (RFC 9110,
# 15.6.3), distinct from a 500 and, unlike a 4xx, not the client's to fix.
DAMAGED_STATUS = 502
# Text content types travel as JSON strings in the response; everything else as base64.
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")
_TEXT_SUFFIXES = ("+json", "+xml")

app = LambdaFunctionUrlResolver(enable_validation=True)


@per_environment
def store() -> VersionedHybridStore:
    return VersionedHybridStore.from_env()


def presign_seconds() -> int:
    return settings.whole_number(settings.READ_API_PRESIGN_SECONDS, READ_API.presign_seconds)


def response_limit() -> int:
    return settings.whole_number(settings.READ_API_RESPONSE_LIMIT, DEFAULT_RESPONSE_LIMIT)


def base64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


# --- routes ---------------------------------------------------------------------------------
# No return annotation on the body routes: Powertools would validate the body against it, and
# so serialise it; a body leaves as `_body_response` encodes it.


# Every route answers HEAD as it answers GET, without the body (RFC 9110, 9.3.2: a
# general-purpose server supports HEAD wherever GET); `handler` drops a HEAD answer's body.
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
    headers = _version_headers(found.version, found.content_hash, found)
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
        headers = _version_headers(record.version, record.content_hash, record)
        content_type = served_content_type(record.content_type)
    metrics.add_metric(name="read_bytes", unit=MetricUnit.Bytes, value=len(record.body))
    return _body_response(record.body, content_type, response_limit(), headers)


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
    headers = _version_headers(found.version, part.content_hash, found)
    content_type = served_content_type(part.content_type)
    early = _without_reading(
        headers, part.size, content_type, lambda s: store().part_url(found, name, s)
    )
    if early is not None:
        return early
    data = store().read_part(found, name)
    metrics.add_metric(name="read_bytes", unit=MetricUnit.Bytes, value=len(data))
    return _body_response(data, content_type, response_limit(), headers)


def _without_reading(
    headers: dict[str, str],
    size: int,
    content_type: str,
    presigned: Callable[[int], str | None],
) -> Response | None:
    """The answers that need no bytes read: 304 when If-None-Match names the ETag, 307 to
    `presigned(seconds)` when `size` bytes are too large for the response (None: inline,
    never that large), and a HEAD's 200. None: read the bytes and send them."""
    if _etag_matches(headers["ETag"]):
        metrics.add_metric(name="read_not_modified", unit=MetricUnit.Count, value=1)
        return Response(304, headers=headers, body="")
    if base64_size(size) > response_limit():
        url = presigned(presign_seconds())
        if url is not None:
            metrics.add_metric(name="read_redirected", unit=MetricUnit.Count, value=1)
            return Response(
                307, headers={**headers, "Location": url, "Cache-Control": "no-store"}, body=""
            )
    if app.current_event.http_method.upper() == "HEAD":
        return Response(200, content_type, "", headers)
    return None


def _version_headers(
    number: int, content_hash: str, what: StoredVersion | Record
) -> dict[str, str]:
    return {
        "ETag": f'"{content_hash}"',
        "X-Vhs-Version": str(number),
        "X-Vhs-Updated-At": what.updated_at.isoformat(),
        # Revalidate every time (a 304 costs one item read and no body): the latest changes,
        # and a retained version may stop being retained.
        "Cache-Control": "private, no-cache",
    }


def _etag_matches(etag: str) -> bool:
    """Whether If-None-Match names `etag` (RFC 9110: weak comparison, a list, or *)."""
    header = app.current_event.headers.get("if-none-match") or ""
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags


def _body_response(body: bytes, content_type: str, limit: int, headers: dict[str, str]) -> Response:
    """A 200 carrying `body` as the function URL's response carries it: a text body as a
    string when its JSON form (how Lambda serialises the response, non-ASCII escaped) fits
    `limit`, otherwise base64. Encoded here, whatever the content type: Powertools would
    serialise or decode a body with a JSON content type that is not a string."""
    if _is_text(content_type):
        try:
            text = body.decode()
        except UnicodeDecodeError:
            text = None
        if text is not None and len(json.dumps(text)) <= limit:
            return Response(200, content_type, text, headers)
    response = Response(200, content_type, base64.b64encode(body).decode(), headers)
    response.base64_encoded = True
    return response


def _is_text(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.startswith(_TEXT_TYPES) or media.endswith(_TEXT_SUFFIXES)


# --- errors -------------------------------------------------------------------------------


def problem(status: int, type: str, title: str, detail: str, **extra: Any) -> Response:
    body = {"type": type, "title": title, "status": status, "detail": detail, **extra}
    return Response(status, PROBLEM_JSON, json.dumps(body))


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
    logger.error(
        "damaged item", extra={"id": error.id, "field": error.field, "reason": error.reason}
    )
    metrics.add_metric(name="read_damaged", unit=MetricUnit.Count, value=1)
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
    logger.exception("read failed", extra={"path": app.current_event.path})
    metrics.add_metric(name="read_failed", unit=MetricUnit.Count, value=1)
    return problem(500, INTERNAL, "Internal error", "the read failed; it is logged")


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = app.resolve(event, context)
    if str(event.get("requestContext", {}).get("http", {}).get("method", "")).upper() == "HEAD":
        # The GET's status and headers, no body (RFC 9110, 9.3.2), problems included.
        response["body"] = ""
        response["isBase64Encoded"] = False
    # A function URL keeps no access log: this line is the request's record (the path is
    # still percent-encoded, so an id is never logged in a form that could forge a line).
    http = event.get("requestContext", {}).get("http", {})
    logger.info(
        "request",
        extra={
            "method": http.get("method"),
            "path": event.get("rawPath"),
            "status": response.get("statusCode"),
            "version": response.get("headers", {}).get("X-Vhs-Version"),
        },
    )
    return response
