"""The ingest message contract: what producers put on the queue.

A message body is a JSON object with `id`, `updated_at` and exactly one payload field:

* `record`: any JSON value;
* `body_base64`: an opaque body, base64-encoded, with an optional `content_type`;
* `record_location`: `s3://bucket/key` of a body staged in the stack's staging location, with
  an optional `content_type`;
* `deleted`: `true`, a delete as of `updated_at`.

Bodies are I-JSON (RFC 7493): UTF-8 without a byte order mark, no duplicate keys, no NaN or
Infinity, no numbers out of a double's range, no unpaired surrogates. Python's json module
accepts all of these, and each would be read differently by another consumer, so they are
refused here, with the place they occur.

Claim checks written by the AWS SQS Extended Client libraries (Java and Python) are resolved
first: their body is a pointer to a payload in S3 that is itself such a message. The same
contract is shipped as a JSON Schema (schemas/ingest-message.schema.json) for producers; this
module is the validator the handler runs, because it names the offending field precisely and
imports in microseconds.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..codec import JSON_CONTENT_TYPE, MAX_CONTENT_TYPE_LENGTH, canonical_json
from ..errors import InvalidInput
from ..keys import validate_id
from ..ordering import parse_timestamp

PAYLOAD_FIELDS = ("record", "body_base64", "record_location", "deleted")
ALLOWED_FIELDS = frozenset({"id", "updated_at", "content_type", *PAYLOAD_FIELDS})
SCHEMA_FILE = "schemas/ingest-message.schema.json"
MAX_S3_KEY_BYTES = 1024
# Python's own limit on converting digits to an int (sys.int_info.default_max_str_digits).
MAX_INTEGER_DIGITS = 4300

# The AWS SQS Extended Client libraries' claim-check format (see docs/ingest.md).
CLAIM_CHECK_CLASSES = frozenset(
    {
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        "com.amazon.sqs.javamessaging.MessageS3Pointer",
    }
)
CLAIM_CHECK_ATTRIBUTES = ("ExtendedPayloadSize", "SQSLargePayloadSize")


class InvalidMessage(InvalidInput):
    """A message that can never be stored: it goes to the DLQ with this reason, unretried."""


class MissingStagedObject(InvalidMessage):
    """A claim check or record_location that points at an object that does not exist."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class StagingLocation:
    """Where staged bodies and claim-check payloads may live: a bucket, or a prefix of one.
    Pointers anywhere else are refused, so a message cannot make the handler read foreign
    data with its own permissions."""

    bucket: str
    prefix: str = ""

    def check(self, location: S3Location, field: str, bucket_field: str = "") -> S3Location:
        if location.bucket != self.bucket or not location.key.startswith(self.prefix):
            raise InvalidMessage(
                bucket_field if bucket_field and location.bucket != self.bucket else field,
                f"{location} is outside the staging location s3://{self.bucket}/{self.prefix}",
            )
        return location


@dataclass(frozen=True)
class IngestMessage:
    id: str
    updated_at: str  # as sent; the store parses and validates it
    kind: str  # one of PAYLOAD_FIELDS
    record: Any = None
    # The bytes to store: decoded body_base64, or the record as canonical JSON (serialised
    # once, here, both to check it and so that the handler does not serialise it again).
    body: bytes | None = None
    location: S3Location | None = None
    content_type: str | None = None
    field_prefix: str = ""  # "payload." for a message resolved from a claim check

    def field(self, name: str) -> str:
        return f"{self.field_prefix}{name}"

    def field_of(self, store_field: str) -> str:
        """The message field that a store error's field (InvalidInput.field) comes from."""
        if store_field in {"updated_at", "deleted_at"}:
            return self.field("updated_at")
        if store_field == "record":
            return self.field(self.kind)
        return self.field(store_field)


# --- JSON ---------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """A value's type in JSON's words, for reasons a producer in any language can read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def field_label(name: str) -> str:
    """A field name as it can appear in vhs-error-field: as is when short and printable,
    otherwise JSON-escaped and cut, so that a hostile name (NUL, an unpaired surrogate,
    100 KB) still fits a message attribute SQS accepts."""
    if 0 < len(name) <= 64 and name.isprintable():
        return name
    escaped = json.dumps(name)
    return escaped if len(escaped) <= 64 else escaped[:61] + "..."


