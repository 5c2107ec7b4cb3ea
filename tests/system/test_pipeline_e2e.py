"""The whole local pipeline, end to end, on moto's server over HTTP.

500 messages go through the producer to the ingest queue: puts of small, S3-sized and
claim-checked bodies, updates in shuffled (so out-of-order) arrival, duplicates, deletes, 5%
poison. The event-source emulator runs the real ingest handler on them, and the handler's
own store clients are made to fail transiently: for a few ids, the first DynamoDB or S3
write attempts come back throttled with botocore's retries exhausted, so the handler reports
batch item failures and SQS redelivers the messages. Then:

* the store matches the model (the write with the highest ordering key wins, per id);
* the DLQ holds exactly the poison messages, each with its reason;
* stored + deleted + stale + unchanged + dead-lettered = sent, counted per message from the
  function's log, and every injected failure was retried to success, never dead-lettered.

The queue's visibility timeout is 3 s, a test-only override of the deployed 360 s (through
LocalStack(visibility_timeout=...)), and the batching window is 0 (it must stay below the
timeout), so a redelivery takes seconds. Waits poll a condition against a deadline.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from vhs import VersionedHybridStore, shapes
from vhs.ingest.deadletter import (
    ERROR_FIELD,
    ERROR_MESSAGE,
    ERROR_TYPE,
    FIRST_SEEN,
    SOURCE_MESSAGE_ID,
)
from vhs_ops.admin.producer import Producer
from vhs_ops.local.alarms import ALARM
from vhs_ops.local.function_logs import read_function_log
from vhs_ops.local.runners import LocalPipeline
from vhs_ops.local.stack import client
from vhs_testing.invariants import check_winners
from vhs_testing.model import Delete, Put, Write
from vhs_testing.stacks import fresh_stack

pytestmark = pytest.mark.slow

SENT = 500
POISON = 25  # 5%
DUPLICATES = 45
IDS = 80
FLAKY_IDS = 12
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
OUTCOMES = {"stored", "deleted", "stale", "unchanged"}


def stamp(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


class Workload:
    """The scripted-at-random messages, and what each must become."""

    def __init__(self, rng: random.Random, staging_bucket: str) -> None:
        self.writes: dict[str, list[Write]] = {}
        self.messages: list[dict[str, Any]] = []  # contract messages, sent by the producer
        self.raw: list[str] = []  # bodies that are not even JSON objects of the contract
        self.poison: list[tuple[Any, str]] = []  # (message or raw body, field named)
        ids = [f"rec-{n:03d}" for n in range(IDS)]
        unique = SENT - POISON - DUPLICATES
        valid: list[dict[str, Any]] = []
        for n in range(unique):
            rid = ids[n % IDS] if n < IDS else rng.choice(ids)
            at = T0 + timedelta(minutes=rng.randrange(0, 600))
            body = None
            if n in (7, 300):  # over the queue's 1 MiB: the producer sends a claim check
                body = rng.randbytes(800 * 1024)
            elif rng.random() < 0.07:
                self.writes.setdefault(rid, []).append(Delete(rid, at))
                valid.append({"id": rid, "updated_at": stamp(at), "deleted": True})
                continue
            elif rng.random() < 0.08:  # incompressible and over the inline threshold: S3
                body = rng.randbytes(12 * 1024)
            if body is not None:
                self.writes.setdefault(rid, []).append(Put(rid, body, at))
                valid.append(
                    {
                        "id": rid,
                        "updated_at": stamp(at),
                        "body_base64": base64.b64encode(body).decode(),
                        "content_type": "application/octet-stream",
                    }
                )
            else:
                record = {"title": f"title {rid} {rng.randrange(4)}", "rev": rng.randrange(3)}
                self.writes.setdefault(rid, []).append(Put(rid, record, at))
                valid.append({"id": rid, "updated_at": stamp(at), "record": record})
        valid += [rng.choice(valid) for _ in range(DUPLICATES)]
        self.messages = valid
        future = stamp(datetime.now(UTC) + timedelta(days=30))
        missing = json.dumps(
            [
                "software.amazon.payloadoffloading.PayloadS3Pointer",
                {
                    "s3BucketName": staging_bucket,
                    "s3Key": f"{shapes.STAGING_PREFIX}claim-checks/{uuid.uuid4()}.json",
                },
            ]
        )
        kinds: list[tuple[Any, str]] = [
            ("{not json", "body"),
            (missing, "body.s3Key"),
            ({"id": "p", "record": {}}, "updated_at"),
            ({"id": "p", "updated_at": stamp(T0), "record": {}, "colour": "red"}, "colour"),
            ({"id": "p", "updated_at": "2026-11-01T09:00:00", "record": {}}, "updated_at"),
            ({"id": "p", "updated_at": stamp(T0), "record": {}, "deleted": True}, "record"),
            ({"id": "", "updated_at": stamp(T0), "record": {}}, "id"),
            ({"id": "p", "updated_at": stamp(T0), "body_base64": "%%%"}, "body_base64"),
            ({"id": "p", "updated_at": future, "record": {}}, "updated_at"),
            (
                {"id": "p", "updated_at": stamp(T0), "record_location": "s3://elsewhere/k"},
                "record_location",
            ),
        ]
        for n in range(POISON):
            message, field = kinds[n % len(kinds)]
            if isinstance(message, dict):
                message = {**message, "id": message["id"] and f"poison-{n}"}
                self.messages.append(message)
            else:
                self.raw.append(message)
            self.poison.append((message, field))
        rng.shuffle(self.messages)  # updates arrive out of order
        assert len(self.messages) + len(self.raw) == SENT


class TransientFaults:
    """Botocore hooks on the handler's own store clients: the first `budget[id]` DynamoDB
    UpdateItem or S3 PutObject calls for an id fail as botocore reports throttling once its
    retries are exhausted. Each message of a flaky id therefore fails at most budget times,
    fewer than maxReceiveCount, so it must end stored (or stale or unchanged), never dead."""

    def __init__(self, budget: dict[str, int]) -> None:
        self.budget = dict(budget)
        self.fired = 0
        self.lock = threading.Lock()

    def install(self, dynamodb: Any, s3: Any) -> None:
        dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", self._mark)
        dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", self._throttle)
        s3.meta.events.register("before-parameter-build.s3.PutObject", self._mark)
        s3.meta.events.register("before-call.s3.PutObject", self._throttle)

    @staticmethod
    def _mark(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        key = params.get("Key")
        # DynamoDB: {"id": {"S": id}}; S3: "{shard}/{id}/{sha256}" (these ids encode as is).
        context["record_id"] = key["id"]["S"] if isinstance(key, dict) else key.split("/")[-2]

    def _throttle(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        rid = context.get("record_id")
        with self.lock:
            if not self.budget.get(rid):
                return None
            self.budget[rid] -= 1
            self.fired += 1
        s3 = model.service_model.service_name == "s3"
        code = "SlowDown" if s3 else "ProvisionedThroughputExceededException"
        status = 503 if s3 else 400
        parsed = {
            "Error": {"Code": code, "Message": "injected throttling"},
            "ResponseMetadata": {
                "HTTPStatusCode": status,
                "MaxAttemptsReached": True,
                "RetryAttempts": 9,
            },
        }
        return AWSResponse("http://injected", status, {}, None), parsed


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        threading.Event().wait(0.05)  # poll interval


def normalise(body: Any) -> str:
    """A message body, compared by meaning (the producer chooses its JSON spacing)."""
    if isinstance(body, dict):
        return json.dumps(body, sort_keys=True)
    try:
        return json.dumps(json.loads(body), sort_keys=True)
    except ValueError:
        return body


def test_500_messages_end_to_end(moto_server: str, tmp_path: Path):
    # visibility_timeout is test-only: redeliveries in seconds, not minutes.
    stack = fresh_stack(moto_server, "e2e", visibility_timeout=3)
    rng = random.Random(20261122)
    workload = Workload(rng, stack.staging_bucket)
    flaky = rng.sample(sorted(workload.writes), FLAKY_IDS)
    faults = TransientFaults({rid: rng.choice([1, 2, 3]) for rid in flaky})
    assert max(faults.budget.values()) < shapes.INGEST.max_receive_count
    injected = sum(faults.budget.values())
    log = tmp_path / "ingest.log"

    sqs = client("sqs", stack.endpoint)
    producer = Producer(
        stack.queue_url,
        sqs_client=sqs,
        s3_client=client("s3", stack.endpoint),
        staging_bucket=stack.staging_bucket,
        staging_prefix=shapes.STAGING_PREFIX,
        validate=False,  # the poison must go out too
    )
    with LocalPipeline(stack, function_log=log, batching_window_seconds=0) as pipeline:
        worker = pipeline.module.ingestor()  # built from the function's environment
        faults.install(worker.store.index.dynamodb, worker.store.bodies.s3)
        # Paced, as a producer feeding a running pipeline: moto's SQS costs grow with the
        # queue's depth (every receive counts all messages), so never let it pile up.
        reports = []
        for start in range(0, len(workload.messages), 50):
            wait_until(lambda: pipeline.source.depth().visible < 50, 60, "the queue to go down")
            reports.append(producer.send(workload.messages[start : start + 50]))
        for start in range(0, len(workload.raw), 10):
            chunk = workload.raw[start : start + 10]
            sqs.send_message_batch(
                QueueUrl=stack.queue_url,
                Entries=[{"Id": str(n), "MessageBody": body} for n, body in enumerate(chunk)],
            )
        assert all(r.ok for r in reports)
        assert sum(r.sent for r in reports) == len(workload.messages)
        assert sum(r.claim_checks for r in reports) >= 2
        pipeline.drain(timeout=90)
        alarm_state = pipeline.alarm.state
        stats = pipeline.source.stats

    # The store matches the model.
    store = VersionedHybridStore(
        stack.table_name,
        stack.bucket_name,
        s3_client=client("s3", stack.endpoint),
        dynamodb_client=client("dynamodb", stack.endpoint),
    )
    check_winners(store, [write for writes in workload.writes.values() for write in writes])

    # The DLQ holds exactly the poison, with the reasons.
    dead: dict[str, dict[str, Any]] = {}
    while batch := sqs.receive_message(
        QueueUrl=stack.dlq_url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=60,
        MessageAttributeNames=["All"],
    ).get("Messages", []):
        dead.update({m["MessageId"]: m for m in batch})
    assert sorted(normalise(m["Body"]) for m in dead.values()) == sorted(
        normalise(body) for body, _ in workload.poison
    )
    fields = {normalise(body): field for body, field in workload.poison}
    for message in dead.values():
        attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
        assert attributes[ERROR_FIELD] == fields[normalise(message["Body"])], attributes
        assert attributes[ERROR_TYPE] in {"InvalidMessage", "MissingStagedObject"}
        # A reason of its own ("-" is what an empty one is sent as), and when it was seen.
        assert len(attributes[ERROR_MESSAGE]) > 5 and attributes[ERROR_MESSAGE] != "-"
        assert datetime.fromisoformat(attributes[FIRST_SEEN]).year >= 2026

    # Every message is accounted for once: stored + deleted + stale + unchanged + dead = sent.
    outcome_of: dict[str, str] = {}
    for line in read_function_log(log):
        if line.get("message") in OUTCOMES:
            outcome_of.setdefault(line["message_id"], line["message"])
    dead_sources = {m["MessageAttributes"][SOURCE_MESSAGE_ID]["StringValue"] for m in dead.values()}
    assert not dead_sources & set(outcome_of), "a message both stored and dead-lettered"
    counts = Counter(outcome_of.values())
    assert (
        counts["stored"] + counts["deleted"] + counts["stale"] + counts["unchanged"] + len(dead)
        == SENT
    ), counts
    assert counts["unchanged"] and counts["stale"]  # duplicates and out-of-order updates

    # Every transient failure was retried by SQS and then succeeded.
    assert faults.fired == injected and not any(faults.budget.values())
    retried = sum(
        int(sum(line["retried"])) if isinstance(line["retried"], list) else int(line["retried"])
        for line in read_function_log(log)
        if "_aws" in line and "retried" in line
    )
    assert retried == injected
    assert stats.redeliveries >= 1
    assert stats.max_receive_count < shapes.INGEST.max_receive_count
    assert alarm_state == ALARM  # poison is in the DLQ
