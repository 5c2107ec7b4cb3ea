"""The ingestor's results and its reasons, on in-process moto (mutation testing found them
unpinned: docs/reliability.md, "Mutation testing"): what `handle` returns, the field a refused
staged content type is charged to, a dead letter too large to send without staging, and the
log line of a receipt that could not be written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from vhs import shapes
from vhs.errors import InvalidMessage
from vhs.ingest.ingestor import MAX_MESSAGE_BYTES, Ingestor
from vhs.ingest.staging import StagingLocation
from vhs_ops import provisioning
from vhs_testing.backends import Backend

STAGING = "staging-bucket"
T = "2026-11-01T09:00:00Z"


@pytest.fixture
def queues(inprocess: Backend) -> Iterator[tuple[Any, str]]:
    sqs = inprocess.new_client("sqs")
    yield sqs, sqs.create_queue(QueueName="dlq")["QueueUrl"]


def ingestor(backend: Backend, queues: tuple[Any, str], staging: StagingLocation | None):
    sqs, dlq_url = queues
    return Ingestor(backend.store(), sqs_client=sqs, dlq_url=dlq_url, staging=staging)


def record(body: Any, message_id: str = "m-1") -> dict[str, Any]:
    """An SQS record as Lambda delivers it."""
    return {
        "messageId": message_id,
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {"ApproximateFirstReceiveTimestamp": "1795000000100"},
        "messageAttributes": {},
    }


def test_handle_reports_the_message_the_record_and_the_outcome(inprocess: Backend, queues):
    worker = ingestor(inprocess, queues, None)
    put = record({"id": "b1", "updated_at": T, "record": {"n": 1}}, "m-put")
    result = worker.handle(put)
    assert (result.message_id, result.record_id, result.outcome, result.version) == (
        "m-put",
        "b1",
        "stored",
        1,
    )


def test_a_staged_objects_refused_content_type_is_charged_to_content_type(
    inprocess: Backend, queues
):
    """The message names no content type, so the staged object's own is used: one S3 takes
    but VHS does not (over 255 characters). The producer sets `content_type` to fix it."""
    provisioning.create_bucket(inprocess.s3, STAGING, inprocess.region)
    key = f"{shapes.STAGING_PREFIX}odd-type"
    odd = "application/x-" + "a" * 300
    inprocess.s3.put_object(Bucket=STAGING, Key=key, Body=b"{}", ContentType=odd)
    worker = ingestor(inprocess, queues, StagingLocation(STAGING, shapes.STAGING_PREFIX))
    message = {"id": "b2", "updated_at": T, "record_location": f"s3://{STAGING}/{key}"}
    with pytest.raises(InvalidMessage) as raised:
        worker.handle(record(message))
    assert raised.value.field == "content_type"
    assert "at most 255 characters" in raised.value.reason


def test_a_dead_letter_too_large_to_send_without_staging_is_refused_naming_the_body(
    inprocess: Backend, queues
):
    worker = ingestor(inprocess, queues, None)
    huge = record("x" * MAX_MESSAGE_BYTES)
    with pytest.raises(InvalidMessage) as raised:
        worker.dead_letter(huge, InvalidMessage("body", "is not JSON"))
    assert (raised.value.field, raised.value.reason) == (
        "body",
        "too large to dead-letter and no staging location",
    )
    sqs, dlq_url = queues
    assert "Messages" not in sqs.receive_message(QueueUrl=dlq_url)


def test_a_receipt_that_cannot_be_written_is_logged_and_the_letter_still_sent(
    inprocess: Backend, queues, caplog: pytest.LogCaptureFixture
):
    missing = StagingLocation("no-such-staging-bucket", shapes.STAGING_PREFIX)
    worker = ingestor(inprocess, queues, missing)
    worker.dead_letter(record("not json", "m-bad"), InvalidMessage("body", "is not JSON"))
    sqs, dlq_url = queues
    (sent,) = sqs.receive_message(QueueUrl=dlq_url)["Messages"]
    assert sent["Body"] == "not json"
    key = missing.receipt_key(sent["MessageId"])
    assert f"could not write the receipt of dead letter {key}: " in caplog.text
    assert "NoSuchBucket" in caplog.text