def document_field(field_prefix: str) -> str:
    """The name of a whole document: "body" for a message, "payload" for a claim check's."""
    return field_prefix.rstrip(".") or "body"


class _Refused:
    """Put in the parsed tree in place of a value the contract refuses, so that the error
    can say where it is (json's hooks are told the value, not its place)."""

    __slots__ = ("duplicate", "reason")

    def __init__(self, reason: str, duplicate: str | None = None) -> None:
        self.reason = reason
        self.duplicate = duplicate


# A lone \uD800-\uDFFF escape (one not part of a pair), or a surrogate code point in a str
# given by a Python caller. It only decides whether to look for the place; the walk decides.
_LONE_SURROGATE_HINT = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    "|[\ud800-\udfff]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOM = "\ufeff"


def parse_json_body(text: str | bytes, field_prefix: str = "") -> Any:
    """Parse a message body (str, as SQS delivers it) or a claim-check payload (bytes from
    S3) as I-JSON. Raises InvalidMessage naming the top-level field at fault, or the whole
    document ("body", or "payload" with field_prefix "payload.")."""
    document = document_field(field_prefix)
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            # Strict UTF-8: json.loads(bytes) would also take UTF-16 and UTF-32, skip a BOM
            # and decode encoded surrogates ("surrogatepass").
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            bad = error.object[error.start]
            raise InvalidMessage(
                document, f"not UTF-8: byte 0x{bad:02x} at offset {error.start}"
            ) from None
    if text.startswith(_BOM):
        raise InvalidMessage(document, "starts with a byte order mark (U+FEFF): send none")
    refused = False

    def refuse(reason: str, duplicate: str | None = None) -> _Refused:
        nonlocal refused
        refused = True
        return _Refused(reason, duplicate)

    def constant(name: str) -> _Refused:
        return refuse(f"{name} is not valid JSON")

    def number(literal: str) -> float | _Refused:
        value = float(literal)
        if math.isinf(value):
            shown = literal if len(literal) <= 32 else literal[:29] + "..."
            return refuse(f"{shown} is out of range of a double")
        return value

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Refused:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                return refuse(f"duplicate key {field_label(key)!r}", key)
            seen.add(key)
        raise AssertionError("unreachable: dict() dropped a pair without a duplicate key")

    hooks: dict[str, Any] = {
        "parse_constant": constant,
        "parse_float": number,
        "object_pairs_hook": unique,
    }
    try:
        parsed = _loads(text, document, hooks)
    except _IntegerTooLong:
        # Rare, so only now parse again with a hook on every integer (it halves the speed),
        # to find where the integer is.
        def integer(literal: str) -> int | _Refused:
            digits = len(literal.lstrip("-"))
            if digits > MAX_INTEGER_DIGITS:
                return refuse(f"an integer of {digits} digits is too large")
            return int(literal)

        parsed = _loads(text, document, {**hooks, "parse_int": integer})
    if refused or _LONE_SURROGATE_HINT.search(text):
        problem = _first_problem(parsed, field_prefix)
        if problem is not None:
            raise problem
    return parsed


class _IntegerTooLong(Exception):
    pass


