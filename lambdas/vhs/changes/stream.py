"""DynamoDB Streams records in the shape Lambda hands them to a function.

A GetRecords record becomes a record of Lambda's DynamoDB stream event (`lambda_record`):
eventID, eventName (INSERT, MODIFY, REMOVE), eventVersion, eventSource "aws:dynamodb",
awsRegion, eventSourceARN and ``dynamodb`` (ApproximateCreationDateTime in epoch seconds,
Keys, NewImage, OldImage, SequenceNumber, SizeBytes, StreamViewType), binary values
base64-encoded as in Lambda's JSON. `read_range` reads a range of one shard back.

The change feed's `replay` (publish.py) reads a dead-lettered range of the stream with these, in
the Lambda asset; the local stream event source (vhs_ops.local.stream_source) builds its events
with them.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

EVENT_VERSION = "1.1"
MAX_GET_RECORDS = 1000  # GetRecords' Limit


def _b64(value: bytes | bytearray | str) -> str:
    if isinstance(value, str):  # already in JSON form
        return value
    return base64.b64encode(bytes(value)).decode()


def event_value(value: Mapping[str, Any]) -> dict[str, Any]:
    """An AttributeValue as an SDK returns it (bytes for B and BS) in the JSON form of a
    Lambda event (base64 strings)."""
    ((kind, inner),) = value.items()
    if kind == "B":
        return {"B": _b64(inner)}
    if kind == "BS":
        return {"BS": [_b64(v) for v in inner]}
    if kind == "M":
        return {"M": {k: event_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [event_value(v) for v in inner]}
    return {kind: inner}


def event_image(image: Mapping[str, Any]) -> dict[str, Any]:
    return {name: event_value(value) for name, value in image.items()}


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.replace(tzinfo=value.tzinfo or UTC).timestamp()
    return float(value)


def lambda_record(raw: Mapping[str, Any], *, stream_arn: str, region: str) -> dict[str, Any]:
    """One GetRecords record as a record of Lambda's DynamoDB stream event."""
    source = raw.get("dynamodb") or {}
    stream: dict[str, Any] = {}
    if "ApproximateCreationDateTime" in source:
        stream["ApproximateCreationDateTime"] = int(_epoch(source["ApproximateCreationDateTime"]))
    for name in ("Keys", "NewImage", "OldImage"):
        if name in source:
            stream[name] = event_image(source[name])
    stream["SequenceNumber"] = str(source["SequenceNumber"])
    stream["SizeBytes"] = int(source.get("SizeBytes", 0))
    stream["StreamViewType"] = source.get("StreamViewType", "NEW_AND_OLD_IMAGES")
    record = {
        "eventID": raw.get("eventID") or uuid.uuid4().hex,
        "eventName": raw["eventName"],
        "eventVersion": EVENT_VERSION,
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": stream,
        "eventSourceARN": stream_arn,
    }
    if raw.get("userIdentity"):  # TTL deletes: {"type": "Service", "principalId": ...}
        record["userIdentity"] = dict(raw["userIdentity"])
    return record


def read_range(
    streams: Any, stream_arn: str, shard_id: str, start: str, end: str, *, max_empty: int = 10
) -> Iterator[dict[str, Any]]:
    """The raw records of one shard from sequence number `start` to `end`, inclusive."""
    last = int(end)
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn,
        ShardId=shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=start,
    )["ShardIterator"]
    empty = 0
    while iterator and empty < max_empty:
        response = streams.get_records(ShardIterator=iterator, Limit=MAX_GET_RECORDS)
        records = response.get("Records") or []
        empty = 0 if records else empty + 1
        for record in records:
            if int(record["dynamodb"]["SequenceNumber"]) > last:
                return
            yield record
        iterator = response.get("NextShardIterator")
