"""A message of the ingest DLQ read as a dead letter: the reason it claims, believed only when
the handler's receipt vouches for it; the record id behind a claim check, read only inside the
staging location; and, for a redrive, the producer's own body and attributes back. What is
read from S3 about a letter, apart from the passes over the queue that list, redrive or
discard letters (dlq.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vhs.ingest.deadletter import (
    ERROR_TYPE,
    DeadLetter,
    parse_or_none,
    producer_attributes,
    receipt_vouches_for,
)
from vhs.ingest.staging import CLAIM_CHECK_ATTRIBUTES, S3Location, StagingLocation, is_claim_check

# Claim-check payloads up to this size are read to find the record id, when asked to.
RESOLVE_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class LetterReader:
    """Reads dead letters with `s3` from the staging location (`staging`: where the
    handler's receipts and staged dead letters are). Without either, no reason is believed
    and no claim check is resolved."""

    s3: Any
    staging: StagingLocation | None

    def unstaged(self, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The body and attributes to send back: the producer's. A dead letter the handler
        staged (too large for the DLQ with its reason attached) points into the handler's own
        dead-letters/, where ingest never reads: its payload, the producer's original body,
        goes back inline (it came in one message, and goes back with fewer attributes)."""
        attributes = producer_attributes(message.get("MessageAttributes") or {})
        location = self.pointer(message)
        if (
            location is None
            or self.staging is None
            or self.s3 is None
            or not self.staging.holds_staged_dead_letter(location)
        ):
            return message["Body"], attributes
        payload = self.s3.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        for name in CLAIM_CHECK_ATTRIBUTES:  # the handler's flag, not the producer's
            attributes.pop(name, None)
        return payload.decode(), attributes

    @staticmethod
    def pointer(message: dict[str, Any]) -> S3Location | None:
        """Where a claim check's payload is, if the message is a well-formed claim check."""
        parsed = parse_or_none(message.get("Body", ""))
        if not is_claim_check(parsed) or not isinstance(parsed[1], dict):
            return None
        bucket, key = parsed[1].get("s3BucketName"), parsed[1].get("s3Key")
        if not isinstance(bucket, str) or not isinstance(key, str):
            return None
        return S3Location(bucket, key)

    def letter(self, message: dict[str, Any], resolve: bool) -> DeadLetter:
        record_id = None
        if resolve and self.s3 is not None:
            record_id = self.resolve(message)
        vouched = receipt_vouches_for(self.receipt(message), message)
        return DeadLetter.from_message(message, record_id, vouched=vouched)

    def receipt(self, message: dict[str, Any]) -> bytes | None:
        """The handler's receipt for this dead letter, if it claims a reason and has one."""
        if ERROR_TYPE not in (message.get("MessageAttributes") or {}):
            return None  # claims nothing: retries exhausted, no receipt to read
        if self.staging is None or self.s3 is None:
            return None
        key = self.staging.receipt_key(message["MessageId"])
        try:
            return self.s3.get_object(Bucket=self.staging.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError):
            return None  # none (a forged reason), or unreadable: the reason is not believed

    def resolve(self, message: dict[str, Any]) -> str | None:
        """The record id in a claim check's payload, if it is small enough to read. Only
        payloads inside the staging location are read (producers' objects and the handler's
        staged dead letters): a pointer elsewhere is a producer's to write, and the operator's
        credentials must not fetch whatever it names."""
        location = self.pointer(message)
        if location is None or self.staging is None or self.s3 is None:
            return None
        if not (self.staging.contains(location) or self.staging.holds_staged_dead_letter(location)):
            return None
        try:
            head = self.s3.head_object(Bucket=location.bucket, Key=location.key)
            if head.get("ContentLength", 0) > RESOLVE_LIMIT:
                return None
            payload = self.s3.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        except (ClientError, BotoCoreError):
            return None  # missing (expired?) or not readable: the reason says what is wrong
        document = parse_or_none(payload)
        if isinstance(document, dict) and isinstance(document.get("id"), str):
            return document["id"]
        return None