def _loads(text: str, document: str, hooks: dict[str, Any]) -> Any:
    try:
        return json.loads(text, **hooks)
    except RecursionError:
        raise InvalidMessage(document, "JSON is nested too deeply") from None
    except json.JSONDecodeError as error:
        raise InvalidMessage(
            document, f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except ValueError:
        # int() refuses more than MAX_INTEGER_DIGITS digits (CVE-2020-10735's limit).
        raise _IntegerTooLong from None


def _first_problem(document: Any, field_prefix: str) -> InvalidMessage | None:
    """The first refused value or unpaired surrogate in document order, as an error."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Refused):
            return _error_at(path, value.reason, field_prefix, value.duplicate)
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return _error_at(path, "contains an unpaired surrogate", field_prefix)
        elif isinstance(value, dict):
            for key in value:
                if _SURROGATE.search(key):
                    return _error_at(
                        (*path, key), "is a key with an unpaired surrogate", field_prefix
                    )
            stack.extend((item, (*path, key)) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, (*path, n)) for n, item in reversed(list(enumerate(value))))
    return None


def _error_at(
    path: tuple[str | int, ...], reason: str, field_prefix: str, duplicate: str | None = None
) -> InvalidMessage:
    if not path:
        # A duplicate key of the message itself: name that field.
        if duplicate is not None:
            return InvalidMessage(field_prefix + field_label(duplicate), reason)
        return InvalidMessage(document_field(field_prefix), reason)
    head = path[0]
    if isinstance(head, str) and len(path) == 1:
        return InvalidMessage(field_prefix + field_label(head), reason)
    field = (
        field_prefix + field_label(head) if isinstance(head, str) else document_field(field_prefix)
    )
    return InvalidMessage(field, f"{reason}, at {_render_path(path)}")


def _render_path(path: tuple[str | int, ...]) -> str:
    parts = []
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif _IDENTIFIER.fullmatch(step):
            parts.append(f".{step}" if parts else step)
        else:
            parts.append(f"[{field_label(step)}]")
    rendered = "".join(parts)
    return rendered if len(rendered) <= 200 else rendered[:197] + "..."


# --- claim checks and staged bodies -------------------------------------------------------


def is_claim_check(body: Any) -> bool:
    """Shaped like an SQS Extended Client pointer: [class name, {...}]."""
    return (
        isinstance(body, list)
        and len(body) == 2
        and isinstance(body[0], str)
        and body[0] in CLAIM_CHECK_CLASSES
    )


def claim_check_pointer(body: Any, attributes: dict[str, Any]) -> S3Location | None:
    """The payload location if `body` (parsed JSON) is an Extended Client claim check."""
    flagged = any(name in attributes for name in CLAIM_CHECK_ATTRIBUTES)
    if not is_claim_check(body):
        if flagged:
            raise InvalidMessage("body", "flagged as a claim check but not a pointer")
        return None
    pointer = body[1]
    if not isinstance(pointer, dict):
        raise InvalidMessage("body", "claim-check pointer must be an object")
    bucket, key = pointer.get("s3BucketName"), pointer.get("s3Key")
    if not isinstance(bucket, str) or not bucket:
        raise InvalidMessage("body.s3BucketName", "must be a non-empty string")
    if not isinstance(key, str) or not key:
        raise InvalidMessage("body.s3Key", "must be a non-empty string")
    return S3Location(bucket, check_s3_key(key, "body.s3Key"))


def check_s3_key(key: str, field: str) -> str:
    """Refuse keys S3 cannot hold or botocore cannot send, which would otherwise fail as if
    transiently and be retried to no purpose."""
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidMessage(field, "key has an unpaired surrogate: it is not UTF-8") from None
    if size > MAX_S3_KEY_BYTES:
        raise InvalidMessage(field, f"key is {size} bytes, over S3's limit of {MAX_S3_KEY_BYTES}")
    for position, char in enumerate(key):
        if unicodedata.category(char) == "Cc":
            raise InvalidMessage(
                field, f"key contains control character U+{ord(char):04X} at {position}"
            )
    return key


def parse_s3_uri(uri: Any, field: str) -> S3Location:
    """s3://bucket/key, read as the AWS CLI reads it: everything after the bucket's slash is
    the key, "?" and "#" included. (urllib's urlsplit would drop tabs and newlines from the
    key, so read another object than the one named, and raises on a stray "[".)"""
    if not isinstance(uri, str):
        raise InvalidMessage(field, f"must be an s3://bucket/key string, not {json_type(uri)}")
    bucket, slash, key = uri.removeprefix("s3://").partition("/")
    if not uri.startswith("s3://") or not bucket or not slash or not key:
        shown = uri if len(uri) <= 200 else uri[:197] + "..."
        raise InvalidMessage(field, f"must be an s3://bucket/key URI, not {shown!r}")
    return S3Location(bucket, check_s3_key(key, field))


# --- the message --------------------------------------------------------------------------


def validate_message(body: Any, *, field_prefix: str = "") -> IngestMessage:
    """Check a parsed message body against the contract. Raises InvalidMessage naming the
    field (prefixed with `field_prefix`, e.g. "payload." for a resolved claim check)."""

    def name(field: str) -> str:
        return f"{field_prefix}{field}"

    if not isinstance(body, dict):
        raise InvalidMessage(
            document_field(field_prefix), f"must be a JSON object, not {json_type(body)}"
        )
    unknown = sorted(set(body) - ALLOWED_FIELDS)
    if unknown:
        raise InvalidMessage(name(field_label(unknown[0])), "unknown field")
    if "id" not in body:
        raise InvalidMessage(name("id"), "is required")
    if not isinstance(body["id"], str):
        raise InvalidMessage(name("id"), f"must be a string, not {json_type(body['id'])}")
    try:
        record_id = validate_id(body["id"], name("id"))
    except InvalidInput as error:
        raise InvalidMessage(error.field, error.reason) from None
    updated_at = body.get("updated_at")
    if updated_at is None:
        raise InvalidMessage(name("updated_at"), "is required")
    if not isinstance(updated_at, str):
        raise InvalidMessage(
            name("updated_at"), f"must be an RFC 3339 string, not {json_type(updated_at)}"
        )
    try:
        parse_timestamp(updated_at, field=name("updated_at"))
    except InvalidInput as error:
        raise InvalidMessage(error.field, error.reason) from None
    if "deleted" in body and body["deleted"] is not True:
        # Before counting payloads, so that {"record": ..., "deleted": false} is told why.
        raise InvalidMessage(name("deleted"), "must be true; leave it out for a put")
    present = [f for f in PAYLOAD_FIELDS if f in body]
    if len(present) != 1:
        what = "none" if not present else ", ".join(present)
        raise InvalidMessage(
            name("record"),
            f"exactly one of record, body_base64, record_location, deleted is required ({what})",
        )
    kind = present[0]
    content_type = body.get("content_type")
    if "content_type" in body:
        if kind not in {"body_base64", "record_location"}:
            raise InvalidMessage(
                name("content_type"), "only goes with body_base64 or record_location"
            )
        if not isinstance(content_type, str) or not content_type.strip():
            raise InvalidMessage(name("content_type"), "must be a non-empty string")
        if len(content_type) > MAX_CONTENT_TYPE_LENGTH or not content_type.isprintable():
            raise InvalidMessage(name("content_type"), "must be printable, at most 255 characters")
    if kind == "deleted":
        return IngestMessage(record_id, updated_at, kind, field_prefix=field_prefix)
    if kind == "record":
        try:
            encoded = canonical_json(body["record"], name("record"))
        except InvalidInput as error:
            raise InvalidMessage(error.field, error.reason) from None
        return IngestMessage(
            record_id,
            updated_at,
            kind,
            record=body["record"],
            body=encoded,
            content_type=JSON_CONTENT_TYPE,
            field_prefix=field_prefix,
        )
    if kind == "body_base64":
        encoded = body["body_base64"]
        if not isinstance(encoded, str):
            raise InvalidMessage(
                name("body_base64"), f"must be a base64 string, not {json_type(encoded)}"
            )
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidMessage(name("body_base64"), f"is not valid base64: {error}") from None
        return IngestMessage(
            record_id,
            updated_at,
            kind,
            body=raw,
            content_type=content_type,
            field_prefix=field_prefix,
        )
    location = parse_s3_uri(body["record_location"], name("record_location"))
    return IngestMessage(
        record_id,
        updated_at,
        kind,
        location=location,
        content_type=content_type,
        field_prefix=field_prefix,
    )


def schema_path() -> str:
    """The shipped JSON Schema, beside the package root (vhs/schemas/)."""
    import os

    return os.path.join(os.path.dirname(os.path.dirname(__file__)), SCHEMA_FILE)
