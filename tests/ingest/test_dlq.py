"""`vhs dlq list` and `vhs dlq redrive` on in-process moto.

The dead letters are made by the real pipeline: producers' messages on the ingest queue, the
real ingest handler (as the Lambda event source runs it), and SQS's own redrive policy.
Invalid messages are dead-lettered by the handler with their reasons; valid messages that
fail while the store is misconfigured exhaust their retries and are moved by SQS.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import moto
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from vhs import VersionedHybridStore, shapes
from vhs.ingest.deadletter import (
    DEAD_LETTER_ATTRIBUTES,
    ERROR_TYPE,
    RETRIES_EXHAUSTED,
    REVOKED_RECEIPT,
    DeadLetter,
    producer_attributes,
    receipt_vouches_for,
)
from vhs.ingest.staging import StagingLocation
from vhs_ops import provisioning
from vhs_ops.admin.dlq import DeadLetterQueue, RedriveFilter
from vhs_ops.local.invoke import LambdaContext, load_handler
from vhs_ops.local.sqs_event import lambda_record
from vhs_ops.local.sqs_source import settle_response
from vhs_testing.backends import atomic_inprocess_dynamodb

REGION = "us-east-1"
TABLE, BUCKET, STAGING = "records", "vhs-dlq-bodies", "vhs-dlq-staging"
T = "2026-11-01T09:00:00Z"
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"


class Interrupted(BaseException):
    """The process is killed (or Ctrl-C) in the middle of an AWS call."""


@dataclass
class Stack:
    sqs: Any
    s3: Any
    store: VersionedHybridStore
    queue_url: str
    dlq_url: str

    @property
    def queue_arn(self) -> str:
        return self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def send(self, body: Any, attributes: dict[str, str] | None = None) -> str:
        return self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=body if isinstance(body, str) else json.dumps(body),
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value}
                for name, value in (attributes or {}).items()
            },
        )["MessageId"]

    def deliver(self) -> int:
        """One poll of the Lambda event source: receive a batch, run the real handler, delete
        what it finished. Failed messages are visible again at once (as if their visibility
        timeout had run out). Returns how many messages were received."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        arn = self.queue_arn
        event = {"Records": [lambda_record(m, queue_arn=arn, region=REGION) for m in messages]}
        ids = [m["MessageId"] for m in messages]
        try:
            response = load_handler("ingest")(event, LambdaContext(function_name="vhs-ingest"))
        except Exception:  # every message failed: the invocation fails
            response = {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}
        failed, _ = settle_response(response, ids)
        for message in messages:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return len(messages)

    def deliver_all(self) -> None:
        """Deliver until the queue is empty: stored, dead-lettered, or moved to the DLQ by the
        redrive policy after maxReceiveCount receives."""
        for _ in range(4 * shapes.INGEST.max_receive_count):
            if not self.deliver():
                return
        raise AssertionError("the ingest queue did not drain")

    def bodies(self, url: str) -> Counter[str]:
        """Every message body in a queue, counted (each received once, then released)."""
        found: Counter[str] = Counter()
        seen: dict[str, str] = {}
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                seen[message["MessageId"]] = message["ReceiptHandle"]
                found[message["Body"]] += 1
        for handle in seen.values():
            self.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0
            )
        return found

    def dlq(self, **kw: Any) -> DeadLetterQueue:
        kw.setdefault("wait_seconds", 0)
        kw.setdefault("staging", StagingLocation(STAGING, shapes.STAGING_PREFIX))
        return DeadLetterQueue(self.sqs, self.dlq_url, self.queue_url, s3=self.s3, **kw)


def handler_env(dlq_url: str, table: str = TABLE) -> dict[str, str]:
    return {
        "VHS_TABLE_NAME": table,
        "VHS_BUCKET_NAME": BUCKET,
        "VHS_DLQ_URL": dlq_url,
        "VHS_STAGING_BUCKET": STAGING,
        "VHS_STAGING_PREFIX": shapes.STAGING_PREFIX,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "VHS",
    }


