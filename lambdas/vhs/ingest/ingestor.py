"""Ingest: turn one SQS message into one store write, or one dead letter.

The policy is "nothing lost": every message ends stored, stale or unchanged (and is deleted
from the queue), or in the dead-letter queue.

* An **invalid** message (not JSON, a schema error, a claim check that points at a missing
  object or outside the staging location, too large) can never succeed, so it is not retried:
  `dead_letter` sends it to the DLQ with its reason, and the handler then acknowledges it.
* Anything else (throttling, 5xx, timeouts, a write conflict, a misconfiguration) is
  **transient**: it propagates, the handler reports a batch item failure, SQS retries, and its
  redrive policy dead-letters the message after maxReceiveCount, so it is never lost either.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ..aws import aws_client, is_object_missing
from ..errors import BodyTooLarge, InvalidInput
from ..resources import DEAD_LETTER_STAGING_PREFIX
from ..store import VersionedHybridStore
from .contract import (
    CLAIM_CHECK_ATTRIBUTES,
    IngestMessage,
    InvalidMessage,
    MissingStagedObject,
    S3Location,
    StagingLocation,
    claim_check_pointer,
    is_claim_check,
    parse_json_body,
    validate_message,
)

# SQS's largest message (body and attributes). A dead letter that would not fit is staged in
# S3 and sent as a claim check instead, so nothing is cut.
MAX_MESSAGE_BYTES = 1024 * 1024
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
_SPOOL_IN_MEMORY = 64 * 1024 * 1024
_SQS_ATTRIBUTE_LIMIT = 10

# Message attributes on a dead letter.
ERROR_TYPE = "vhs-error-type"
ERROR_FIELD = "vhs-error-field"
ERROR_MESSAGE = "vhs-error-message"
SOURCE_MESSAGE_ID = "vhs-source-message-id"
FIRST_SEEN = "vhs-first-seen"
DEAD_LETTER_ATTRIBUTES = (ERROR_TYPE, ERROR_FIELD, ERROR_MESSAGE, SOURCE_MESSAGE_ID, FIRST_SEEN)


@dataclass(frozen=True)
class IngestResult:
    message_id: str
    record_id: str | None
    outcome: str  # an Outcome value, or "invalid"
    version: int | None = None
    bytes: int = 0


class Ingestor:
    def __init__(
        self,
        store: VersionedHybridStore,
        *,
        sqs_client: Any,
        dlq_url: str,
        staging: StagingLocation | None,
        s3_client: Any = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.store = store
        self.sqs = sqs_client
        self.s3 = s3_client or store.bodies.s3
        self.dlq_url = dlq_url
        self.staging = staging
        self.max_payload_bytes = max_payload_bytes

    @classmethod
    def from_env(cls) -> Ingestor:
        dlq_url = os.environ.get("VHS_DLQ_URL", "")
        if not dlq_url:
            from ..errors import ConfigurationError

            raise ConfigurationError("set VHS_DLQ_URL: invalid messages are dead-lettered there")
        staging_bucket = os.environ.get("VHS_STAGING_BUCKET", "")
        staging = (
            StagingLocation(staging_bucket, os.environ.get("VHS_STAGING_PREFIX", ""))
            if staging_bucket
            else None
        )
        return cls(
            VersionedHybridStore.from_env(),
            sqs_client=aws_client("sqs"),
            dlq_url=dlq_url,
            staging=staging,
            max_payload_bytes=int(
                os.environ.get("VHS_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES)
            ),
        )

    # --- one message -------------------------------------------------------------------------

    def handle(self, record: dict[str, Any]) -> IngestResult:
        """Store one SQS record (Lambda event shape). Raises InvalidMessage for a message that
        can never be stored; any other exception means "retry"."""
        message = self.parse(record)
        message_id = record["messageId"]
        try:
            if message.kind == "deleted":
                deleted = self.store.delete(message.id, deleted_at=message.updated_at)
                return IngestResult(message_id, message.id, deleted.outcome, deleted.version)
            result, size = self._put(message)
        except InvalidMessage:
            raise
        except InvalidInput as error:
            # The store names its own argument ("record", "deleted_at"); the producer needs
            # the message field it sent ("body_base64", "payload.updated_at").
            raise InvalidMessage(message.field_of(error.field), error.reason) from None
        return IngestResult(message_id, message.id, result.outcome, result.version, size)

    def parse(self, record: dict[str, Any]) -> IngestMessage:
        body = parse_json_body(record.get("body", ""))
        pointer = claim_check_pointer(body, record.get("messageAttributes") or {})
        if pointer is None:
            return validate_message(body)
        self._check_staged(pointer, "body.s3Key", "body.s3BucketName")
        payload = parse_json_body(self._fetch(pointer, "body.s3Key"), "payload.")
        if is_claim_check(payload):
            raise InvalidMessage("payload", "is itself a claim check: pointers do not nest")
        return validate_message(payload, field_prefix="payload.")

    def _put(self, message: IngestMessage) -> tuple[Any, int]:
        if message.body is not None:  # a record (as canonical JSON) or body_base64
            result = self.store.put(
                message.id,
                message.body,
                updated_at=message.updated_at,
                content_type=message.content_type,
            )
            return result, 0 if message.kind == "record" else len(message.body)
        if message.location is None:
            raise InvalidMessage(message.field("record"), f"no payload for a {message.kind!r}")
        field = message.field("record_location")
        self._check_staged(message.location, field)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
            content_type = self._download(message.location, field, spool)
            size = spool.tell()
            result = self.store.put(
                message.id,
                spool,
                updated_at=message.updated_at,
                content_type=message.content_type or content_type,
            )
        return result, size

    def _check_staged(self, location: S3Location, field: str, bucket_field: str = "") -> None:
        if self.staging is None:
            raise InvalidMessage(field, "this stack has no staging location for staged bodies")
        self.staging.check(location, field, bucket_field)

    def _get_object(self, location: S3Location, field: str) -> dict[str, Any]:
        try:
            return self.s3.get_object(Bucket=location.bucket, Key=location.key)
        except ClientError as error:
            if is_object_missing(error):
                raise MissingStagedObject(field, f"{location} does not exist") from None
            raise

    def _fetch(self, location: S3Location, field: str) -> bytes:
        response = self._get_object(location, field)
        size, limit = response.get("ContentLength", 0), self.max_payload_bytes
        if size > limit:
            response["Body"].close()
            raise InvalidMessage("payload", f"is {size} bytes, over the limit of {limit} bytes")
        return response["Body"].read()

    def _download(self, location: S3Location, field: str, spool: Any) -> str | None:
        response = self._get_object(location, field)
        size, limit = response.get("ContentLength", 0), self.store.max_body_size
        if size > limit:
            # Refused before the download, which would only fill /tmp to be refused after.
            # Named as the store names it; handle() maps it to the message's field.
            response["Body"].close()
            raise BodyTooLarge(size, limit)
        for chunk in response["Body"].iter_chunks(8 * 1024 * 1024):
            spool.write(chunk)
        return response.get("ContentType")

    # --- dead letters ------------------------------------------------------------------------

    def dead_letter(self, record: dict[str, Any], error: InvalidMessage) -> None:
        """Send an invalid message to the DLQ with its reason. Raises if that fails, so the
        message is retried rather than lost."""
        attributes = dead_letter_attributes(record, error)
        body = record.get("body", "")
        size = len(body.encode()) + sum(
            len(name) + len(value["StringValue"].encode()) for name, value in attributes.items()
        )
        if size > MAX_MESSAGE_BYTES:
            body = self._stage_dead_letter(record, body)
            attributes["ExtendedPayloadSize"] = {
                "DataType": "Number",
                "StringValue": str(len(record.get("body", "").encode())),
            }
        self.sqs.send_message(QueueUrl=self.dlq_url, MessageBody=body, MessageAttributes=attributes)

    def _stage_dead_letter(self, record: dict[str, Any], body: str) -> str:
        if self.staging is None:
            raise InvalidMessage("body", "too large to dead-letter and no staging location")
        key = f"{self.staging.prefix}{DEAD_LETTER_STAGING_PREFIX}{record['messageId']}"
        self.s3.put_object(Bucket=self.staging.bucket, Key=key, Body=body.encode())
        pointer = {"s3BucketName": self.staging.bucket, "s3Key": key}
        return json.dumps(["software.amazon.payloadoffloading.PayloadS3Pointer", pointer])


def dead_letter_attributes(record: dict[str, Any], error: InvalidMessage) -> dict[str, Any]:
    first_seen = (record.get("attributes") or {}).get("ApproximateFirstReceiveTimestamp")
    seen = (
        datetime.fromtimestamp(int(first_seen) / 1000, UTC)
        if first_seen and str(first_seen).isdigit()
        else datetime.now(UTC)
    )
    ours = {
        ERROR_TYPE: type(error).__name__,
        ERROR_FIELD: error.field[:256],
        ERROR_MESSAGE: error.reason[:1024],
        SOURCE_MESSAGE_ID: record.get("messageId", ""),
        FIRST_SEEN: seen.isoformat(),
    }
    attributes = {
        name: {"DataType": "String", "StringValue": sqs_text(value) or "-"}
        for name, value in ours.items()
    }
    # Keep the producer's own attributes (claim-check flags first, so a redrive still
    # resolves), as many as SQS's limit of 10 allows.
    original = record.get("messageAttributes") or {}
    ordered = sorted(original, key=lambda name: name not in CLAIM_CHECK_ATTRIBUTES)
    for name in ordered:
        if name in attributes:  # a redriven dead letter still carries our vhs-error-* ones
            continue
        if len(attributes) >= _SQS_ATTRIBUTE_LIMIT:
            break
        converted = _attribute_from_event(original[name])
        if converted:
            attributes[name] = converted
    return attributes


# What SQS refuses in a message or attribute value: anything outside #x9 | #xA | #xD |
# #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
_SQS_REFUSED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_text(value: str) -> str:
    """`value` with every character SQS refuses written as a \\uXXXX escape. A reason may
    quote the message (an S3 key with a control character, say), and a dead letter that
    SQS refuses would be retried instead of dead-lettered."""
    return _SQS_REFUSED.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def _attribute_from_event(value: dict[str, Any]) -> dict[str, Any] | None:
    """A Lambda event's messageAttributes entry, in SendMessage's shape."""
    data_type = value.get("dataType") or value.get("DataType")
    if not data_type:
        return None
    string = value.get("stringValue", value.get("StringValue"))
    binary = value.get("binaryValue", value.get("BinaryValue"))
    if string is not None:
        return {"DataType": data_type, "StringValue": string}
    if binary is not None:
        import base64

        raw = base64.b64decode(binary) if isinstance(binary, str) else binary
        return {"DataType": data_type, "BinaryValue": raw}
    return None
