"""The read API's OpenAPI document: the shapes of its parameters, headers and answers, stated
from the store's own rules (vhs.keys, vhs.bodies.parts), and the corrections to what Powertools
generates from the routes (routes.py declares the routes with these shapes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from vhs import keys, settings
from vhs.bodies.parts import PART_NAME, PART_NAME_PATTERN
from vhs.shapes import READ_API
from vhs.timestamps import MAX_TIMESTAMP_LENGTH

PROBLEM_JSON = "application/problem+json"
OPENAPI_TITLE = "VHS read API"
OPENAPI_VERSION = "1"
# A version in a path: at most this many decimal digits (VersionNumber's pattern).
MAX_VERSION_DIGITS = 16


def whole(regex: str) -> str:
    """A JSON Schema pattern that `regex` must match all of: to the end, not "$", which
    Python's re (and so jsonschema) lets match before a final newline the API refuses."""
    return f"^{regex}{keys.END}"


CONTENT_HASH_PATTERN = whole(keys.CONTENT_HASH.pattern)
PART_NAME_SCHEMA_PATTERN = whole(PART_NAME.pattern)


# --- the OpenAPI document's shapes --------------------------------------------------------


# Every field is always written (serialization defaults required) and nothing else is.
# Python's regexes: the patterns end with a look-ahead (`whole`), which pydantic's default
# engine (Rust's regex crate) does not have.
_EXACT = ConfigDict(
    extra="forbid", json_schema_serialization_defaults_required=True, regex_engine="python-re"
)
_DATE_TIME = {"format": "date-time"}


class Problem(BaseModel):
    """RFC 9457 problem details."""

    model_config = ConfigDict(extra="forbid")
    type: str = Field(description="what kind of problem: urn:vhs:problem:...")
    title: str
    status: int
    detail: str
    field: str | None = Field(
        default=None,
        description="the input at fault (400), or the damaged item's field (502: c[0].t)",
    )
    id: str | None = Field(default=None, description="the damaged item's record id (502 only)")


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
        json_schema_extra={"propertyNames": {"pattern": PART_NAME_SCHEMA_PATTERN}},
    )


class History(BaseModel):
    model_config = _EXACT
    id: str = Field(json_schema_extra=lambda schema: schema.update(_id_schema()))
    versions: list[Version] = Field(description="the retained versions, oldest first")


class DiffSide(BaseModel):
    model_config = _EXACT
    version: int = Field(ge=1)
    updated_at: str = Field(description="RFC 3339", json_schema_extra=_DATE_TIME)
    content_type: str
    size: int = Field(ge=0, description="bytes of the body")
    content_hash: str = Field(
        pattern=CONTENT_HASH_PATTERN, description="the version's ETag (with parts: its manifest's)"
    )
    body_hash: str = Field(pattern=CONTENT_HASH_PATTERN, description="the body's own sha256")


class PatchOperation(BaseModel):
    # Not _EXACT: a remove has no value, and _EXACT makes a field with a default required.
    model_config = ConfigDict(extra="forbid")
    op: Literal["add", "remove", "replace"]
    path: str = Field(description="an RFC 6901 JSON Pointer")
    value: Any = Field(default=None, description="add and replace only: any JSON value")


class PartSummary(BaseModel):
    model_config = _EXACT
    content_hash: str = Field(pattern=CONTENT_HASH_PATTERN)
    size: int = Field(ge=0)
    content_type: str


class PartDiff(BaseModel):
    model_config = _EXACT
    change: Literal["added", "removed", "changed", "same"]
    from_: PartSummary | None = Field(alias="from")
    to: PartSummary | None


