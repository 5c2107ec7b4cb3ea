"""The ingest message contract: what producers put on the queue.

A message body is a JSON object with `id`, `updated_at` and exactly one payload field:

* `record`: any JSON value;
* `body_base64`: an opaque body, base64-encoded, with an optional `content_type`;
* `record_location`: `s3://bucket/key` of a body staged in the stack's staging location, with
  an optional `content_type`;
* `deleted`: `true`, a delete as of `updated_at`.

A put may also carry `parts`: named binary parts stored beside its body (docs/design.md,
"Parts"), each a claim check of an object staged in the staging location,
`{"scan": {"s3": {"bucket": ..., "key": ...}, "content_type": "image/tiff"}}`.

Bodies are I-JSON (RFC 7493, strict_json.py). Claim checks written by the AWS SQS Extended
Client libraries (staging.py) are resolved first: their body is a pointer to a payload in S3
that is itself such a message. The same contract is shipped as a JSON Schema
(schemas/ingest-message.schema.json) for producers; this module is the validator the handler
runs, because it names the offending field precisely and imports in microseconds.

A message is read in one pass (`read_message`): parse, resolve a claim check, validate every
field once, with the store's own validators (ids, timestamps, bodies) given the message's
field names and the store's limits. What comes out is ready to write: a validated id, the
timestamp in stored form and the encoded body, so the store validates nothing again and any
error names the field the producer sent. The pass has two steps: `first_read` (no I/O: parse,
validate an inline message, check a claim check's pointer), which the ingest handler's batch
runs on every record before coalescing, and the claim check's payload, read with its fetch
only when the message is written (`read_message(..., first=...)`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from ..bodies.parts import MAX_PARTS, check_part_name
from ..codec import (
    JSON_CONTENT_TYPE,
    MAX_BODY_SIZE,
    Body,
    canonical_json,
    check_content_type,
    encode_record,
)
from ..errors import InvalidInput, InvalidMessage, MissingStagedObject
from ..keys import validate_id
from ..strict_json import document_field, field_label, json_type, parse_json_body
from ..timestamps import parse_timestamp
from .staging import (
    S3Location,
    StagingLocation,
    check_s3_key,
    claim_check_pointer,
    is_claim_check,
    parse_s3_uri,
    require_staged,
)

__all__ = [
    "FirstRead",
    "IngestMessage",
    "InvalidMessage",
    "MessageLimits",
    "MissingStagedObject",
    "S3Location",
    "StagedPart",
    "StagingLocation",
    "claim_check_pointer",
    "first_read",
    "read_message",
    "schema_path",
    "validate_message",
]

PAYLOAD_FIELDS = ("record", "body_base64", "record_location", "deleted")
ALLOWED_FIELDS = frozenset({"id", "updated_at", "content_type", "purge", "parts", *PAYLOAD_FIELDS})
PART_FIELDS = frozenset({"s3", "content_type"})
PART_S3_FIELDS = frozenset({"bucket", "key"})
SCHEMA_FILE = "schemas/ingest-message.schema.json"


@dataclass(frozen=True)
class MessageLimits:
    """The store's limits, which a message must meet to be stored (VersionedHybridStore's
    `max_future` and `max_body_size`). The defaults are the contract's own: no limit on
    timestamps ahead of now, and S3's largest object."""

    max_future: timedelta | None = None
    max_body_size: int = MAX_BODY_SIZE


@dataclass(frozen=True)
class StagedPart:
    """A part of a message: a claim check of an object in the staging location."""

    name: str
    location: S3Location
    content_type: str | None = None
    field: str = ""  # the message's field of its key: parts.<name>.s3.key

    @property
    def part_field(self) -> str:
        return self.field.removesuffix(".s3.key")


@dataclass(frozen=True)
class IngestMessage:
    id: str  # validated
    updated_at: str  # as sent
    stamp: str  # updated_at in the store's stored form (timestamps.parse_timestamp)
    kind: str  # one of PAYLOAD_FIELDS
    record: Any = None
    # The body to store, encoded and checked against the limits: decoded body_base64, or the
    # record as canonical JSON (serialised once, here). None for a delete or a staged body.
    encoded: Body | None = None
    location: S3Location | None = None
    content_type: str | None = None
    field_prefix: str = ""  # "payload." for a message resolved from a claim check
    purge: bool = False  # a delete that drops every earlier version at once
    parts: tuple[StagedPart, ...] = ()  # sorted by name

    def field(self, name: str) -> str:
        return f"{self.field_prefix}{name}"


