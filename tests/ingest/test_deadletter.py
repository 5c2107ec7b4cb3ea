"""Dead letters: the attributes the handler writes and what a letter read back says (mutation
testing found them unpinned: docs/reliability.md, "Mutation testing"). Attributes go through
in-process SQS, so their shape is the one SendMessage takes."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from typing import Any

from vhs.errors import InvalidMessage
from vhs.ingest.deadletter import (
    ERROR_FIELD,
    ERROR_MESSAGE,
    ERROR_TYPE,
    FIRST_SEEN,
    SOURCE_MESSAGE_ID,
    DeadLetter,
    dead_letter_attributes,
)
from vhs_testing.backends import Backend

FIRST_RECEIVE = "1795000000100"  # ms since the epoch, as Lambda's SQS records carry it


def record(attributes: dict[str, Any] | None = None, **system: str) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "body": "not json",
        "attributes": system,
        "messageAttributes": attributes or {},
    }


def value(attributes: dict[str, Any], name: str) -> str:
    return attributes[name]["StringValue"]


def test_producer_attributes_in_either_shape_reach_the_dead_letter(inprocess: Backend):
    """Lambda's event shape (dataType, binaryValue as base64) and SendMessage's own
    (DataType, StringValue, BinaryValue as bytes) are both kept, strings and binaries."""
    producers = {
        "lambda-binary": {"dataType": "Binary", "binaryValue": base64.b64encode(b"\0\1").decode()},
        "lambda-string": {"dataType": "String", "stringValue": "from lambda"},
        "api-binary": {"DataType": "Binary", "BinaryValue": b"\2\3"},
        "api-string": {"DataType": "String", "StringValue": "from the api"},
    }
    attributes = dead_letter_attributes(record(producers), InvalidMessage("body", "not JSON"))
    sqs = inprocess.new_client("sqs")
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="not json", MessageAttributes=attributes)
    (got,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    received = got["MessageAttributes"]
    assert received["lambda-binary"] == {"DataType": "Binary", "BinaryValue": b"\0\1"}
    assert received["lambda-string"] == {"DataType": "String", "StringValue": "from lambda"}
    assert received["api-binary"] == {"DataType": "Binary", "BinaryValue": b"\2\3"}
    assert received["api-string"] == {"DataType": "String", "StringValue": "from the api"}
    assert value(received, ERROR_TYPE) == "InvalidMessage"


def test_first_seen_is_the_ingest_queues_first_receive_in_utc():
    attributes = dead_letter_attributes(
        record(ApproximateFirstReceiveTimestamp=FIRST_RECEIVE), InvalidMessage("body", "x")
    )
    expected = datetime.fromtimestamp(int(FIRST_RECEIVE) / 1000, UTC).isoformat()
    assert value(attributes, FIRST_SEEN) == expected
    assert value(attributes, SOURCE_MESSAGE_ID) == "m-1"


def test_without_a_first_receive_time_first_seen_is_now():
    before = datetime.now(UTC)
    attributes = dead_letter_attributes(record(), InvalidMessage("body", "x"))
    seen = datetime.fromisoformat(value(attributes, FIRST_SEEN))
    assert before <= seen <= datetime.now(UTC)


def test_a_long_field_is_cut_at_256_characters_and_refused_characters_escaped():
    error = InvalidMessage("f" * 300, "the key a\x00b cannot be read")
    attributes = dead_letter_attributes(record(), error)
    assert value(attributes, ERROR_FIELD) == "f" * 256
    assert value(attributes, ERROR_MESSAGE) == "the key a\\u0000b cannot be read"


def test_claim_check_attributes_are_kept_first_when_not_all_fit():
    """SQS takes 10 attributes: VHS's five, then the producer's, the claim-check flag first
    (a redriven claim check must still resolve), then as many others as fit."""
    producers = {f"0-{n}": {"dataType": "String", "stringValue": str(n)} for n in range(7)}
    producers["SQSLargePayloadSize"] = {"dataType": "Number", "stringValue": "300000"}
    attributes = dead_letter_attributes(record(producers), InvalidMessage("body", "x"))
    assert len(attributes) == 10
    assert attributes["SQSLargePayloadSize"] == {"DataType": "Number", "StringValue": "300000"}
    assert [name for name in attributes if name.startswith("0-")] == ["0-0", "0-1", "0-2", "0-3"]


def letter(attributes: dict[str, Any], **system: str) -> dict[str, Any]:
    """A message as ReceiveMessage returns it from the DLQ."""
    strings = {name: {"DataType": "String", "StringValue": v} for name, v in attributes.items()}
    return {"MessageId": "dlq-1", "Body": "{}", "MessageAttributes": strings, "Attributes": system}


def test_a_vouched_letters_first_seen_is_its_own_in_any_offset():
    message = letter(
        {ERROR_TYPE: "InvalidMessage", FIRST_SEEN: "2026-01-01T09:00:00+09:00"},
        SentTimestamp="1795000000000",
    )
    read = DeadLetter.from_message(message, vouched=True)
    assert read.first_seen == datetime(2026, 1, 1, tzinfo=UTC)
    assert read.as_dict(now=datetime(2026, 1, 1, 0, 1, tzinfo=UTC))["age_seconds"] == 60


def test_an_unvouched_letters_source_message_id_is_not_believed():
    message = letter({ERROR_TYPE: "InvalidMessage", SOURCE_MESSAGE_ID: "forged"})
    read = DeadLetter.from_message(message, vouched=False)
    assert (read.source_message_id, read.retries_exhausted) == ("dlq-1", True)
    assert "the function's log has each attempt's error under this message id" in read.reason


def test_a_letter_with_no_times_at_all_was_first_seen_now():
    before = datetime.fromtimestamp(time.time(), UTC)
    read = DeadLetter.from_message(letter({}))
    assert before <= read.first_seen <= datetime.now(UTC)


def test_as_dict_is_json_with_first_seen_in_iso_form():
    read = DeadLetter.from_message(letter({}, SentTimestamp="1795000000000"))
    data = read.as_dict(now=read.first_seen)
    assert data["first_seen"] == "2026-11-18T11:06:40+00:00"
    assert json.loads(json.dumps(data))["first_seen"] == data["first_seen"]
    assert data["age_seconds"] == 0
