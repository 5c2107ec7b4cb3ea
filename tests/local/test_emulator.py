"""The local pipeline's SQS event source and DLQ alarm, on moto's server over HTTP.

The event source is exercised with small recording handlers (the subject here is the event
source, not the ingest handler: tests/system/test_pipeline_e2e.py runs the real one through it).
Queues are made with a 2-second visibility timeout (a test-only override of the deployed 360
s, through LocalStack(visibility_timeout=...)) so redeliveries take seconds. Nothing sleeps
to wait: every wait polls a condition against a deadline.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import SQSEvent
from aws_lambda_powertools.utilities.parser.models import SqsModel

from vhs import shapes
from vhs_ops.local.alarms import ALARM, OK, AlarmEvaluator
from vhs_ops.local.sqs_source import SqsEventSource, settle_response
from vhs_ops.local.stack import LocalStack, client
from vhs_testing.stacks import fresh_stack

pytestmark = pytest.mark.slow


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        threading.Event().wait(0.05)  # poll interval, not a wait for an outcome


@pytest.fixture
def make_stack(moto_server: str) -> Callable[..., LocalStack]:
    def make(visibility_timeout: int | None = 2) -> LocalStack:
        return fresh_stack(moto_server, "emu", visibility_timeout=visibility_timeout)

    return make


@pytest.fixture
def stack(make_stack: Callable[..., LocalStack]) -> LocalStack:
    return make_stack()


@pytest.fixture
def sqs(moto_server: str) -> Any:
    return client("sqs", moto_server)


class Recorder:
    """A handler that records each event and answers with `decide(event, call_number)`."""

    def __init__(self, decide: Callable[[dict[str, Any], int], Any] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.remaining: list[int] = []
        self.decide = decide or (lambda event, n: {"batchItemFailures": []})
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self.lock:
            self.events.append(event)
            self.remaining.append(context.get_remaining_time_in_millis())
            number = len(self.events)
        return self.decide(event, number)

    def deliveries(self, body: str) -> list[int]:
        """The ApproximateReceiveCount of each delivery of the message with this body."""
        return [
            int(record["attributes"]["ApproximateReceiveCount"])
            for event in self.events
            for record in event["Records"]
            if record["body"] == body
        ]


@contextlib.contextmanager
def running(source: SqsEventSource) -> Iterator[SqsEventSource]:
    source.start()
    try:
        yield source
    finally:
        source.stop()
        source.check()


def event_source(stack: LocalStack, sqs: Any, handler: Any, **options: Any) -> SqsEventSource:
    options.setdefault("batching_window_seconds", 0)
    return SqsEventSource(sqs, stack.queue_url, handler, queue_arn=stack.queue_arn, **options)


def send(sqs: Any, stack: LocalStack, *bodies: str) -> None:
    for start in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=stack.queue_url,
            Entries=[
                {"Id": str(n), "MessageBody": body}
                for n, body in enumerate(bodies[start : start + 10])
            ],
        )


def dead_letters(sqs: Any, stack: LocalStack) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    while True:
        messages = sqs.receive_message(
            QueueUrl=stack.dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=30,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return list(found.values())
        found.update({m["MessageId"]: m for m in messages})


# --- the stack's resources ---------------------------------------------------------------------


def test_local_stack_has_the_deployed_queues_alarm_and_staging_expiry(stack, sqs):
    queue = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])
    redrive = json.loads(queue["Attributes"]["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == stack.dlq_arn
    assert int(redrive["maxReceiveCount"]) == shapes.INGEST.max_receive_count
    dlq = sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["All"])["Attributes"]
    assert int(dlq["MessageRetentionPeriod"]) == shapes.INGEST.dlq_retention_seconds

    env = stack.env()
    assert env["VHS_QUEUE_URL"] == stack.queue_url
    assert env["VHS_DLQ_URL"] == stack.dlq_url
    assert env["VHS_STAGING_BUCKET"] == stack.staging_bucket != stack.bucket_name
    assert env["VHS_STAGING_PREFIX"] == shapes.STAGING_PREFIX

    s3 = client("s3", stack.endpoint)
    rules = s3.get_bucket_lifecycle_configuration(Bucket=stack.staging_bucket)["Rules"]
    expiry = [r for r in rules if r["ID"] == shapes.STAGING_EXPIRY_RULE_ID]
    assert expiry[0]["Expiration"]["Days"] == shapes.INGEST.staging_expiry_days
    body_rules = s3.get_bucket_lifecycle_configuration(Bucket=stack.bucket_name)["Rules"]
    assert all("Expiration" not in rule for rule in body_rules)  # bodies never expire

    alarm = client("cloudwatch", stack.endpoint).describe_alarms(AlarmNames=[stack.alarm_name])
    (defined,) = alarm["MetricAlarms"]
    shape = shapes.DLQ_ALARM
    assert (defined["Namespace"], defined["MetricName"]) == (shape.namespace, shape.metric_name)
    assert defined["Dimensions"] == [{"Name": "QueueName", "Value": stack.dlq_name}]
    assert defined["Threshold"] == shape.threshold
    assert defined["ComparisonOperator"] == shape.comparison_operator
    assert defined["Period"] == shape.period_seconds
    assert defined["StateValue"] == OK


# --- the event -------------------------------------------------------------------------------


def test_event_has_the_lambda_sqs_event_shape(stack, sqs):
    body = json.dumps({"id": "e1", "updated_at": "2026-11-01T09:00:00Z", "record": {}})
    sent = sqs.send_message(
        QueueUrl=stack.queue_url,
        MessageBody=body,
        MessageAttributes={
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": "1048577"},
            "origin": {"DataType": "String", "StringValue": "catalogue"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
        },
    )
    recorder = Recorder()
    with running(event_source(stack, sqs, recorder)) as source:
        source.run_until_idle(20)

    (event,) = recorder.events
    SqsModel.model_validate(event)  # Powertools' schema of the Lambda SQS event
    (record,) = event["Records"]
    assert set(record) == {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "md5OfMessageAttributes",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert record["messageId"] == sent["MessageId"]
    assert record["body"] == body
    assert record["md5OfBody"] == hashlib.md5(body.encode()).hexdigest() == sent["MD5OfMessageBody"]
    assert record["md5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == stack.queue_arn
    assert record["awsRegion"] == stack.region
    attributes = record["attributes"]
    assert set(attributes) == {
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
    }
    assert attributes["ApproximateReceiveCount"] == "1"
    assert all(isinstance(value, str) for value in attributes.values())
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) >= int(attributes["SentTimestamp"])
    assert record["messageAttributes"] == {
        "ExtendedPayloadSize": {
            "stringValue": "1048577",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
        "origin": {
            "stringValue": "catalogue",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "blob": {
            "binaryValue": base64.b64encode(b"\x00\x01\xff").decode(),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
    }
    parsed = next(iter(SQSEvent(event).records))  # as the handler's Powertools reads it
    assert (
        parsed.message_attributes["blob"].binary_value == base64.b64encode(b"\x00\x01\xff").decode()
    )
    assert 0 < recorder.remaining[0] <= shapes.INGEST.function_timeout_seconds * 1000


def test_batch_size_is_honoured(stack, sqs):
    bodies = [f"m{n}" for n in range(23)]
    send(sqs, stack, *bodies)
    recorder = Recorder()
    with running(event_source(stack, sqs, recorder, batch_size=4)) as source:
        source.run_until_idle(30)
    sizes = [len(event["Records"]) for event in recorder.events]
    assert max(sizes) <= 4
    assert sorted(r["body"] for e in recorder.events for r in e["Records"]) == sorted(bodies)
    assert source.stats.deleted == 23


def test_batching_window_gathers_messages_that_arrive_within_it(make_stack, sqs):
    # The deployed window and visibility timeout (shapes.INGEST): a message that arrives
    # while a batch is gathering joins it, rather than starting an invocation of its own.
    stack = make_stack(visibility_timeout=None)
    recorder = Recorder()
    with running(event_source(stack, sqs, recorder, batching_window_seconds=None)) as source:
        assert source.batching_window == shapes.INGEST.max_batching_window_seconds >= 2
        send(sqs, stack, "first")
        wait_until(lambda: source.depth().in_flight == 1, what="the first message received")
        send(sqs, stack, "second", "third")
        source.run_until_idle(30)
    assert [sorted(r["body"] for r in e["Records"]) for e in recorder.events] == [
        ["first", "second", "third"]
    ]
    assert recorder.deliveries("first") == [1]


def test_a_batching_window_longer_than_the_visibility_timeout_is_refused(stack, sqs):
    with pytest.raises(ValueError, match="visibility timeout"):
        event_source(stack, sqs, Recorder(), batching_window_seconds=2)  # the timeout is 2 s


# --- ReportBatchItemFailures ---------------------------------------------------------------------


def test_batch_item_failures_are_redelivered_with_a_growing_receive_count(stack, sqs):
    def decide(event: dict[str, Any], n: int) -> dict[str, Any]:
        flaky = [
            {"itemIdentifier": r["messageId"]}
            for r in event["Records"]
            if r["body"] == "flaky" and r["attributes"]["ApproximateReceiveCount"] in {"1", "2"}
        ]
        return {"batchItemFailures": flaky}

    send(sqs, stack, "steady-1", "flaky", "steady-2")
    recorder = Recorder(decide)
    with running(event_source(stack, sqs, recorder)) as source:
        source.run_until_idle(30)
    assert recorder.deliveries("flaky") == [1, 2, 3]
    assert recorder.deliveries("steady-1") == [1]  # acknowledged: deleted, never redelivered
    assert recorder.deliveries("steady-2") == [1]
    assert source.stats.item_failures == 2
    assert dead_letters(sqs, stack) == []


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("raise", id="handler-raises"),
        pytest.param({"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]}, id="bad-id"),
    ],
)
def test_a_failed_invocation_fails_the_whole_batch(stack, sqs, answer):
    def decide(event: dict[str, Any], n: int) -> Any:
        if n > 1:
            return {"batchItemFailures": []}
        if answer == "raise":
            raise RuntimeError("the function crashed")
        return answer

    send(sqs, stack, "a", "b", "c")
    recorder = Recorder(decide)
    with running(event_source(stack, sqs, recorder)) as source:
        wait_until(lambda: source.stats.invocations >= 1, what="the first invocation")
        source.run_until_idle(30)
    assert sorted(r["body"] for r in recorder.events[0]["Records"]) == ["a", "b", "c"]
    for body in "abc":
        assert recorder.deliveries(body) == [1, 2]
    assert source.invocations[0].error
    assert source.stats.failed_invocations == 1


def test_settle_response_follows_lambdas_rules():
    ids = ["m1", "m2"]
    for success in (None, {}, "", {"batchItemFailures": []}, {"batchItemFailures": None}):
        assert settle_response(success, ids) == ([], None)
    assert settle_response({"batchItemFailures": [{"itemIdentifier": "m2"}]}, ids) == (
        ["m2"],
        None,
    )
    for malformed in (
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemId": "m1"}]},
        {"batchItemFailures": "m1"},
        "not a dict",
    ):
        failed, error = settle_response(malformed, ids)
        assert failed == ids and error


class ScriptedDepths:
    """An SQS client whose queue reports the given (visible, in flight, delayed) counts, one
    GetQueueAttributes after another: the reads a real queue gives only by chance."""

    def __init__(self, *depths: tuple[int, int, int]) -> None:
        self.depths = list(depths)
        self.reads = 0

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        if "QueueArn" in AttributeNames:
            arn = "arn:aws:sqs:us-east-1:123456789012:q"
            return {"Attributes": {"QueueArn": arn, "VisibilityTimeout": "30"}}
        self.reads += 1
        visible, in_flight, delayed = self.depths.pop(0)
        return {
            "Attributes": {
                "ApproximateNumberOfMessages": str(visible),
                "ApproximateNumberOfMessagesNotVisible": str(in_flight),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
            }
        }


def test_idle_is_two_empty_reads_in_a_row_not_one():
    # The second read is a message caught between in flight and visible (moto reads the
    # visible count first): it must not end the wait while the message is still to be retried.
    sqs = ScriptedDepths((0, 1, 0), (0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 0), (0, 0, 0))
    source = SqsEventSource(sqs, "https://queue", lambda event, context: None, poll_wait_seconds=0)
    source.run_until_idle(10, poll_interval=0)
    assert (sqs.reads, sqs.depths) == (6, [])


def test_after_max_receive_count_the_message_moves_to_the_dlq(stack, sqs):
    def decide(event: dict[str, Any], n: int) -> dict[str, Any]:
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "bad"
            ]
        }

    send(sqs, stack, "bad", "good")
    recorder = Recorder(decide)
    with running(event_source(stack, sqs, recorder)) as source:
        source.run_until_idle(40)
    limit = shapes.INGEST.max_receive_count
    assert recorder.deliveries("bad") == list(range(1, limit + 1))
    assert recorder.deliveries("good") == [1]
    (dead,) = dead_letters(sqs, stack)
    assert dead["Body"] == "bad"


# --- the DLQ alarm -------------------------------------------------------------------------------


def test_alarm_goes_ok_to_alarm_and_back_as_cloudwatch_would(stack, sqs):
    cloudwatch = client("cloudwatch", stack.endpoint)
    seen: list[Any] = []
    alarm = AlarmEvaluator(
        cloudwatch,
        sqs,
        alarm_name=stack.alarm_name,
        queue_url=stack.dlq_url,
        on_transition=seen.append,
    )
    assert alarm.evaluate() == OK and seen == []

    sqs.send_message(QueueUrl=stack.dlq_url, MessageBody="a dead letter")
    assert alarm.evaluate() == ALARM
    assert alarm.cloudwatch_state() == ALARM
    assert [(t.old, t.new, t.value) for t in seen] == [(OK, ALARM, 1)]
    assert alarm.evaluate() == ALARM and len(seen) == 1  # no transition while it stays

    (message,) = sqs.receive_message(QueueUrl=stack.dlq_url)["Messages"]
    sqs.delete_message(QueueUrl=stack.dlq_url, ReceiptHandle=message["ReceiptHandle"])
    assert alarm.evaluate() == OK
    assert alarm.cloudwatch_state() == OK
    assert [(t.old, t.new) for t in seen] == [(OK, ALARM), (ALARM, OK)]


def test_alarm_evaluator_thread_shows_a_dead_letter_as_it_lands(stack, sqs):
    cloudwatch = client("cloudwatch", stack.endpoint)
    seen: list[Any] = []
    with AlarmEvaluator(
        cloudwatch,
        sqs,
        alarm_name=stack.alarm_name,
        queue_url=stack.dlq_url,
        period_seconds=0.2,
        on_transition=seen.append,
    ) as alarm:
        sqs.send_message(QueueUrl=stack.dlq_url, MessageBody="a dead letter")
        wait_until(lambda: alarm.state == ALARM, what="the alarm")
    assert (
        cloudwatch.describe_alarms(AlarmNames=[stack.alarm_name])["MetricAlarms"][0]["StateValue"]
        == ALARM
    )
    assert [(t.old, t.new) for t in seen] == [(OK, ALARM)]