class Diff(BaseModel):
    """vhs.history.diffs.Diff.as_json()."""

    model_config = _EXACT
    id: str = Field(json_schema_extra=lambda schema: schema.update(_id_schema()))
    from_: DiffSide = Field(alias="from")
    to: DiffSide
    kind: Literal["json", "opaque"]
    body_changed: bool
    patch: list[PatchOperation] | None = Field(
        description="RFC 6902, from a's body to b's: [] when they are the same; null for "
        "opaque, or when patch_omitted says why not"
    )
    patch_omitted: Literal["too_large", "unreadable"] | None = Field(
        description="why two versions that claim JSON have no patch: it, or a body, is over "
        "what a diff reads or carries; or a body is not JSON (kind opaque); else null"
    )
    reason: str | None = Field(description="patch_omitted in words; else null")
    parts: dict[str, PartDiff] = Field(
        json_schema_extra={"propertyNames": {"pattern": PART_NAME_SCHEMA_PATTERN}}
    )


PROBLEMS: dict[int | str, Any] = {
    code: {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for code, description in (
        (400, "a bad id or version"),
        (404, "unknown id, version not retained, or the record is deleted"),
        (500, "an internal error: logged, nothing of it in the answer"),
        (502, "the record's stored item is damaged: the problem names its id and field"),
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
def _version_schema() -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": 10**MAX_VERSION_DIGITS - 1}


_PARAMETER_SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "id": _id_schema,
    "version": _version_schema,
    "a": _version_schema,
    "b": _version_schema,
    "name": lambda: {"type": "string", "pattern": PART_NAME_SCHEMA_PATTERN},
}
# A read as of a moment: `?as_of=T`, by the store's clock (when it wrote each version) unless
# `clock=source` (the source's updated_at); CLOCKS maps each to store.locate's argument.
AS_OF, CLOCK, STORE_CLOCK = "as_of", "clock", "store"
CLOCKS = {STORE_CLOCK: "as_of", "source": "source_as_of"}
MOMENT_PARAMETERS = [
    {
        "name": AS_OF,
        "in": "query",
        "required": False,
        "description": "the version current at this moment "
        "(RFC 3339; any, timestamps.parse_moment): a 404 names why when there is none "
        "(not yet written, not retained, deleted at ...)",
        "schema": {"type": "string", **_DATE_TIME, "maxLength": MAX_TIMESTAMP_LENGTH},
    },
    {
        "name": CLOCK,
        "in": "query",
        "required": False,
        "description": "as_of's clock: store (when the store wrote each version: what a reader "
        "saw) or source (each version's updated_at: what the source said)",
        "schema": {"type": "string", "enum": list(CLOCKS), "default": STORE_CLOCK},
    },
]
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
            "schema": {"type": "string", "pattern": whole(f'"{keys.CONTENT_HASH.pattern}"')},
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
        # A JSON record (a put of a JSON value) is served as application/json. The binary
        # comes first: a generator that takes one media type per answer (openapi-python-client
        # takes the first it knows) then reads every body as bytes, not every body as JSON.
        binary = {**binary, "application/json": {"schema": {}}}
    return {
        200: {"description": content, "headers": headers, "content": binary},
        304: {"description": "If-None-Match named the ETag", "headers": headers},
        307: {
            "description": f"a {what} too large for a Lambda response: Location is a presigned "
            f"S3 GET URL, valid for {settings.READ_API_PRESIGN_SECONDS} "
            f"({READ_API.presign_seconds} s by default)",
            "headers": {
                **headers,
                "Location": {
                    "description": "the presigned S3 GET URL",
                    "required": True,
                    "schema": {"type": "string", "format": "uri"},
                },
            },
        },
        **PROBLEMS,
    }


BODY_RESPONSES = _served("body", "the body, with the record's content type")
PART_RESPONSES = _served("part", "the part's bytes, with its content type")
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


def document(app: LambdaFunctionUrlResolver) -> str:
    """The OpenAPI document of these routes (docs/read-api.openapi.json holds a copy), as
    Powertools generates it with two corrections: the 422 it documents for a failed request
    validation is a 400 problem here (routes.py's `_unvalidated`), and every request is
    SigV4-signed."""
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
    for operation in document["paths"]["/records/{id}"].values():
        operation["parameters"].extend(MOMENT_PARAMETERS)
    # The document is served as a JSON object, not the string the route returns it as.
    for operation in document["paths"]["/openapi.json"].values():
        operation["responses"]["200"]["content"] = {
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
