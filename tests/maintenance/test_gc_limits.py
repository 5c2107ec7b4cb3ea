"""What nothing one id holds may do to the collector, and what the collector's timing may not do
to anyone (docs/gc.md): a hot id with thousands of orphans, failures isolated per id and per
shard, deletes fenced at send time, readers that race a collection, writers with a deadline,
and a collection that stops inside a shard and resumes there."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from test_gc import later, objects, s3_store

from vhs import Retention
from vhs.errors import WriteConflict
from vhs.index.codec import CONDEMNATION_BYTES, MAX_CONDEMNED, condemnation_of
from vhs.index.size import item_size
from vhs.keys import body_key, shard_of
from vhs.maintenance.gc import DEFAULT_LEASE, GarbageCollector
from vhs_testing.condemnation import SKEW, FakeTime, make_store
from vhs_testing.records import at, large

LEASE = DEFAULT_LEASE.total_seconds()


def raw_item(backend, rid: str) -> dict:
    return backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    ).get("Item", {})


def item_bytes(raw: dict) -> int:
    """Roughly what DynamoDB counts: names and values (enough to tell 17 KB from 400 KB)."""
    return len(json.dumps(raw, default=lambda b: "x" * len(b)).encode())


def orphans_of(backend, store, rid: str, count: int, first: int = 0) -> list[str]:
    """`count` bodies of `rid` that no version references (each a crashed writer's upload)."""
    made = []
    for n in range(first, first + count):
        body = f"{rid}:{n}".encode()
        key = body_key(store.prefix, rid, hashlib.sha256(body).hexdigest())
        backend.s3.put_object(Bucket=backend.bucket_name, Key=key, Body=body)
        made.append(key)
    return made


# --- a hot id ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_hot_id_with_thousands_of_orphans_stays_writable_and_is_collected_in_one_run(backend):
    """Every condemned body used to add its own attribute to the item: 5,600 orphans of one
    id took it past DynamoDB's 400 KB, after which every condemnation and every put to that
    id failed for good. A condemnation names at most MAX_CONDEMNED bodies more at a time, in
    one set; then one run stopped at MAX_CONDEMNED and reported the rest as skipped (issue
    25): it now goes on condemning the id, MAX_CONDEMNED at a time, while it has orphans."""
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("hot")
    store.put(rid, large(1), updated_at=at(0))
    made = orphans_of(backend, store, rid, MAX_CONDEMNED + 500)
    collector = GarbageCollector(store, clock=later(2))

    first = collector.run([shard_of(rid)])
    assert first.ok and first.failed == 0
    assert (first.orphaned, first.deleted, first.skipped) == (len(made), len(made), 0)
    assert first.deferred == 0
    raw = raw_item(backend, rid)
    assert len(condemnation_of(raw).bodies) == len(made)
    assert item_size(raw) <= CONDEMNATION_BYTES + 1024, "a condemnation must stay bounded"
    # The id stays writable while it is condemned.
    assert store.put(rid, large(2), updated_at=at(1)).outcome == "stored"

    # Once the condemnation has expired, the next run clears it first, then collects the rest.
    expired = later(2 + (LEASE + collector.marker_expiry + 60) / 3600)
    second = GarbageCollector(store, clock=expired).run([shard_of(rid)])
    assert second.markers_cleared == 1
    assert second.deleted == 1  # the superseded version's body
    assert set(objects(backend)) == {store.body_key(rid, store.get(rid).content_hash)}


def test_a_condemnation_too_near_its_deadline_is_renewed_and_the_run_goes_on(backend):
    """Deletes take time: once a standing condemnation is too near its deadline to delete
    under, the run used to leave the id's further orphans as skipped (neither had its item
    changed nor had the run's time run short). It renews the condemnation with a later
    deadline and goes on; every name in it answers to the new deadline."""
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("renewed")
    made = orphans_of(backend, store, rid, 12)
    collector = GarbageCollector(store, grace=timedelta(0), clock=fake.clock, page_size=3)
    first_deadline = fake.now + LEASE

    def a_delete_takes_time(**_):
        fake.now += LEASE / 12

    collector.s3.meta.events.register("after-call.s3.DeleteObject", a_delete_takes_time)
    try:
        report = collector.run([shard_of(rid)])
    finally:
        collector.s3.meta.events.unregister("after-call.s3.DeleteObject", a_delete_takes_time)
    assert (report.deleted, report.skipped) == (len(made), 0)
    assert report.deferred == 0
    assert not set(objects(backend)) & set(made)
    standing = condemnation_of(raw_item(backend, rid))
    assert standing.deadline > first_deadline and len(standing.bodies) == len(made)


def test_orphans_join_a_standing_condemnation_under_its_own_deadline(backend):
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("joining")
    first = orphans_of(backend, store, rid, 2)
    collector = GarbageCollector(store, grace=timedelta(0), clock=fake.clock)
    assert collector.run([shard_of(rid)]).deleted == 2
    deadline = condemnation_of(raw_item(backend, rid)).deadline
    fake.now += LEASE / 4  # still well inside the lease
    later_orphans = orphans_of(backend, store, rid, 3, first=2)
    report = collector.run([shard_of(rid)])
    assert report.deleted == 3 and not set(objects(backend)) & {*first, *later_orphans}
    standing = condemnation_of(raw_item(backend, rid))
    assert standing.deadline == deadline and len(standing.bodies) == 5


# --- failures stay where they are ------------------------------------------------------------


def test_one_ids_failure_does_not_stop_the_others(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    ids = [backend.id(f"isolated-{n}") for n in range(4)]
    for rid in ids:
        store.put(rid, large(ord(rid[-1])), updated_at=at(0))
        store.put(rid, large(ord(rid[-1]) + 50), updated_at=at(1))
    collector = GarbageCollector(store, clock=later(2))
    condemn = collector.index.condemn

    def throttled_for_one(record_id, *args, **kwargs):
        if record_id == ids[1]:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "hot"}},
                "UpdateItem",
            )
        return condemn(record_id, *args, **kwargs)

    collector.index.condemn = throttled_for_one
    report = collector.run()
    assert (report.deleted, report.failed, report.ok) == (3, 1, False)
    for rid in ids:
        assert store.get(rid).body == large(ord(rid[-1]) + 50)


