"""Lambda's SQS event, built from what ReceiveMessage returns: each message as a record
(`lambda_record`: messageId, receiptHandle, body, attributes with ApproximateReceiveCount,
messageAttributes in the lower-camel form, md5OfBody, eventSource "aws:sqs",
eventSourceARN, awsRegion), as vhs.changes.stream builds a stream's records. A shape, apart
from the poller that gathers the batches (sqs_source.py): tests and benchmarks build events
with it without a queue.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

# The system attributes Lambda puts in a record's `attributes`, when SQS has them.
RECORD_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)


def lambda_record(message: dict[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    """One ReceiveMessage message as a record of Lambda's SQS event."""
    attributes = message.get("Attributes") or {}
    body = message.get("Body", "")
    record_attributes = {name: attributes[name] for name in RECORD_ATTRIBUTES if name in attributes}
    message_attributes = {
        name: _event_attribute(value)
        for name, value in (message.get("MessageAttributes") or {}).items()
    }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": record_attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody")
        or hashlib.md5(message.get("Body", "").encode(), usedforsecurity=False).hexdigest(),
        "md5OfMessageAttributes": message.get("MD5OfMessageAttributes"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def _b64(value: bytes | str) -> str:
    return base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode()


def _event_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """A ReceiveMessage MessageAttributeValue in the event's lower-camel form (binary values
    base64-encoded, as JSON carries them)."""
    out: dict[str, Any] = {}
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        out["binaryValue"] = _b64(value["BinaryValue"])
    out["stringListValues"] = list(value.get("StringListValues") or [])
    out["binaryListValues"] = [_b64(v) for v in value.get("BinaryListValues") or []]
    out["dataType"] = value["DataType"]
    return out