@contextlib.contextmanager
def as_message_error() -> Iterator[None]:
    """Raise the store's validation errors as InvalidMessage (dead-lettered, unretried). Their
    fields are already the message's: the validators were given the message's names."""
    try:
        yield
    except InvalidMessage:
        raise
    except InvalidInput as error:
        raise InvalidMessage(error.field, error.reason) from None


# What a record reads as before anything is fetched: its validated message, the checked pointer
# of a claim check (its payload is read when the message is written), or why it is invalid.
FirstRead = IngestMessage | S3Location | InvalidMessage


def first_read(
    record: Mapping[str, Any],
    *,
    staging: StagingLocation | None,
    limits: MessageLimits = MessageLimits(),
) -> FirstRead:
    """The part of `read_message` that needs no I/O: parse the body, and validate an inline
    message or check a claim check's pointer. An InvalidMessage is returned, not raised, so
    that a batch can read every record once before any is written."""
    try:
        body = parse_json_body(record.get("body", ""))
        pointer = claim_check_pointer(body, record.get("messageAttributes") or {})
        if pointer is not None:
            return require_staged(staging, pointer, "body.s3Key", "body.s3BucketName")
        return _staged_checked(validate_message(body, limits=limits), staging)
    except InvalidMessage as error:
        return error


def read_message(
    record: Mapping[str, Any],
    *,
    staging: StagingLocation | None,
    fetch: Callable[[S3Location, str], bytes],
    limits: MessageLimits = MessageLimits(),
    first: FirstRead | None = None,
) -> IngestMessage:
    """One SQS record (Lambda event shape) to a validated message: `first` (its `first_read`,
    read now if not given), and a claim check's payload, which `fetch(location, field)` reads.
    Raises InvalidMessage naming the field."""
    if first is None:
        first = first_read(record, staging=staging, limits=limits)
    if isinstance(first, InvalidMessage):
        raise first
    if isinstance(first, IngestMessage):
        return first
    payload = parse_json_body(fetch(first, "body.s3Key"), "payload.")
    if is_claim_check(payload):
        raise InvalidMessage("payload", "is itself a claim check: pointers do not nest")
    message = validate_message(payload, field_prefix="payload.", limits=limits)
    return _staged_checked(message, staging)


def _staged_checked(message: IngestMessage, staging: StagingLocation | None) -> IngestMessage:
    """`message`, once what it stages (its body, its parts) is checked to be in `staging`."""
    if message.location is not None:
        require_staged(staging, message.location, message.field("record_location"))
    for part in message.parts:
        require_staged(staging, part.location, part.field, f"{part.part_field}.s3.bucket")
    return message


def validate_message(
    body: Any,
    *,
    field_prefix: str = "",
    limits: MessageLimits = MessageLimits(),
) -> IngestMessage:
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
    record_id, updated_at, stamp = _identity(body, name, limits)
    kind = _payload_kind(body, name)
    content_type, parts = _options(body, kind, name)
    message = IngestMessage(
        record_id,
        updated_at,
        stamp,
        kind,
        content_type=content_type,
        field_prefix=field_prefix,
        parts=parts,
    )
    return _with_payload(message, body, limits)


def _identity(
    body: dict[str, Any], name: Callable[[str], str], limits: MessageLimits
) -> tuple[str, str, str]:
    """A message's `id` and `updated_at`, checked: the id, the timestamp as sent, and as
    parsed."""
    if "id" not in body:
        raise InvalidMessage(name("id"), "is required")
    if not isinstance(body["id"], str):
        raise InvalidMessage(name("id"), f"must be a string, not {json_type(body['id'])}")
    with as_message_error():
        record_id = validate_id(body["id"], name("id"))
    updated_at = body.get("updated_at")
    if updated_at is None:
        raise InvalidMessage(name("updated_at"), "is required")
    if not isinstance(updated_at, str):
        raise InvalidMessage(
            name("updated_at"), f"must be an RFC 3339 string, not {json_type(updated_at)}"
        )
    with as_message_error():
        stamp = parse_timestamp(updated_at, field=name("updated_at"), max_future=limits.max_future)
    return record_id, updated_at, stamp


def _payload_kind(body: dict[str, Any], name: Callable[[str], str]) -> str:
    """Which one of the payload fields the message has."""
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
    return present[0]