def test_a_shard_that_cannot_be_listed_is_reported_and_the_rest_collected(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    ids = [backend.id(f"shardfail-{n}") for n in range(6)]
    for n, rid in enumerate(ids):
        store.put(rid, large(n + 100), updated_at=at(0))
        store.put(rid, large(n + 200), updated_at=at(1))
    broken = shard_of(ids[0])
    collector = GarbageCollector(store, clock=later(2))
    paginate = collector.s3.get_paginator

    class Failing:
        def __init__(self, inner):
            self.inner = inner

        def paginate(self, **kwargs):
            if kwargs["Prefix"].rstrip("/").endswith(broken):
                raise ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "List")
            return self.inner.paginate(**kwargs)

    collector.s3.get_paginator = lambda name: Failing(paginate(name))
    try:
        report = collector.run(sorted({shard_of(rid) for rid in ids}))
    finally:
        del collector.s3.get_paginator
    assert report.failed_shards == [broken] and not report.ok
    expected = sum(1 for rid in ids if shard_of(rid) != broken)
    assert report.deleted == expected


# --- deadlines are enforced ------------------------------------------------------------------


def test_a_retried_delete_past_its_fence_is_not_sent_and_the_rewritten_body_survives(
    backend, no_backoff
):
    """The collector's delete fails once (a dropped connection) and botocore would retry it
    after the deadline: by then a writer has waited the condemnation out, uploaded the same
    body again and made it current. The retry must not be sent."""
    fake = FakeTime()
    store = make_store(backend, fake)
    writer = backend.store(clock=fake.clock, clock_skew=timedelta(seconds=SKEW))
    writer.writer.sleep = fake.sleep
    rid = backend.id("fenced")
    body = large(31)
    key = orphans_of_body(backend, store, rid, body)
    collector = GarbageCollector(store, grace=timedelta(0), clock=fake.clock)
    attempts = []

    def slow_network(**_):
        attempts.append(fake.now)
        if len(attempts) == 1:
            # The request stalls past the deadline; meanwhile the writer commits.
            deadline = condemnation_of(raw_item(backend, rid)).deadline
            fake.now = deadline + SKEW + 1
            assert writer.put(rid, body, updated_at=at(1)).outcome == "stored"
            raise EndpointConnectionError(endpoint_url="https://s3.example")

    store.bodies.s3.meta.events.register_first("before-send.s3.DeleteObject", slow_network)
    try:
        report = collector.run([shard_of(rid)])
    finally:
        store.bodies.s3.meta.events.unregister("before-send.s3.DeleteObject", slow_network)
    assert len(attempts) == 1, "the retry was sent after the fence"
    assert (report.deleted, report.skipped) == (0, 1)
    assert key in objects(backend)
    assert store.get(rid).body == body


