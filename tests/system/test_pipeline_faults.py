"""Fault injection across the whole pipeline: ingest, garbage collection and the change feed.

Each test runs one episode on a fresh local stack (moto's server over HTTP):

1. **setup**, without faults: the store holds records with S3 bodies and an orphan body that
   a crashed writer left; a producer has put a batch on the ingest queue: a small record, an
   update with an S3 body, a claim-checked update, a delete and one invalid message;
2. **ingest**: the event source receives the batch and invokes the real ingest handler once;
   then, as SQS and Lambda do, whatever it did not finish comes back (its visibility timeout
   is made to pass at once) and is invoked again, in a fresh execution environment after a
   crash, until the queue is empty;
3. **gc**: one collection pass (grace 0) over the shard the bodies live in; then another, as
   the next scheduled run;
4. **changes**: the stream event source invokes the real change-feed handler until the stream
   is drained, retrying from its checkpoint, and again in a fresh environment after a crash.

The AWS calls each stage makes are recorded in a fault-free episode (in-process moto, when
this module is collected): every call of every stage, under every fault kind of
vhs_testing/faults.py (unreachable, response lost, throttled, crash just before or just after
it), is one test. After the faulted stage, after its recovery, and at the end:

* every current and retained pointer resolves to a body with the right hash;
* no version went backwards, and each id's history counts up in time order;
* every sent message is stored (the store holds each id's winning write) or, if invalid, in
  the DLQ with its reason; nothing is left on the queue;
* the collector reclaimed every orphan: each object in the bucket is a retained body;
* the change feed notified every version of every id exactly once, in order per id.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import vhs_testing
from vhs import RecordNotFound, StoreConfig, VersionedHybridStore, keys, shapes
from vhs.codec import BINARY_CONTENT_TYPE as BINARY
from vhs.codec import Body
from vhs.index.codec import condemnation_of, item_from_dynamo
from vhs.ingest import batch as batching
from vhs.ingest.deadletter import DeadLetter
from vhs.ingest.staging import StagingLocation
from vhs.maintenance.gc import GarbageCollector
from vhs.retention import Retention
from vhs.timestamps import parse_timestamp
from vhs_ops import provisioning
from vhs_ops.admin.dlq import DeadLetterQueue
from vhs_ops.admin.producer import Producer
from vhs_ops.local.invoke import load_handler
from vhs_ops.local.process_environment import environment
from vhs_ops.local.runners import LocalChangeFeed
from vhs_ops.local.sqs_event import lambda_record
from vhs_ops.local.sqs_source import Invocation, SqsEventSource, queue_depth
from vhs_ops.local.stack import MotoServer, client
from vhs_testing.faults import FAULT_KINDS, TRANSPARENT, Crash, Fault, FaultInjector
from vhs_testing.invariants import (
    StoreState,
    check_collected,
    check_monotonic,
    check_nothing_went_back,
    check_pointers,
    check_winners,
    snapshot,
)
from vhs_testing.model import Delete, Put, Write, winner
from vhs_testing.notifications import assert_exactly_once_in_order, receive_notifications
from vhs_testing.stacks import fresh_stack

# A crashed invocation records no metric and publishes none, silently (observability.py).
pytestmark = [pytest.mark.slow]

INLINE_THRESHOLD = 64
RETAIN = 1  # `updated`'s first body falls out of retention in the episode: GC must collect it
T0 = datetime(2026, 3, 1, tzinfo=UTC)
STAGES = ("ingest", "gc", "changes")


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def stamp(minute: int) -> str:
    return at(minute).isoformat().replace("+00:00", "Z")


def b64(body: bytes) -> str:
    return base64.b64encode(body).decode()


def blob(seed: int, size: int) -> bytes:
    """Incompressible bytes: a body over the inline threshold goes to S3."""
    return random.Random(seed).randbytes(size)


def in_one_shard(names: tuple[str, ...]) -> dict[str, str]:
    """An id per name, all in the shard of the first, so that the collector's pass is one
    listing page and one BatchGetItem: every fault point is a call that judges a body."""
    shard = keys.shard_of(names[0])
    ids = {names[0]: names[0]}
    for name in names[1:]:
        n = 0
        while keys.shard_of(f"{name}-{n}") != shard:
            n += 1
        ids[name] = f"{name}-{n}"
    return ids


# An id of 200 slashes is cut in its S3 key (keys.encode_id): the collector reads it back from
# the object's metadata, one more kind of call.
ID = in_one_shard(("bystander", "updated", "deleted", "orphaned", "/" * 200))
LONG = ID["/" * 200]
SMALL = "small"
SHARD = keys.shard_of(ID["bystander"])

# Written through the library before the episode.
SETUP: tuple[Put, ...] = (
    Put(ID["bystander"], blob(0, 300), at(1)),
    Put(ID["updated"], blob(1, 300), at(1)),
    Put(ID["deleted"], blob(2, 300), at(1)),
    Put(LONG, blob(6, 300), at(2)),
    Put(LONG, blob(7, 300), at(1)),  # stale, from another writer: it uploads, then loses
)
# The body a writer uploaded before it crashed: nothing references it.
ORPHAN = Put(ID["orphaned"], blob(3, 300), at(1))
# A condemnation an earlier collector run left, long expired: this run clears it.
OLD_MARKER = (ID["bystander"], Put(ID["bystander"], blob(9, 300), at(0)).content_hash)
# The batch: (message, the write it stands for, or None for the invalid one).
CLAIM_CHECKED = blob(5, 4000)  # its message is over the producer's limit below
BATCH: tuple[tuple[dict[str, Any], Write | None], ...] = (
    ({"id": SMALL, "updated_at": stamp(2), "record": {"t": "x"}}, Put(SMALL, {"t": "x"}, at(2))),
    (
        {
            "id": ID["updated"],
            "updated_at": stamp(2),
            "body_base64": b64(blob(4, 300)),
        },
        Put(ID["updated"], blob(4, 300), at(2)),
    ),
    (
        {
            "id": ID["updated"],
            "updated_at": stamp(3),
            "body_base64": b64(CLAIM_CHECKED),
        },
        Put(ID["updated"], CLAIM_CHECKED, at(3)),
    ),
    ({"id": ID["deleted"], "updated_at": stamp(2), "deleted": True}, Delete(ID["deleted"], at(2))),
    ({"id": "poison", "updated_at": stamp(2), "record": {}, "colour": "red"}, None),
)
POISON = next(message for message, write in BATCH if write is None)
WRITES: tuple[Write, ...] = (*SETUP, *(write for _, write in BATCH if write is not None))
IDS = sorted({write.id for write in WRITES} | {ORPHAN.id})
# Messages over this go out as claim checks (the producer's own rule, at a small limit).
PRODUCER_LIMIT = 4096


@dataclass
class StageRun:
    """What one stage did under its fault."""

    calls: list[str]  # the calls it made, in the order they started
    attempts: list[int]  # HTTP attempts per call
    injected: int  # attempts the fault changed
    crashed: bool  # the process "died" (vhs_testing.faults.Crash)
    clean: bool  # it finished all its work at the first try, as if nothing had happened
    sdk_attempts: int  # how many attempts the SDK makes of a call before it gives up


def distinct(*clients: Any) -> list[Any]:
    """The clients, each once (the ingestor's S3 client is also its store's)."""
    return list({id(c): c for c in clients}.values())


@contextlib.contextmanager
def faults(clients: list[Any], fault: Fault | None) -> Iterator[FaultInjector]:
    injector = FaultInjector(clients, fault)
    try:
        yield injector
    finally:
        injector.close()


def stage_run(injector: FaultInjector, **outcome: Any) -> StageRun:
    return StageRun(
        list(injector.calls),
        list(injector.attempts),
        injector.injected,
        sdk_attempts=injector.sdk_attempts,
        **outcome,
    )


class Episode:
    """A fresh local stack, with the change topic and a subscriber queue, and the stages."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.stack = fresh_stack(
            endpoint,
            "pf",
            extra_env={
                "VHS_INLINE_THRESHOLD": str(INLINE_THRESHOLD),
                "VHS_RETAIN_VERSIONS": str(RETAIN),
            },
        )
        suffix = self.stack.table_name.removeprefix("pf-")
        self.table_name = self.stack.table_name  # what vhs_testing.invariants.snapshot reads
        self.bucket_name = self.stack.bucket_name
        self.s3 = client("s3", self.endpoint)
        self.dynamodb = client("dynamodb", self.endpoint)
        self.sqs = client("sqs", self.endpoint)
        sns = client("sns", self.endpoint)
        self.topic_arn = provisioning.create_change_topic(sns, f"pf-{suffix}.fifo")
        self.watch_url = provisioning.subscribe_fifo_queue(
            sns, self.sqs, self.topic_arn, f"pf-w-{suffix}.fifo"
        )
        self.ingest_module: Any = None
        self.feed: LocalChangeFeed | None = None
        self.unfinished: list[dict[str, Any]] = []  # received messages not yet acknowledged

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.feed is not None:
            self.feed.stop()

    def store(self, s3: Any = None, dynamodb: Any = None) -> VersionedHybridStore:
        """A store configured as the function's is (from the stack's extra_env)."""
        return VersionedHybridStore(
            self.table_name,
            self.bucket_name,
            StoreConfig(inline_threshold=INLINE_THRESHOLD, retention=Retention(RETAIN)),
            s3_client=s3 or self.s3,
            dynamodb_client=dynamodb or self.dynamodb,
        )

    def snapshot(self, ids: list[str] = IDS) -> StoreState:
        return snapshot(self, self.store(), ids)

    def run(self, stage: str, fault: Fault | None) -> StageRun:
        return {"ingest": self.ingest, "gc": self.collect, "changes": self.publish}[stage](fault)

    def recover(self, stage: str, run: StageRun) -> None:
        """What AWS does after the stage's attempt, until the stage's work is done."""
        {
            "ingest": lambda: self.recover_ingest(crashed=run.crashed),
            "gc": self.recover_gc,
            "changes": lambda: self.recover_changes(crashed=run.crashed),
        }[stage]()

    # --- setup -----------------------------------------------------------------------------

    def setup(self) -> None:
        store = self.store()
        for write in SETUP:
            # Each by a writer of its own: one that had seen the id's newer version would not
            # upload the stale put's body (store.KnownCurrent), and the collector needs it.
            self.store().put(write.id, write.record, updated_at=write.at)
        # A writer that crashed between its phases left this body and no pointer to it.
        orphan = Body(len(ORPHAN.body), ORPHAN.content_hash, BINARY, data=ORPHAN.body)
        store.bodies.put(store.body_key(ORPHAN.id, ORPHAN.content_hash), orphan, {})
        marked, content_hash = OLD_MARKER
        assert store.index.condemn(marked, [content_hash], time.time() - 3600, seen_version=1)
        producer = Producer(
            self.stack.queue_url,
            sqs_client=self.sqs,
            s3_client=self.s3,
            staging_bucket=self.stack.staging_bucket,
            staging_prefix=shapes.STAGING_PREFIX,
            max_message_bytes=PRODUCER_LIMIT,
            validate=False,  # the invalid message must go out too
        )
        report = producer.send([message for message, _ in BATCH])
        assert report.ok and report.sent == len(BATCH) and report.claim_checks == 1

    # --- ingest ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def function(self, *, fresh: bool) -> Iterator[Any]:
        """The ingest function's environment; `fresh`: a new execution environment (the first
        invocation, or the one after a crash), which builds its clients anew."""
        with environment(self.stack.function_env()):
            if fresh or self.ingest_module is None:
                self.ingest_module = importlib.import_module(load_handler("ingest").__module__)
                self.ingest_module.ingestor.cache_clear()
            saved = batching.CONCURRENCY
            # One message at a time, so that the calls of a batch come in a fixed order and
            # each is a fault point of its own.
            batching.CONCURRENCY = 1
            try:
                yield self.ingest_module
            finally:
                batching.CONCURRENCY = saved

    def receive(self, count: int) -> list[dict[str, Any]]:
        """Up to `count` messages, as the event source's poller receives them."""
        received: list[dict[str, Any]] = []
        while len(received) < count:
            messages = self.sqs.receive_message(
                QueueUrl=self.stack.queue_url,
                MaxNumberOfMessages=min(10, count - len(received)),
                VisibilityTimeout=300,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            received += [
                lambda_record(m, queue_arn=self.stack.queue_arn, region=self.stack.region)
                for m in messages
            ]
        return received

    def invoke(self, module: Any, records: list[dict[str, Any]]) -> Invocation:
        """One invocation, settled as the event source settles it."""
        source = SqsEventSource(
            self.sqs,
            self.stack.queue_url,
            module.handler,
            queue_arn=self.stack.queue_arn,
            batching_window_seconds=0,
        )
        self.unfinished = records  # a crash leaves every message of the batch unacknowledged
        invocation = source.invoke(records)
        self.unfinished = [r for r in records if r["messageId"] in set(invocation.failed)]
        return invocation

    def _time_out_unfinished(self) -> None:
        """The visibility timeout of every unacknowledged message passes, now rather than in
        minutes: SQS offers them again."""
        for record in self.unfinished:
            self.sqs.change_message_visibility(
                QueueUrl=self.stack.queue_url,
                ReceiptHandle=record["receiptHandle"],
                VisibilityTimeout=0,
            )
        self.unfinished = []

    def ingest(self, fault: Fault | None) -> StageRun:
        with self.function(fresh=True) as module:
            records = self.receive(len(BATCH))
            assert len(records) == len(BATCH)
            worker = module.ingestor()
            clients = distinct(worker.store.bodies.s3, worker.store.index.dynamodb, worker.sqs)
            with faults(clients, fault) as injector:
                try:
                    invocation = self.invoke(module, records)
                except Crash:
                    return stage_run(injector, crashed=True, clean=False)
        clean = not invocation.failed and invocation.error is None
        return stage_run(injector, crashed=False, clean=clean)

    def recover_ingest(self, *, crashed: bool) -> None:
        fresh = crashed
        for _ in range(shapes.INGEST.max_receive_count + 1):
            self._time_out_unfinished()
            if queue_depth(self.sqs, self.stack.queue_url).empty:
                return
            with self.function(fresh=fresh) as module:
                records = self.receive(10)
                if records:
                    self.invoke(module, records)
            fresh = False
        raise AssertionError(f"messages left: {queue_depth(self.sqs, self.stack.queue_url)}")

    # --- garbage collection ----------------------------------------------------------------

    def collect(self, fault: Fault | None) -> StageRun:
        s3, dynamodb = client("s3", self.endpoint), client("dynamodb", self.endpoint)
        collector = GarbageCollector(self.store(s3, dynamodb), grace=timedelta(0))
        with faults([s3, dynamodb], fault) as injector:
            try:
                report = collector.run([SHARD])
            except Crash:
                return stage_run(injector, crashed=True, clean=False)
            except Exception:  # the scheduled run fails (its alarm fires); the next one collects
                return stage_run(injector, crashed=False, clean=False)
        clean = report.skipped == 0 and report.deleted == report.orphaned > 0
        return stage_run(injector, crashed=False, clean=clean)

    def recover_gc(self) -> None:
        GarbageCollector(self.store(), grace=timedelta(0)).run([SHARD])  # the next run

    # --- the change feed -------------------------------------------------------------------

    def publish(self, fault: Fault | None) -> StageRun:
        self.feed = LocalChangeFeed(
            self.endpoint, self.table_name, self.topic_arn, self.bucket_name, threaded=False
        ).start()
        sns = self.feed.module.feed().publisher.sns
        with faults([sns], fault) as injector:
            try:
                self.feed.drain(timeout=60)
            except Crash:
                return stage_run(injector, crashed=True, clean=False)
        assert self.feed.source is not None
        stats = self.feed.source.stats
        clean = stats.partial_failures == stats.failed_invocations == 0
        return stage_run(injector, crashed=False, clean=clean)

    def recover_changes(self, *, crashed: bool) -> None:
        assert self.feed is not None
        if crashed:  # Lambda replaces the environment; the checkpoint is the source's
            self.feed.module.feed.cache_clear()
        self.feed.drain(timeout=60)

    def dead_letters(self) -> list[DeadLetter]:
        staging = StagingLocation(self.stack.staging_bucket, shapes.STAGING_PREFIX)
        return DeadLetterQueue(
            self.sqs, self.stack.dlq_url, wait_seconds=0, s3=self.s3, staging=staging
        ).list()

    # --- what must hold at the end ---------------------------------------------------------

    def check_end(self, since: StoreState | None = None) -> dict[str, int]:
        """Every invariant of the whole episode (and that nothing went back `since` an earlier
        state); returns what was counted."""
        reader = self.store()
        state = self.snapshot()
        check_pointers(reader, state)
        check_monotonic(state)
        check_collected(state)
        if since is not None:
            check_nothing_went_back(since, state)

        # The change feed notified every version exactly once, in order per id.
        expected_versions: dict[str, list[int]] = {}
        for id in IDS:
            raw = self.dynamodb.get_item(
                TableName=self.table_name, Key={"id": {"S": id}}, ConsistentRead=True
            ).get("Item", {})
            item = item_from_dynamo(raw)
            if item is not None:
                expected_versions[id] = list(range(1, item.version + 1))
            if id == OLD_MARKER[0]:
                standing = condemnation_of(raw)
                assert standing is None or not standing.covers(OLD_MARKER[1]), (
                    "an expired marker was kept"
                )
        received = receive_notifications(self.sqs, self.watch_url)
        assert_exactly_once_in_order(received, expected_versions)

        # Every sent message was stored (a version of it was notified), or was stale (a later
        # write of its id was stored), or, if invalid, is in the DLQ; none waits on the queue.
        assert queue_depth(self.sqs, self.stack.queue_url).empty
        notified = {(c.id, c.content_hash, c.updated_at) for c in received}
        for write in WRITES:
            stored = (
                write.id,
                None if isinstance(write, Delete) else write.content_hash,
                parse_timestamp(write.at),
            ) in notified
            superseded = write.key < winner(w for w in WRITES if w.id == write.id).key
            assert stored or superseded, f"{write} was neither stored nor stale"
        check_winners(reader, WRITES)
        dead = self.dead_letters()  # as `vhs dlq list` reads them
        assert dead, "the invalid message is not in the DLQ"
        assert {letter.record_id for letter in dead} == {POISON["id"]}, "a valid message died"
        # A receipt lost to a fault (or a crash between the send and the receipt) leaves a
        # letter whose reason is not believed: it reads as retries-exhausted, which is never
        # discarded by mistake, and still claims its reason.
        vouched = [letter for letter in dead if letter.trusted]
        assert {(letter.error_type, letter.error_field) for letter in vouched} <= {
            ("InvalidMessage", "colour")
        }
        for letter in dead:
            assert letter.trusted or letter.unverified_reason.startswith("InvalidMessage")
        # At least once: a lost response or a crash after the send may dead-letter it twice.
        assert len({letter.source_message_id for letter in vouched}) <= 1
        return {
            "dead_letters": len(dead),
            "vouched_dead_letters": len(vouched),
            "notifications": len(received),
        }


def _record_plan() -> dict[str, tuple[str, ...]]:
    """The calls each stage makes without faults, from one episode on a moto server of its
    own (in-process moto does not serve the stream's DescribeStream)."""
    plan: dict[str, tuple[str, ...]] = {}
    with MotoServer() as server, Episode(server.endpoint) as episode:
        episode.setup()
        for stage in STAGES:
            run = episode.run(stage, None)
            assert run.clean, f"{stage} did not finish cleanly without faults"
            episode.recover(stage, run)
            plan[stage] = tuple(run.calls)
        episode.check_end()
    return plan


PLAN = _record_plan()
CASES = [
    pytest.param(stage, index, kind, id=f"{stage}-{call}#{index + 1}-{kind}")
    for stage, calls in PLAN.items()
    for index, call in enumerate(calls)
    for kind in FAULT_KINDS
]


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """This module's own moto server (hundreds of stacks), not the session's."""
    with MotoServer() as server:
        yield server.endpoint


def test_the_plan_reaches_every_kind_of_call() -> None:
    """The enumeration follows the code's calls; these check it has the calls that matter."""
    ingest = PLAN["ingest"]
    assert ingest.count("GetObject") == 1  # the claim check's payload
    assert ingest.count("PutObject") == 3  # two S3 bodies and the dead letter's receipt
    assert ingest.index("PutObject") < ingest.index("UpdateItem", ingest.index("PutObject"))
    assert ingest.count("SendMessage") == 1  # the dead letter
    sent = ingest.index("SendMessage")
    assert ingest.index("PutObject", sent) == sent + 1  # its receipt, once it is sent
    assert ingest.count("UpdateItem") == 5  # four writes and one history trim
    gc = PLAN["gc"]
    # The long id's two objects (its body and the stale put's) name it only in their metadata.
    assert gc[:4] == ("ListObjectsV2", "HeadObject", "HeadObject", "BatchGetItem")
    assert gc.count("DeleteObject") == 3  # the orphan, the stale put's and the expired body
    assert gc.count("UpdateItem") == 3 + 1  # a condemnation before each delete; a clearing
    assert gc[-1] == "Scan" and gc.count("Scan") == 1  # the expired condemnations, once
    assert set(PLAN["changes"]) == {"PublishBatch"} and len(PLAN["changes"]) >= 2


def test_the_server_sees_the_planned_calls(moto_server: str, no_backoff: None) -> None:
    with Episode(moto_server) as episode:
        episode.setup()
        for stage in STAGES:
            run = episode.run(stage, None)
            assert tuple(run.calls) == PLAN[stage], stage
            assert run.clean
            episode.recover(stage, run)
        counted = episode.check_end()
    assert counted["dead_letters"] == counted["vouched_dead_letters"] == 1


@pytest.mark.parametrize(("stage", "index", "kind"), CASES)
def test_fault(moto_server: str, no_backoff: None, stage: str, index: int, kind: str) -> None:
    with Episode(moto_server) as episode:
        episode.setup()
        reader = episode.store()
        for name in STAGES:
            if name != stage:  # fault-free: what it did is checked at the end
                episode.recover(name, episode.run(name, None))
                continue
            before = episode.snapshot()
            run = episode.run(name, Fault(kind, index))
            # The fault hit the call it was aimed at, and did what its kind does.
            assert run.calls[: index + 1] == list(PLAN[name][: index + 1])
            assert run.injected >= 1
            if kind in TRANSPARENT:
                assert run.clean, f"{kind} at {PLAN[name][index]} was not transparent"
                assert run.attempts[index] == 2  # the SDK really did send it again
            elif kind.startswith("crash"):
                assert run.crashed and run.attempts[index] == 1
            else:  # unreachable: the SDK tried as often as it is configured to
                assert run.attempts[index] == run.sdk_attempts
            after = episode.snapshot()
            check_pointers(reader, after)  # reads back every body a reader can reach
            check_monotonic(after)
            check_nothing_went_back(before, after)
            episode.recover(name, run)
            recovered = episode.snapshot()
            check_pointers(reader, recovered)
            check_monotonic(recovered)
            check_nothing_went_back(after, recovered)
        episode.check_end(since=recovered)


KILL_AFTER = Path(vhs_testing.__file__).parent / "kill_after.py"


@pytest.mark.parametrize(
    ("kill_after", "collected"),
    [
        ("s3.PutObject", 1),  # between the phases: a body in S3, no pointer to it
        ("dynamodb.UpdateItem", 0),  # after both: stored, but the message never acknowledged
    ],
)
def test_a_handler_killed_between_its_phases_loses_nothing(
    moto_server: str, tmp_path: Path, kill_after: str, collected: int
) -> None:
    """A real kill (SIGKILL of the process running the handler), then what AWS does next: the
    message comes back when its visibility timeout passes, after a newer version of the same
    record has been stored. The newer version stays current, nothing reaches the DLQ, and
    the body the killed write uploaded is collected if nothing ever pointed at it."""
    rid = "killed"
    first, second = blob(10, 300), blob(11, 300)
    with Episode(moto_server) as episode:
        reader = episode.store()
        key = reader.body_key(rid, Put(rid, first, at(1)).content_hash)
        send = Producer(episode.stack.queue_url, sqs_client=episode.sqs).send
        message = {"id": rid, "updated_at": stamp(1), "body_base64": b64(first)}
        assert send([message]).sent == 1
        killed = episode.receive(1)
        event = tmp_path / "event.json"
        event.write_text(json.dumps({"Records": killed}))
        child = subprocess.run(
            [sys.executable, str(KILL_AFTER), str(event), kill_after],
            env={**os.environ, **episode.stack.function_env()},
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
        assert key in episode.snapshot([rid]).objects
        if kill_after.startswith("s3"):
            with pytest.raises(RecordNotFound):
                reader.get(rid)  # the pointer was never written
        else:
            assert reader.get(rid).body == first

        # A newer version arrives and is stored while the killed message is still invisible.
        assert send([{"id": rid, "updated_at": stamp(2), "body_base64": b64(second)}]).sent == 1
        with episode.function(fresh=True) as module:
            invocation = episode.invoke(module, episode.receive(1))
        assert not invocation.failed
        # The killed message's visibility timeout passes: it is delivered again, and is stale.
        episode.unfinished = killed
        episode.recover_ingest(crashed=True)
        assert reader.get(rid).body == second
        assert episode.dead_letters() == []

        report = GarbageCollector(reader, grace=timedelta(0)).run([keys.shard_of(rid)])
        assert report.deleted == collected
        final = episode.snapshot([rid])
        check_pointers(reader, final)
        check_collected(final)
        assert (key in final.objects) == (collected == 0)
