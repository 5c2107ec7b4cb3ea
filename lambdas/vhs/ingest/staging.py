"""Where staged bodies and claim-check payloads live, and the claim checks that point there.

Claim checks are the AWS SQS Extended Client libraries' format (Java and Python, see
docs/ingest.md): the message body is `[class name, {"s3BucketName", "s3Key"}]`, flagged by a
Number message attribute with the payload's size. VHS reads both class names and both
attributes, and writes the current ones (the producer, and dead letters too large for SQS).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidMessage
from ..shapes import DEAD_LETTER_RECEIPT_PREFIX, DEAD_LETTER_STAGING_PREFIX
from ..strict_json import json_type

MAX_S3_KEY_BYTES = 1024

# The class names and size attributes of claim checks; VHS writes the first of each.
CLAIM_CHECK_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
CLAIM_CHECK_CLASSES = frozenset(
    {CLAIM_CHECK_CLASS, "com.amazon.sqs.javamessaging.MessageS3Pointer"}
)
CLAIM_CHECK_ATTRIBUTES = ("ExtendedPayloadSize", "SQSLargePayloadSize")
CLAIM_CHECK_SIZE_ATTRIBUTE = CLAIM_CHECK_ATTRIBUTES[0]


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
    data with its own permissions, nor its own dead letters and receipts, which live in the
    same bucket under DEAD_LETTER_STAGING_PREFIX (`dead_letter_key`, `receipt_key`)."""

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        if self.prefix.startswith(DEAD_LETTER_STAGING_PREFIX):
            raise ValueError(
                f"staging prefix {self.prefix!r} is inside {DEAD_LETTER_STAGING_PREFIX}, "
                "which is the ingest function's"
            )

    @classmethod
    def from_env(cls) -> StagingLocation | None:
        """From VHS_STAGING_BUCKET and VHS_STAGING_PREFIX; None when no bucket is set."""
        from .. import settings

        bucket = settings.get(settings.STAGING_BUCKET)
        return cls(bucket, settings.get(settings.STAGING_PREFIX)) if bucket else None

    def contains(self, location: S3Location) -> bool:
        """Whether `location` is one a message may point at (producers' staged objects)."""
        return (
            location.bucket == self.bucket
            and location.key.startswith(self.prefix)
            and not location.key.startswith(DEAD_LETTER_STAGING_PREFIX)
        )

    def check(self, location: S3Location, field: str, bucket_field: str = "") -> S3Location:
        if not self.contains(location):
            raise InvalidMessage(
                bucket_field if bucket_field and location.bucket != self.bucket else field,
                f"{location} is outside the staging location s3://{self.bucket}/{self.prefix}"
                + (
                    f" (the ingest function's {DEAD_LETTER_STAGING_PREFIX})"
                    if location.key.startswith(DEAD_LETTER_STAGING_PREFIX)
                    else ""
                ),
            )
        return location

    def dead_letter_key(self, message_id: str) -> str:
        """Where the handler stages a dead letter too large for the DLQ with its reason."""
        return f"{DEAD_LETTER_STAGING_PREFIX}{message_id}"

    def receipt_key(self, dead_letter_message_id: str) -> str:
        """Where the handler keeps the receipt of a dead letter it sent (deadletter.py)."""
        return f"{DEAD_LETTER_RECEIPT_PREFIX}{dead_letter_message_id}"

    def holds_staged_dead_letter(self, location: S3Location) -> bool:
        return (
            location.bucket == self.bucket
            and location.key.startswith(DEAD_LETTER_STAGING_PREFIX)
            and not location.key.startswith(DEAD_LETTER_RECEIPT_PREFIX)
        )


def require_staged(
    staging: StagingLocation | None, location: S3Location, field: str, bucket_field: str = ""
) -> S3Location:
    """`location`, if it is inside the stack's staging location; else InvalidMessage."""
    if staging is None:
        raise InvalidMessage(field, "this stack has no staging location for staged bodies")
    return staging.check(location, field, bucket_field)


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


def claim_check_body(location: S3Location) -> str:
    """The body of a claim check pointing at `location`, as the Extended Client writes it."""
    pointer = {"s3BucketName": location.bucket, "s3Key": location.key}
    return json.dumps([CLAIM_CHECK_CLASS, pointer])


def claim_check_attributes(payload_size: int) -> dict[str, Any]:
    """The message attribute that flags a claim check, in SendMessage's shape."""
    return {CLAIM_CHECK_SIZE_ATTRIBUTE: {"DataType": "Number", "StringValue": str(payload_size)}}