def configure_handler(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    import sys

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    load_handler("ingest")
    sys.modules["handlers.ingest"].ingestor.cache_clear()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    with moto.mock_aws(), atomic_inprocess_dynamodb():
        s3 = boto3.client("s3", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        provisioning.create_store_resources(
            dynamodb, s3, table_name=TABLE, bucket_name=BUCKET, region=REGION
        )
        provisioning.create_staging_bucket(s3, STAGING, REGION)
        queue_url, dlq_url = provisioning.create_ingest_queues(
            sqs, queue_name="ingest", dlq_name="ingest-dlq"
        )
        store = VersionedHybridStore(TABLE, BUCKET, s3_client=s3, dynamodb_client=dynamodb)
        configure_handler(monkeypatch, handler_env(dlq_url))
        yield Stack(sqs, s3, store, queue_url, dlq_url)
        configure_handler(monkeypatch, handler_env(dlq_url))


INVALID = [
    # (body, producer attributes, error field)
    ("this is not JSON", {}, "body"),
    ({"id": "bad-time-1", "updated_at": "2026-11-01T09:00:00", "record": {}}, {}, "updated_at"),
    (
        {"id": "bad-time-2", "updated_at": "yesterday", "record": {}},
        {"source": "catalogue"},
        "updated_at",
    ),
    ({"id": "colour-1", "updated_at": T, "record": {}, "colour": "blue"}, {}, "colour"),
]
VALID = [{"id": f"later-{n}", "updated_at": T, "record": {"n": n}} for n in range(3)]


@pytest.fixture
def dead(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """Four invalid messages dead-lettered by the handler, a claim check whose payload is
    invalid, and three valid messages whose retries ran out while the table was misnamed."""
    for body, attributes, _ in INVALID:
        stack.send(body, attributes)
    payload = {"id": "claimed-1", "updated_at": "not a time", "record": {}}
    stack.s3.put_object(
        Bucket=STAGING,
        Key=shapes.STAGING_PREFIX + "claim-checks/c1.json",
        Body=json.dumps(payload),
    )
    pointer = [
        POINTER_CLASS,
        {"s3BucketName": STAGING, "s3Key": shapes.STAGING_PREFIX + "claim-checks/c1.json"},
    ]
    stack.sqs.send_message(
        QueueUrl=stack.queue_url,
        MessageBody=json.dumps(pointer),
        MessageAttributes={"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "80"}},
    )
    stack.deliver_all()
    configure_handler(monkeypatch, handler_env(stack.dlq_url, table="no-such-table"))
    for body in VALID:
        stack.send(body)
    stack.deliver_all()
    configure_handler(monkeypatch, handler_env(stack.dlq_url))  # the cause, fixed
    return stack


def test_list_shows_every_dead_letter_with_its_reason_and_age_and_consumes_nothing(dead):
    before = datetime.now(UTC)
    dlq = dead.dlq()
    counted: list[int] = []
    letters = dlq.list(progress=counted.append)
    assert len(letters) == 8 and counted[-1] == 8
    assert letters == sorted(letters, key=lambda letter: letter.first_seen)  # oldest first
    by_type = Counter(letter.error_type for letter in letters)
    assert by_type == {"InvalidMessage": 5, RETRIES_EXHAUSTED: 3}
    invalid = {letter.record_id: letter for letter in letters if not letter.retries_exhausted}
    assert invalid["bad-time-1"].error_field == "updated_at"
    assert invalid["bad-time-1"].reason and invalid["bad-time-1"].error_type == "InvalidMessage"
    assert invalid["colour-1"].error_field == "colour"
    assert invalid[None].error_field in {"body", "payload.updated_at"}
    fields = sorted(letter.error_field or "" for letter in letters if not letter.retries_exhausted)
    assert fields == ["body", "colour", "payload.updated_at", "updated_at", "updated_at"]
    claim = next(letter for letter in letters if letter.claim_check)
    assert claim.record_id is None and claim.error_field == "payload.updated_at"
    exhausted = [letter for letter in letters if letter.retries_exhausted]
    assert sorted(letter.record_id for letter in exhausted) == ["later-0", "later-1", "later-2"]
    for letter in exhausted:
        assert letter.receive_count > shapes.INGEST.max_receive_count
        assert "retries exhausted" in letter.reason and letter.error_field is None
        assert letter.source_message_id == letter.message_id  # its id on the ingest queue
    for letter in letters:
        assert timedelta(0) <= letter.age() < timedelta(minutes=5)
        assert letter.first_seen <= before + timedelta(seconds=1)
        assert letter.as_dict()["age_seconds"] >= 0

    # Nothing consumed: every message is visible again, and a second look sees the same.
    depth = dlq.depth()
    assert (depth.visible, depth.in_flight) == (8, 0)
    again = dlq.list(resolve_claim_checks=True)
    assert {letter.message_id for letter in again} == {letter.message_id for letter in letters}
    assert next(letter for letter in again if letter.claim_check).record_id == "claimed-1"
    assert len(dlq.list(limit=3)) == 3
    assert dlq.depth().visible == 8


def test_redrive_with_a_filter_moves_only_the_matching_messages(dead):
    dlq = dead.dlq()
    dry = dlq.redrive(RedriveFilter(error_fields=frozenset({"updated_at"})), dry_run=True)
    assert (dry.moved, dry.skipped, dry.failed) == (2, 6, 0)
    assert dlq.depth().visible == 8 and dead.bodies(dead.queue_url) == Counter()

    report = dlq.redrive(RedriveFilter(error_fields=frozenset({"updated_at"})))
    assert report.method == "receive-send-delete"
    assert (report.moved, report.skipped, report.failed, report.duplicated) == (2, 6, 0, 0)
    moved = dead.bodies(dead.queue_url)
    assert sorted(json.loads(body)["id"] for body in moved) == ["bad-time-1", "bad-time-2"]
    assert (dlq.depth().visible, dlq.depth().in_flight) == (6, 0)  # the rest, visible at once

    # The producer's attributes travel with the message; the handler's reasons do not.
    message = dead.sqs.receive_message(
        QueueUrl=dead.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    attributes = {json.loads(m["Body"])["id"]: m.get("MessageAttributes", {}) for m in message}
    assert set(attributes["bad-time-2"]) == {"source"}
    assert attributes["bad-time-2"]["source"]["StringValue"] == "catalogue"
    assert attributes["bad-time-1"] == {}

    by_prefix = dlq.redrive(RedriveFilter(id_prefix="claimed-"))
    assert by_prefix.moved == 1  # a claim check: its payload was read to find its id
    capped = dlq.redrive(RedriveFilter(error_types=frozenset({"invalidmessage"}), max_messages=1))
    assert (capped.moved, capped.skipped) == (1, 4)
    assert dlq.depth().visible == 4


def test_redrive_of_retries_exhausted_messages_after_the_fix_stores_them(dead):
    dlq = dead.dlq()
    report = dlq.redrive(RedriveFilter(retries_exhausted=True))
    assert (report.moved, report.skipped) == (3, 5)
    dead.deliver_all()  # the ingest function, now configured right
    for n in range(3):
        assert dead.store.get(f"later-{n}").json() == {"n": n}
    remaining = dlq.list()
    assert len(remaining) == 5 and not any(letter.retries_exhausted for letter in remaining)


def test_discard_deletes_only_the_selected_dead_letters(dead):
    dlq = dead.dlq()
    with pytest.raises(ValueError):
        dlq.discard(RedriveFilter())
    selection = RedriveFilter(error_types=frozenset({"InvalidMessage"}))
    dry = dlq.discard(selection, dry_run=True)
    assert (dry.discarded, dry.skipped) == (5, 3) and dlq.depth().visible == 8
    report = dlq.discard(selection)
    assert (report.discarded, report.skipped, report.failed) == (5, 3, 0)
    assert all(letter.retries_exhausted for letter in dlq.list())
    assert dlq.discard(RedriveFilter(), everything=True).discarded == 3
    assert dlq.depth().visible == 0 and dead.bodies(dead.queue_url) == Counter()


def test_a_redriven_invalid_message_comes_back_with_fresh_reasons(dead):
    dlq = dead.dlq()
    dlq.redrive(RedriveFilter(error_fields=frozenset({"colour"})))
    dead.deliver_all()  # still invalid: dead-lettered again, once
    colour = [letter for letter in dlq.list() if letter.record_id == "colour-1"]
    assert len(colour) == 1 and colour[0].error_field == "colour"


@pytest.mark.parametrize("fail_at", ["SendMessage", "DeleteMessage"])
def test_an_interrupted_redrive_loses_nothing(dead, fail_at):
    originals = dead.bodies(dead.dlq_url)
    assert sum(originals.values()) == 8
    calls = Counter()

    def killed_midway(**_: Any) -> None:
        calls[fail_at] += 1
        if calls[fail_at] == 3:
            raise Interrupted(fail_at)

    events = dead.sqs.meta.events
    events.register(f"before-call.sqs.{fail_at}", killed_midway)
    try:
        with pytest.raises(Interrupted):
            dead.dlq().redrive()
    finally:
        events.unregister(f"before-call.sqs.{fail_at}", killed_midway)

    in_dlq, in_queue = dead.bodies(dead.dlq_url), dead.bodies(dead.queue_url)
    assert set(in_dlq) | set(in_queue) == set(originals)  # nothing lost
    assert sum(in_queue.values()) == (2 if fail_at == "SendMessage" else 3)
    duplicated = set(in_dlq) & set(in_queue)
    assert len(duplicated) == (0 if fail_at == "SendMessage" else 1)
    assert dead.dlq().depth().in_flight == 0  # released at once, even when interrupted

    # Running it again finishes the job; the duplicate is harmless to the store.
    finished = dead.dlq().redrive()
    assert finished.moved == 6
    assert dead.dlq().depth().visible == 0
    assert set(dead.bodies(dead.queue_url)) == set(originals)


def test_a_failed_send_or_delete_is_reported_and_the_message_kept(dead):
    calls = Counter()

    def refuse_second(event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        calls[operation] += 1
        if calls[operation] == 2:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "no"}}, operation)

    events = dead.sqs.meta.events
    for operation in ("SendMessage", "DeleteMessage"):
        events.register(f"before-call.sqs.{operation}", refuse_second)
    try:
        report = dead.dlq().redrive()
    finally:
        for operation in ("SendMessage", "DeleteMessage"):
            events.unregister(f"before-call.sqs.{operation}", refuse_second)
    assert (report.moved, report.failed, report.duplicated) == (7, 1, 1)
    assert sorted(e["stage"] for e in report.errors) == ["delete", "send"]
    assert dead.dlq().depth().visible == 2  # the unsent one and the undeleted one
    assert sum(dead.bodies(dead.queue_url).values()) == 7


def test_move_task_when_the_endpoint_supports_it_else_the_fallback(dead):
    dlq = dead.dlq()
    # In-process moto looks like AWS but does not implement StartMessageMoveTask.
    refused = dlq.redrive(RedriveFilter(retries_exhausted=True, max_messages=1))
    assert refused.move_task_refused is None  # a filter never uses a move task
    report = dlq.redrive()
    assert report.method == "receive-send-delete" and report.moved == 7
    assert "not implemented" in (report.move_task_refused or "")

    started: list[dict[str, Any]] = []

    def aws_starts_a_task(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict]:
        started.append(params)
        return AWSResponse("", 200, {}, None), {"TaskHandle": "task-1"}

    events = dead.sqs.meta.events
    events.register("before-call.sqs.StartMessageMoveTask", aws_starts_a_task)
    try:
        dead.sqs.send_message(QueueUrl=dead.dlq_url, MessageBody="x")
        task = dlq.redrive()
    finally:
        events.unregister("before-call.sqs.StartMessageMoveTask", aws_starts_a_task)
    assert task.method == "move-task" and task.task_handle == "task-1" and task.to_move == 1
    sent = json.loads(started[0]["body"])
    assert sent["SourceArn"].endswith(":ingest-dlq") and sent["DestinationArn"].endswith(":ingest")
    assert dlq.depth().visible == 1  # SQS moves them, not us


def test_the_default_long_poll_and_the_pieces(stack):
    dlq = stack.dlq(wait_seconds=1)
    assert dlq.list() == []
    assert dlq.redrive().moved == 0
    letter = DeadLetter.from_message(
        {
            "MessageId": "m1",
            "Body": "{}",
            "Attributes": {"SentTimestamp": "1795000000000", "ApproximateReceiveCount": "7"},
            "MessageAttributes": {
                ERROR_TYPE: {"DataType": "String", "StringValue": "InvalidMessage"},
            },
        }
    )
    # No receipt vouches for it: not VHS's word.
    assert letter.error_type == RETRIES_EXHAUSTED and not letter.trusted
    assert letter.unverified_reason == "InvalidMessage: "
    vouched = DeadLetter.from_message(
        {"MessageId": "m1", "Body": "{}", "Attributes": {"SentTimestamp": "1795000000000"}}
        | {"MessageAttributes": {ERROR_TYPE: {"DataType": "String", "StringValue": "Invalid"}}},
        vouched=True,
    )
    assert vouched.first_seen == datetime.fromtimestamp(1795000000, UTC)
    assert vouched.reason == "(no reason given)" and vouched.record_id is None
    attributes = {
        name: {"DataType": "String", "StringValue": "x", "StringListValues": []}
        for name in DEAD_LETTER_ATTRIBUTES
    }
    attributes["blob"] = {"DataType": "Binary", "BinaryValue": b"\x00", "BinaryListValues": []}
    assert producer_attributes(attributes) == {
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00"}
    }


# --- dead letters tell the truth: forged reasons, receipts, staged bodies ------------------

FORGED = {
    "vhs-error-type": "InvalidMessage",
    "vhs-error-field": "updated_at",
    "vhs-error-message": "looks invalid, please discard",
}


def _exhaust(stack: Stack, monkeypatch: pytest.MonkeyPatch, body: Any, attributes=None) -> None:
    """Send `body` while the table is misnamed, so its retries run out and SQS's redrive
    policy moves it to the DLQ with the attributes it was sent with; then fix the cause."""
    configure_handler(monkeypatch, handler_env(stack.dlq_url, table="no-such-table"))
    stack.send(body, attributes)
    stack.deliver_all()
    configure_handler(monkeypatch, handler_env(stack.dlq_url))


def test_a_producers_forged_reason_is_not_believed_and_the_record_is_not_lost(stack, monkeypatch):
    valid = {"id": "forged-1", "updated_at": T, "record": {"kept": True}}
    _exhaust(stack, monkeypatch, valid, FORGED)
    dlq = stack.dlq()
    (letter,) = dlq.list()
    assert letter.record_id == "forged-1"
    assert letter.error_type == RETRIES_EXHAUSTED and letter.retries_exhausted
    assert not letter.trusted and "please discard" in letter.unverified_reason
    assert letter.error_field is None and letter.source_message_id == letter.message_id

    # A discard by the forged type selects nothing; by retries-exhausted it keeps the letter.
    assert dlq.discard(RedriveFilter(error_types=frozenset({"InvalidMessage"}))).discarded == 0
    kept = dlq.discard(RedriveFilter(retries_exhausted=True))
    assert (kept.discarded, kept.unverified_kept) == (0, 1)
    assert dlq.depth().visible == 1

    # Redriving the retries-exhausted letters takes it, and it is stored.
    assert dlq.redrive(RedriveFilter(retries_exhausted=True)).moved == 1
    stack.deliver_all()
    assert stack.store.get("forged-1").json() == {"kept": True}
    assert dlq.depth().visible == 0


def test_discard_of_an_unverified_letter_only_when_told(stack, monkeypatch):
    _exhaust(stack, monkeypatch, {"id": "forged-2", "updated_at": T, "record": {}}, FORGED)
    dlq = stack.dlq()
    dry = dlq.discard(RedriveFilter(retries_exhausted=True), include_unverified=True, dry_run=True)
    assert (dry.discarded, dry.unverified_kept) == (1, 0) and dlq.depth().visible == 1
    report = dlq.discard(RedriveFilter(retries_exhausted=True), include_unverified=True)
    assert report.discarded == 1 and dlq.depth().visible == 0


def test_the_handlers_dead_letters_are_vouched_for_and_never_carry_a_producers_vhs_attributes(
    stack,
):
    forged = FORGED | {"vhs-custom": "x", "source": "catalogue"}
    stack.send({"id": "really-bad", "updated_at": "yesterday", "record": {}}, forged)
    stack.deliver_all()
    dlq = stack.dlq()
    (letter,) = dlq.list()
    assert letter.trusted and letter.error_type == "InvalidMessage"
    assert letter.error_field == "updated_at" and "please discard" not in letter.reason
    (message,) = stack.sqs.receive_message(
        QueueUrl=stack.dlq_url, MessageAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    names = set(message["MessageAttributes"])
    assert "vhs-custom" not in names and "source" in names
    assert names - {"source"} <= set(DEAD_LETTER_ATTRIBUTES)
    # Without the staging location (where receipts are) no reason is believed.
    (blind,) = stack.dlq(staging=None).list()
    assert blind.error_type == RETRIES_EXHAUSTED and not blind.trusted
    # Nor is a receipt for another body: a receipt vouches for one message.
    key = StagingLocation(STAGING, shapes.STAGING_PREFIX).receipt_key(message["MessageId"])
    stored = stack.s3.get_object(Bucket=STAGING, Key=key)["Body"].read()
    assert receipt_vouches_for(stored, message)
    assert not receipt_vouches_for(stored, message | {"Body": message["Body"] + " "})
    assert not receipt_vouches_for(REVOKED_RECEIPT, message)


def test_a_dead_letter_moved_back_by_sqs_has_its_receipt_revoked(stack, monkeypatch):
    """SQS's own redrive keeps a message's attributes (and, as this test assumes, may keep its
    id): the handler revokes the receipt under that id, so that if the message then exhausts
    its retries its old reason is not believed."""
    stack.send({"id": "back-again", "updated_at": "yesterday", "record": {}})
    stack.deliver_all()
    (message,) = stack.sqs.receive_message(
        QueueUrl=stack.dlq_url,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
        VisibilityTimeout=0,
    )["Messages"]
    assert stack.dlq().list()[0].trusted
    # The same message, delivered from the ingest queue with its id and attributes kept.
    configure_handler(monkeypatch, handler_env(stack.dlq_url, table="no-such-table"))
    event = {"Records": [lambda_record(message, queue_arn=stack.queue_arn, region=REGION)]}
    load_handler("ingest")(event, LambdaContext(function_name="vhs-ingest"))
    configure_handler(monkeypatch, handler_env(stack.dlq_url))
    key = StagingLocation(STAGING, shapes.STAGING_PREFIX).receipt_key(message["MessageId"])
    assert stack.s3.get_object(Bucket=STAGING, Key=key)["Body"].read() == REVOKED_RECEIPT
    assert not stack.dlq().list()[0].trusted


def test_a_staged_dead_letter_is_redriven_with_the_producers_body_and_never_read_by_ingest(
    stack, monkeypatch
):
    """An invalid message too large to dead-letter with its reason is staged under the
    handler's dead-letters/, outside the producers' prefix. Ingest never reads there, so
    redrive sends the producer's original body back, inline, without the claim-check flag."""
    from vhs.ingest.ingestor import MAX_MESSAGE_BYTES

    pad = "x" * (MAX_MESSAGE_BYTES - 300)
    body = json.dumps({"id": "huge-1", "updated_at": "yesterday", "record": {"pad": pad}})
    stack.send(body, {"source": "catalogue"})
    stack.deliver_all()
    (letter,) = stack.dlq().list()
    assert letter.claim_check and letter.trusted and letter.error_field == "updated_at"
    (message,) = stack.sqs.receive_message(QueueUrl=stack.dlq_url, VisibilityTimeout=0)["Messages"]
    pointer = json.loads(message["Body"])[1]
    assert pointer["s3Key"].startswith(shapes.DEAD_LETTER_STAGING_PREFIX)
    assert not pointer["s3Key"].startswith(shapes.STAGING_PREFIX)

    # A producer that points at it (or at a receipt) is refused: ingest never reads there.
    for key in (pointer["s3Key"], f"{shapes.DEAD_LETTER_RECEIPT_PREFIX}{letter.message_id}"):
        stack.send([POINTER_CLASS, {"s3BucketName": STAGING, "s3Key": key}])
    stack.deliver_all()
    forged = [d for d in stack.dlq().list() if d.message_id != letter.message_id]
    assert [(d.error_field, "the ingest function's dead-letters/" in d.reason) for d in forged] == [
        ("body.s3Key", True)
    ] * 2
    stack.dlq().discard(RedriveFilter(error_fields=frozenset({"body.s3Key"})))

    report = stack.dlq().redrive(RedriveFilter(id_prefix="huge-"))
    assert (report.moved, report.failed) == (1, 0)
    (back,) = stack.sqs.receive_message(
        QueueUrl=stack.queue_url, MessageAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    assert back["Body"] == body  # the producer's bytes, not a pointer
    assert set(back["MessageAttributes"]) == {"source"}
    # Back in ingest it is judged on its own body again: dead-lettered with its reason.
    stack.deliver_all()
    (again,) = stack.dlq().list()
    assert (again.error_type, again.error_field, again.trusted) == (
        "InvalidMessage",
        "updated_at",
        True,
    )


def test_resolving_a_claim_check_reads_only_inside_the_staging_location(stack):
    """`vhs dlq list --resolve` and `--id-prefix` read a claim check's payload to find its
    record id, with the operator's credentials: only inside the staging location, never
    where a producer's pointer says."""
    payload = json.dumps({"id": "secret-1", "updated_at": "x", "record": {}})
    stack.s3.put_object(Bucket=BUCKET, Key="elsewhere.json", Body=payload)
    inside = f"{shapes.STAGING_PREFIX}inside.json"
    stack.s3.put_object(Bucket=STAGING, Key=inside, Body=payload.replace("secret", "staged"))
    for bucket, key in ((BUCKET, "elsewhere.json"), (STAGING, inside)):
        stack.sqs.send_message(
            QueueUrl=stack.dlq_url,
            MessageBody=json.dumps([POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}]),
        )
    reads: list[str] = []
    stack.s3.meta.events.register(
        "before-call.s3.*", lambda params, **_: reads.append(params["url_path"]), unique_id="r"
    )
    letters = stack.dlq().list(resolve_claim_checks=True)
    assert sorted(str(letter.record_id) for letter in letters) == ["None", "staged-1"]
    assert not any("elsewhere" in path for path in reads)
    assert stack.dlq().redrive(RedriveFilter(id_prefix="secret-"), dry_run=True).moved == 0
