"""The message contract's reasons and what a read message carries (mutation testing found them
unpinned: docs/reliability.md, "Mutation testing"). A reason is what the producer reads on the
dead letter, so its words are part of the contract."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vhs import resources
from vhs.ingest.contract import InvalidMessage, read_message, validate_message
from vhs.ingest.ingestor import Ingestor
from vhs.ingest.staging import S3Location, StagingLocation
from vhs_testing.backends import Backend

T = "2026-01-01T00:00:00Z"
POINTER = "software.amazon.payloadoffloading.PayloadS3Pointer"
STAGING = StagingLocation("stage", resources.STAGING_PREFIX)


def reason_for(body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(InvalidMessage) as raised:
        validate_message(body)
    return raised.value.field, raised.value.reason


def test_a_deleted_that_is_not_true_is_told_to_be_left_out():
    assert reason_for({"id": "a", "updated_at": T, "record": 1, "deleted": False}) == (
        "deleted",
        "must be true; leave it out for a put",
    )


@pytest.mark.parametrize(
    ("payloads", "named"),
    [
        ({}, "(none)"),
        ({"record": 1, "body_base64": "AA=="}, "(record, body_base64)"),
        (
            {"body_base64": "AA==", "record_location": "s3://b/k", "deleted": True},
            "(body_base64, record_location, deleted)",
        ),
    ],
)
def test_the_payload_count_names_what_was_sent(payloads: dict[str, Any], named: str):
    field, reason = reason_for({"id": "a", "updated_at": T, **payloads})
    assert field == "record"
    assert reason == (
        f"exactly one of record, body_base64, record_location, deleted is required {named}"
    )


def test_a_claim_check_whose_payload_is_a_claim_check_is_refused():
    def fetch(location: S3Location, field: str) -> bytes:
        key = f"{resources.STAGING_PREFIX}deeper"
        return json.dumps([POINTER, {"s3BucketName": "stage", "s3Key": key}]).encode()

    pointer = [POINTER, {"s3BucketName": "stage", "s3Key": f"{resources.STAGING_PREFIX}p"}]
    with pytest.raises(InvalidMessage) as raised:
        read_message({"body": json.dumps(pointer)}, staging=STAGING, fetch=fetch)
    assert (raised.value.field, raised.value.reason) == (
        "payload",
        "is itself a claim check: pointers do not nest",
    )


def test_a_read_message_carries_its_content_type_and_record():
    staged = validate_message(
        {"id": "a", "updated_at": T, "record_location": "s3://b/k", "content_type": "text/xml"}
    )
    assert (staged.location, staged.content_type) == (S3Location("b", "k"), "text/xml")
    record = validate_message({"id": "a", "updated_at": T, "record": {"title": "x"}})
    assert (record.record, record.content_type) == ({"title": "x"}, "application/json")


def test_a_staged_body_is_stored_with_the_messages_content_type(inprocess: Backend):
    """The message's content type wins over the staged object's own."""
    resources.create_bucket(inprocess.s3, "stage", inprocess.region)
    key = f"{resources.STAGING_PREFIX}marc"
    inprocess.s3.put_object(Bucket="stage", Key=key, Body=b"<record/>", ContentType="text/plain")
    sqs = inprocess.new_client("sqs")
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    store = inprocess.store()
    worker = Ingestor(store, sqs_client=sqs, dlq_url=dlq_url, staging=STAGING)
    message = {
        "id": "marc-1",
        "updated_at": T,
        "record_location": f"s3://stage/{key}",
        "content_type": "application/marcxml+xml",
    }
    result = worker.handle({"messageId": "m-1", "body": json.dumps(message)})
    assert result.outcome == "stored"
    stored = store.get("marc-1")
    assert (stored.content_type, stored.body) == ("application/marcxml+xml", b"<record/>")