def orphans_of_body(backend, store, rid: str, body: bytes) -> str:
    key = body_key(store.prefix, rid, hashlib.sha256(body).hexdigest())
    backend.s3.put_object(Bucket=backend.bucket_name, Key=key, Body=body)
    return key


def test_a_writer_never_waits_past_its_budget(backend):
    """Inside Lambda a condemned body's wait is bounded by the invocation's remaining time:
    past it the write fails (and SQS delivers it again) rather than sleep through the
    function's timeout."""
    fake = FakeTime()
    store = make_store(backend, fake)
    store.writer.wait_budget = lambda: 30.0
    rid = backend.id("budget")
    body = large(32)
    store.put(rid, large(33), updated_at=at(0))
    assert store.index.condemn(rid, [hashlib.sha256(body).hexdigest()], fake.now + LEASE, 1)
    with pytest.raises(WriteConflict, match="retry later"):
        store.put(rid, body, updated_at=at(1))
    assert fake.slept == []
    store.writer.wait_budget = lambda: LEASE + SKEW + 10
    assert store.put(rid, body, updated_at=at(1)).outcome == "stored"
    assert fake.slept == [LEASE + SKEW + 1]


# --- readers -------------------------------------------------------------------------------


def test_a_reader_racing_a_collection_gets_the_newer_version_not_a_dangling_pointer(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("racing-reader")
    store.put(rid, large(41), updated_at=at(0))
    writer = s3_store(backend, retention=Retention(versions=0))
    writer_gc = GarbageCollector(writer, clock=later(2))
    raced = []

    def supersede_and_collect(**_):
        # After the reader's GetItem, before its GetObject: a newer version, and a collection
        # of the one the reader is about to fetch.
        if not raced:
            raced.append(True)
            writer.put(rid, large(42), updated_at=at(1))
            assert writer_gc.run([shard_of(rid)]).deleted == 1

    store.index.dynamodb.meta.events.register("after-call.dynamodb.GetItem", supersede_and_collect)
    try:
        assert store.get(rid).body == large(42)
    finally:
        store.index.dynamodb.meta.events.unregister(
            "after-call.dynamodb.GetItem", supersede_and_collect
        )
    assert raced


# --- stopping inside a shard -----------------------------------------------------------------


def test_a_collection_stopped_inside_a_shard_resumes_after_the_last_key(backend):
    store = s3_store(backend)
    rid = backend.id("paged")
    made = sorted(orphans_of(backend, store, rid, 25))
    collector = GarbageCollector(store, clock=later(2), page_size=10)
    report, remaining, resume_after = collector.run_until([shard_of(rid)], should_stop=lambda: True)
    assert (report.listed, remaining, resume_after) == (10, [shard_of(rid)], made[9])
    rest, remaining, resume_after = collector.run_until(
        remaining, start_after=resume_after, should_stop=lambda: False
    )
    assert (rest.listed, rest.shards, remaining, resume_after) == (15, 1, [], None)
    assert report.deleted + rest.deleted == 25 and not objects(backend)
