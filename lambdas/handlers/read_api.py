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
  too, not 410, because a later put brings the id back. Anything else is a 500 problem with
  nothing of the error in it (it is logged), never a stack trace.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from handlers.observability import instrumented, logger_and_metrics
from vhs import keys, settings
from vhs.changes.feed import version_path
from vhs.codec import served_content_type
from vhs.errors import InvalidInput, RecordNotFound
from vhs.model import Record, StoredVersion
from vhs.parts import PART_NAME_PATTERN, check_part_name
from vhs.resources import LAMBDA_RESPONSE_PAYLOAD_BYTES, READ_API
from vhs.settings import READ_API_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(READ_API_FUNCTION)

# A Lambda function URL's response payload may be 6 MB (6,291,456 bytes) of JSON: the body
# plus the status, headers and JSON framing. 64 KiB of that is left to the rest, so a body's
# encoded form may take the remainder; base64 makes 3 bytes 4, so binary bodies up to
# 4,669,440 bytes come back in the response and larger ones are redirected.
DEFAULT_RESPONSE_LIMIT = LAMBDA_RESPONSE_PAYLOAD_BYTES - 64 * 1024
PROBLEM_JSON = "application/problem+json"
OPENAPI_TITLE = "VHS read API"
OPENAPI_VERSION = "1"
# Problem types (RFC 9457 `type`), documented in docs/read-api.md.
INVALID = "urn:vhs:problem:invalid-input"
NOT_FOUND = "urn:vhs:problem:not-found"
INTERNAL = "urn:vhs:problem:internal"
# Text content types travel as JSON strings in the response; everything else as base64.
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")
_TEXT_SUFFIXES = ("+json", "+xml")
# A version in a path: at most this many decimal digits (VersionNumber's pattern).
MAX_VERSION_DIGITS = 16
CONTENT_HASH_PATTERN = f"^{keys.CONTENT_HASH.pattern}$"

app = LambdaFunctionUrlResolver(enable_validation=True)


@functools.cache
def store() -> VersionedHybridStore:
    # Built on first use, not at import, so the import stays cheap and tests can set the env.
    return VersionedHybridStore.from_env()


def reset() -> None:
    """Forget the configured store (tests and the local server point the handler at a fresh
    stack) and read the metrics namespace again."""
    store.cache_clear()
    metrics.namespace = settings.metrics_namespace()


def presign_seconds() -> int:
    return settings.whole_number(settings.READ_API_PRESIGN_SECONDS, READ_API.presign_seconds)


def response_limit() -> int:
    return settings.whole_number(settings.READ_API_RESPONSE_LIMIT, DEFAULT_RESPONSE_LIMIT)


def base64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


# --- the OpenAPI document's shapes --------------------------------------------------------


# Every field is always written (serialization defaults required) and nothing else is.
_EXACT = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)
_DATE_TIME = {"format": "date-time"}


class Problem(BaseModel):
    """RFC 9457 problem details."""

    model_config = ConfigDict(extra="forbid")
    type: str = Field(description="what kind of problem: urn:vhs:problem:...")
    title: str
    status: int
    detail: str
    field: str | None = Field(default=None, description="the input at fault (400 only)")


class Part(BaseModel):
    model_config = _EXACT
    content_hash: str = Field(
        description="sha256 hex of the part: its ETag", pattern=CONTENT_HASH_PATTERN
    )
    size: int = Field(ge=0)
    content_type: str
    path: str = Field(description="where this API serves it: /records/{id}/versions/{n}/parts/…")


class Version(BaseModel):
    model_config = _EXACT
    version: int = Field(ge=1)
    updated_at: str = Field(description="RFC 3339", json_schema_extra=_DATE_TIME)
    size: int = Field(ge=0, description="bytes of the body (0 for a delete)")
    content_hash: str | None = Field(
        pattern=CONTENT_HASH_PATTERN,
        description="the version's ETag: sha256 hex of the body, or for a version with parts "
        "of its manifest (the body and every part); null for a delete",
    )
    deleted: bool
    content_type: str | None
    parts: dict[str, Part] = Field(
        default_factory=dict,
        description="the version's parts by name; empty without parts",
        json_schema_extra={"propertyNames": {"pattern": PART_NAME_PATTERN}},
    )


