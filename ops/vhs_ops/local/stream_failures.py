"""What a stream event source does with a batch it gives up on, as Lambda does: it sends
Lambda's on-failure record (`DDBStreamBatchInfo`: the shard and the range of sequence numbers,
not the records) to the on-failure destination. The change feed's DLQ is one (`sqs_destination`),
and `vhs.changes.publish.replay` reads the range back from the stream.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any


def failure_record(
    batch: list[dict[str, Any]],
    *,
    shard_id: str,
    stream_arn: str,
    condition: str,
    function_arn: str,
    attempts: int,
    error: str | None,
) -> dict[str, Any]:
    """Lambda's on-failure destination record for a stream batch it gave up on."""

    def arrival(record: dict[str, Any]) -> str:
        seconds = record["dynamodb"].get("ApproximateCreationDateTime", time.time())
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": attempts,
        },
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled" if error else None,
        },
        "version": "1.0",
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": arrival(batch[0]),
            "approximateArrivalOfLastRecord": arrival(batch[-1]),
            "batchSize": len(batch),
            "streamArn": stream_arn,
        },
    }


def sqs_destination(sqs: Any, queue_url: str) -> Callable[[dict[str, Any]], None]:
    """An `on_failure` that sends the on-failure record to an SQS queue (the change feed's
    DLQ), as the deployed event source's destination does."""

    def send(record: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(record))

    return send
