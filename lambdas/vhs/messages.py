"""The ingest message contract: what producers put on the queue.

A message body is a JSON object with `id`, `updated_at` and exactly one payload field:

* `record`: any JSON value;
* `body_base64`: an opaque body, base64-encoded, with an optional `content_type`;
* `record_location`: `s3://bucket/key` of a body staged in the stack's staging location, with
  an optional `content_type`;
* `deleted`: `true`, a delete as of `updated_at`.

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
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .codec import MAX_CONTENT_TYPE_LENGTH
from .errors import InvalidInput
from .keys import validate_id
from .ordering import parse_timestamp

PAYLOAD_FIELDS = ("record", "body_base64", "record_location", "deleted")
ALLOWED_FIELDS = frozenset({"id", "updated_at", "content_type", *PAYLOAD_FIELDS})
SCHEMA_FILE = "schemas/ingest-message.schema.json"

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

    def check(self, location: S3Location, field: str) -> S3Location:
        if location.bucket != self.bucket or not location.key.startswith(self.prefix):
            raise InvalidMessage(
                field,
                f"{location} is outside the staging location s3://{self.bucket}/{self.prefix}",
            )
        return location


@dataclass(frozen=True)
class IngestMessage:
    id: str
    updated_at: str  # as sent; the store parses and validates it
    kind: str  # one of PAYLOAD_FIELDS
    record: Any = None
    body: bytes | None = None
    location: S3Location | None = None
    content_type: str | None = None


def parse_json_body(text: str | bytes, field: str = "body") -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidMessage(field, "JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidMessage(field, f"not valid JSON: {error}") from None


def claim_check_pointer(body: Any, attributes: dict[str, Any]) -> S3Location | None:
    """The payload location if `body` (parsed JSON) is an Extended Client claim check."""
    flagged = any(name in attributes for name in CLAIM_CHECK_ATTRIBUTES)
    shaped = (
        isinstance(body, list)
        and len(body) == 2
        and isinstance(body[0], str)
        and body[0] in CLAIM_CHECK_CLASSES
    )
    if not shaped:
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
    return S3Location(bucket, key)


def parse_s3_uri(uri: Any, field: str) -> S3Location:
    if not isinstance(uri, str):
        raise InvalidMessage(field, "must be an s3://bucket/key string")
    parts = urlsplit(uri)
    key = parts.path.lstrip("/")
    if parts.scheme != "s3" or not parts.netloc or not key or parts.query or parts.fragment:
        raise InvalidMessage(field, f"must be an s3://bucket/key URI, not {uri[:200]!r}")
    return S3Location(parts.netloc, key)


def validate_message(body: Any, *, field_prefix: str = "") -> IngestMessage:
    """Check a parsed message body against the contract. Raises InvalidMessage naming the
    field (prefixed with `field_prefix`, e.g. "payload." for a resolved claim check)."""

    def name(field: str) -> str:
        return f"{field_prefix}{field}"

    if not isinstance(body, dict):
        raise InvalidMessage(name("body"), f"must be a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - ALLOWED_FIELDS)
    if unknown:
        raise InvalidMessage(name(unknown[0]), "unknown field")
    if "id" not in body:
        raise InvalidMessage(name("id"), "is required")
    try:
        record_id = validate_id(body["id"], name("id"))
    except InvalidInput as error:
        raise InvalidMessage(error.field, error.reason) from None
    updated_at = body.get("updated_at")
    if updated_at is None:
        raise InvalidMessage(name("updated_at"), "is required")
    if not isinstance(updated_at, str):
        raise InvalidMessage(
            name("updated_at"), f"must be an RFC 3339 string, not {type(updated_at).__name__}"
        )
    try:
        parse_timestamp(updated_at, field=name("updated_at"))
    except InvalidInput as error:
        raise InvalidMessage(error.field, error.reason) from None
    present = [f for f in PAYLOAD_FIELDS if f in body]
    if len(present) != 1:
        what = "none" if not present else ", ".join(present)
        raise InvalidMessage(
            name("record"),
            f"exactly one of record, body_base64, record_location, deleted is required ({what})",
        )
    kind = present[0]
    content_type = body.get("content_type")
    if content_type is not None:
        if kind not in {"body_base64", "record_location"}:
            raise InvalidMessage(
                name("content_type"), "only goes with body_base64 or record_location"
            )
        if not isinstance(content_type, str) or not content_type.strip():
            raise InvalidMessage(name("content_type"), "must be a non-empty string")
        if len(content_type) > MAX_CONTENT_TYPE_LENGTH or not content_type.isprintable():
            raise InvalidMessage(name("content_type"), "must be printable, at most 255 characters")
    if kind == "deleted":
        if body["deleted"] is not True:
            raise InvalidMessage(name("deleted"), "must be true")
        return IngestMessage(record_id, updated_at, kind)
    if kind == "record":
        return IngestMessage(record_id, updated_at, kind, record=body["record"])
    if kind == "body_base64":
        encoded = body["body_base64"]
        if not isinstance(encoded, str):
            raise InvalidMessage(name("body_base64"), "must be a base64 string")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidMessage(name("body_base64"), "is not valid base64") from None
        return IngestMessage(record_id, updated_at, kind, body=raw, content_type=content_type)
    location = parse_s3_uri(body["record_location"], name("record_location"))
    return IngestMessage(record_id, updated_at, kind, location=location, content_type=content_type)


def schema_path() -> str:
    import os

    return os.path.join(os.path.dirname(__file__), SCHEMA_FILE)