class History(BaseModel):
    model_config = _EXACT
    id: str = Field(json_schema_extra=lambda schema: schema.update(_id_schema()))
    versions: list[Version] = Field(description="the retained versions, oldest first")


_PROBLEMS: dict[int | str, Any] = {
    code: {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for code, description in (
        (400, "a bad id or version"),
        (404, "unknown id, version not retained, or the record is deleted"),
        (500, "an internal error: logged, nothing of it in the answer"),
    )
}


def _id_schema() -> dict[str, Any]:
    """What keys.validate_id accepts, as JSON Schema (of the decoded id)."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": keys.MAX_ID_LENGTH,
        "pattern": keys.id_pattern(),
    }


# The path parameters' schemas in the document: the rules the store checks (the id's and the
# part name's, refused with a 400 naming `id` or `parts`), stated here rather than validated by
# Powertools, whose failures would all be reported as the version's problem.
_PARAMETER_SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "id": _id_schema,
    "version": lambda: {"type": "integer", "minimum": 1, "maximum": 10**MAX_VERSION_DIGITS - 1},
    "name": lambda: {"type": "string", "pattern": PART_NAME_PATTERN},
}
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "ETags, a list or *: a 304 when one names the ETag (W/ compares weakly)",
    "schema": {"type": "string"},
}


def _served(what: str, content: str) -> dict[int | str, Any]:
    """The responses of a route that serves bytes (`what`: "body" or "part")."""
    headers = {
        "ETag": {
            "description": f'the {what}\'s sha256 hex, quoted: "<sha256>"',
            "required": True,
            "schema": {"type": "string", "pattern": f'^"{keys.CONTENT_HASH.pattern}"$'},
        },
        "X-Vhs-Version": {
            "description": "the version's number",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        },
        "X-Vhs-Updated-At": {
            "description": "the version's updated_at, RFC 3339",
            "required": True,
            "schema": {"type": "string", **_DATE_TIME},
        },
        "Cache-Control": {
            "description": "private, no-cache (no-store on a 307)",
            "required": True,
            "schema": {"type": "string"},
        },
    }
    binary = {"*/*": {"schema": {"type": "string", "format": "binary"}}}
    if what == "body":
        # A JSON record (a put of a JSON value) is served as application/json.
        binary = {"application/json": {"schema": {}}, **binary}
    return {
        200: {"description": content, "headers": headers, "content": binary},
        304: {"description": "If-None-Match named the ETag", "headers": headers},
        307: {
            "description": f"a {what} too large for a Lambda response: Location is a presigned "
            "S3 GET URL, valid for VHS_READ_API_PRESIGN_SECONDS (60 s by default)",
            "headers": {
                **headers,
                "Location": {
                    "description": "the presigned S3 GET URL",
                    "required": True,
                    "schema": {"type": "string", "format": "uri"},
                },
            },
        },
        **_PROBLEMS,
    }


_BODY_RESPONSES = _served("body", "the body, with the record's content type")
_PART_RESPONSES = _served("part", "the part's bytes, with its content type")
# Checked by parts.check_part_name (a 400 naming `parts`), not by a pattern here: a failed
# pattern would be reported as the version's problem.
PartName = Annotated[str, Path(description=f"a part's name, {PART_NAME_PATTERN}")]
IdSegment = Annotated[
    str,
    Path(description="the record id, percent-encoded as ONE path segment ('/' as %2F)"),
]
# A string of digits, not an int: pydantic's lax int would take "1.0" and "1_0" as versions.
VersionNumber = Annotated[
    str,
    Path(
        pattern=rf"^[1-9][0-9]{{0,{MAX_VERSION_DIGITS - 1}}}$",
        description="a version number: a whole number >= 1, in decimal digits",
    ),
]


# --- routes ---------------------------------------------------------------------------------
# No return annotation on the body routes: Powertools would validate the body against it, and
# so serialise it; a body leaves as `_body_response` encodes it.


def _bytes_route(path: str, summary: str, responses: dict[int | str, Any]) -> Callable:
    """A route that serves a body or a part's bytes: GET, and HEAD for the headers alone."""
    return app.route(path, method=["GET", "HEAD"], summary=summary, responses=responses)


@_bytes_route("/records/<id>", "The latest version of a record", _BODY_RESPONSES)
def latest(id: IdSegment):
    return _send(store().locate(_id(id)))


@_bytes_route("/records/<id>/versions/<version>", "A retained version of a record", _BODY_RESPONSES)
def version(id: IdSegment, version: VersionNumber):
    return _send(store().locate(_id(id), int(version)))


@_bytes_route(
    "/records/<id>/parts/<name>", "A part of the latest version of a record", _PART_RESPONSES
)
def latest_part(id: IdSegment, name: PartName):
    return _send_part(store().locate(_id(id)), _part_name(name))


@_bytes_route(
    "/records/<id>/versions/<version>/parts/<name>",
    "A part of a retained version of a record",
    _PART_RESPONSES,
)
def version_part(id: IdSegment, version: VersionNumber, name: PartName):
    return _send_part(store().locate(_id(id), int(version)), _part_name(name))


@app.get(
    "/records/<id>/history",
    summary="The retained versions of a record, deletes included",
    responses={
        200: {
            "description": "the retained versions, oldest first",
            "content": {"application/json": {"model": History}},
        },
        **_PROBLEMS,
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


@app.get("/openapi.json", summary="This API's OpenAPI document")
def openapi() -> Response[str]:
    return Response(200, "application/json", openapi_document())


@functools.cache
def openapi_document() -> str:
    """The OpenAPI document of these routes (docs/read-api.openapi.json holds a copy), as
    Powertools generates it with two corrections: the 422 it documents for a failed request
    validation is a 400 problem here (`_unvalidated`), and every request is SigV4-signed."""
    document = json.loads(
        app.get_openapi_json_schema(
            title=OPENAPI_TITLE,
            version=OPENAPI_VERSION,
            description="Records of a VHS store over HTTP. Every request is signed with SigV4 "
            "(service 'lambda'): the function URL's AuthType is AWS_IAM. See docs/read-api.md.",
        )
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
            for parameter in operation.get("parameters", []):
                parameter["schema"] = _PARAMETER_SCHEMAS[parameter["name"]]()
            if "304" in operation["responses"]:
                operation["parameters"].append(IF_NONE_MATCH)
            for bodiless in ("304", "307"):
                # Powertools gives every response a JSON content; these have no body.
                operation["responses"].get(bodiless, {}).pop("content", None)
    # The document is served as a JSON object, not the string the route returns it as.
    document["paths"]["/openapi.json"]["get"]["responses"]["200"]["content"] = {
        "application/json": {"schema": {"type": "object"}}
    }
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    schemas["Problem"] = Problem.model_json_schema()
    document["components"]["securitySchemes"] = {
        "sigv4": {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "description": "AWS SigV4, service 'lambda' (x-amazon-apigateway-authtype awsSigv4)",
            "x-amazon-apigateway-authtype": "awsSigv4",
        }
    }
    document["security"] = [{"sigv4": []}]
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


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


@app.not_found
def _no_route(error: NotFoundError) -> Response:
    return problem(404, NOT_FOUND, "Not found", "no such route: see /openapi.json")


@app.exception_handler(Exception)
def _fault(error: Exception) -> Response:
    logger.exception("read failed", extra={"path": app.current_event.path})
    metrics.add_metric(name="read_failed", unit=MetricUnit.Count, value=1)
    return problem(500, INTERNAL, "Internal error", "the read failed; it is logged")


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = app.resolve(event, context)
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