def _options(
    body: dict[str, Any], kind: str, name: Callable[[str], str]
) -> tuple[Any, tuple[StagedPart, ...]]:
    """The fields that go with some kinds only (purge, content_type, parts), checked against
    `kind`: the content type and the parts."""
    if "purge" in body:
        if not isinstance(body["purge"], bool):
            raise InvalidMessage(
                name("purge"), f"must be a boolean, not {json_type(body['purge'])}"
            )
        if kind != "deleted":
            raise InvalidMessage(name("purge"), "only goes with deleted")
    content_type = body.get("content_type")
    if "content_type" in body:
        if kind not in {"body_base64", "record_location"}:
            raise InvalidMessage(
                name("content_type"), "only goes with body_base64 or record_location"
            )
        with as_message_error():
            check_content_type(content_type, name("content_type"))
    parts: tuple[StagedPart, ...] = ()
    if "parts" in body:
        if kind == "deleted":
            raise InvalidMessage(name("parts"), "only goes with a put, not with deleted")
        parts = _read_parts(body["parts"], name("parts"))
    return content_type, parts


def _with_payload(
    message: IngestMessage, body: dict[str, Any], limits: MessageLimits
) -> IngestMessage:
    """`message` with what its payload field gives: a delete's purge, a staged record's
    location, or an inline body, decoded and encoded as the store keeps it."""
    kind, name = message.kind, message.field
    if kind == "deleted":
        return replace(message, purge=body.get("purge") is True)
    content_type = body.get("content_type")
    if kind == "record":
        with as_message_error():
            data = canonical_json(body["record"], name("record"))
        raw, content_type = data, JSON_CONTENT_TYPE
    elif kind == "body_base64":
        encoded = body["body_base64"]
        if not isinstance(encoded, str):
            raise InvalidMessage(
                name("body_base64"), f"must be a base64 string, not {json_type(encoded)}"
            )
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidMessage(name("body_base64"), f"is not valid base64: {error}") from None
    else:
        location = parse_s3_uri(body["record_location"], name("record_location"))
        return replace(message, location=location)
    with as_message_error():
        encoded_body = encode_record(
            raw, content_type, max_size=limits.max_body_size, field=name(kind)
        )
    return replace(
        message,
        record=body.get("record"),
        encoded=encoded_body,
        content_type=content_type,
    )


def _read_parts(value: Any, field: str) -> tuple[StagedPart, ...]:
    """The `parts` of a message: name → {"s3": {"bucket", "key"}, "content_type"?}."""
    if not isinstance(value, dict):
        raise InvalidMessage(field, f"must be an object of named parts, not {json_type(value)}")
    if len(value) > MAX_PARTS:
        raise InvalidMessage(field, f"{len(value)} parts, more than the limit of {MAX_PARTS}")
    parts = []
    for part_name in sorted(value):
        with as_message_error():
            check_part_name(part_name, field)
        here = f"{field}.{part_name}"
        spec = value[part_name]
        if not isinstance(spec, dict):
            raise InvalidMessage(here, f"must be an object, not {json_type(spec)}")
        unknown = sorted(set(spec) - PART_FIELDS)
        if unknown:
            raise InvalidMessage(f"{here}.{field_label(unknown[0])}", "unknown field")
        s3 = spec.get("s3")
        if not isinstance(s3, dict):
            raise InvalidMessage(f"{here}.s3", "is required: an object with bucket and key")
        unknown = sorted(set(s3) - PART_S3_FIELDS)
        if unknown:
            raise InvalidMessage(f"{here}.s3.{field_label(unknown[0])}", "unknown field")
        for key in ("bucket", "key"):
            if not isinstance(s3.get(key), str) or not s3[key]:
                raise InvalidMessage(f"{here}.s3.{key}", "must be a non-empty string")
        content_type = spec.get("content_type")
        if "content_type" in spec:
            with as_message_error():
                check_content_type(content_type, f"{here}.content_type")
        location = S3Location(s3["bucket"], check_s3_key(s3["key"], f"{here}.s3.key"))
        parts.append(StagedPart(part_name, location, content_type, f"{here}.s3.key"))
    return tuple(parts)


def schema_path() -> str:
    """The shipped JSON Schema, beside the package root (vhs/schemas/)."""
    return os.path.join(os.path.dirname(os.path.dirname(__file__)), SCHEMA_FILE)
