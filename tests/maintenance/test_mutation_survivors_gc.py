"""The collector's boundaries and counts, on in-process moto (mutation testing found them
unpinned: docs/reliability.md, "Mutation testing"): the grace period's edge, a standing
condemnation too near its deadline to join, the delete fence at half a lease, the counts of
cleared and failed condemnations, resuming inside a shard, and the progress callback."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vhs.item import condemnation_of, condemned_name
from vhs.keys import body_key, shard_of
from vhs.maintenance.gc import DEFAULT_LEASE, GarbageCollector, GcReport
from vhs_testing.backends import Backend

LEASE = DEFAULT_LEASE.total_seconds()


def orphans(backend: Backend, store: Any, rid: str, count: int) -> list[str]:
    """`count` bodies of `rid` that no version references (crashed writers' uploads)."""
    made = []
    for n in range(count):
        body = f"{rid}:{n}".encode()
        key = body_key(store.prefix, rid, hashlib.sha256(body).hexdigest())
        backend.s3.put_object(Bucket=backend.bucket_name, Key=key, Body=body)
        made.append(key)
    return sorted(made)


def keys_in(backend: Backend) -> set[str]:
    listed = backend.s3.list_objects_v2(Bucket=backend.bucket_name)
    return {o["Key"] for o in listed.get("Contents", [])}


def sha_of(key: str) -> str:
    return key.rsplit("/", 1)[1]


def test_the_grace_may_be_zero_but_the_lease_must_be_positive(inprocess: Backend):
    store = inprocess.store()
    for bad in ({"lease": timedelta(0)}, {"lease": -DEFAULT_LEASE}, {"grace": -DEFAULT_LEASE}):
        with pytest.raises(ValueError, match="grace must be >= 0 and lease > 0"):
            GarbageCollector(store, **bad)
    assert GarbageCollector(store, grace=timedelta(0)).grace == 0


def test_an_object_exactly_as_old_as_the_grace_period_is_judged(inprocess: Backend):
    store = inprocess.store()
    rid = "edge"
    (key,) = orphans(inprocess, store, rid, 1)
    (listed,) = inprocess.s3.list_objects_v2(Bucket=inprocess.bucket_name)["Contents"]
    modified = listed["LastModified"].timestamp()
    grace = timedelta(hours=1)
    now = modified + grace.total_seconds()
    assert now - grace.total_seconds() == modified  # the edge itself, not a rounding of it
    report = GarbageCollector(store, grace=grace, clock=lambda: now).run([shard_of(rid)])
    assert (report.young, report.orphaned, report.deleted) == (0, 1, 1)
    assert key not in keys_in(inprocess)


def test_a_condemnation_too_near_its_deadline_takes_no_more_bodies(inprocess: Backend):
    """Its bodies wait for a later run, and so do orphans it does not name yet: nothing joins
    a condemnation that has less than half a lease left."""
    store = inprocess.store()
    rid = "near"
    named, unnamed = orphans(inprocess, store, rid, 2)
    now = time.time() + 7200  # both past the grace period
    assert store.index.condemn(rid, [sha_of(named)], now + LEASE / 2 - 1, seen_version=None)
    report = GarbageCollector(store, clock=lambda: now).run([shard_of(rid)])
    assert (report.orphaned, report.deleted, report.skipped) == (2, 0, 2)
    assert {named, unnamed} <= keys_in(inprocess)
    standing = condemnation_of(store.index.read_raw_many([rid])[rid])
    assert standing.bodies == {condemned_name(sha_of(named))}


@pytest.mark.parametrize(("delay", "sent"), [(0.4, True), (0.6, False)])
def test_a_delete_is_sent_only_while_half_the_lease_is_left(
    inprocess: Backend, delay: float, sent: bool
):
    """The clock moves on between the condemnation and the delete (a slow collector): by
    `delay` leases, so the delete's send time is before or after half a lease to go."""
    store = inprocess.store()
    rid = "fence"
    (key,) = orphans(inprocess, store, rid, 1)
    clock = [time.time() + 7200]

    def slow(**_: Any) -> None:
        clock[0] += delay * LEASE

    events = inprocess.s3.meta.events
    events.register("before-parameter-build.s3.DeleteObject", slow)
    try:
        report = GarbageCollector(store, clock=lambda: clock[0]).run([shard_of(rid)])
    finally:
        events.unregister("before-parameter-build.s3.DeleteObject", slow)
    assert (report.deleted, report.skipped) == ((1, 0) if sent else (0, 1))
    assert (key in keys_in(inprocess)) is not sent


def condemned_ids(backend: Backend, store: Any, count: int, now: float) -> list[str]:
    """Ids with an inline version and a condemnation with deadline `now`, and no object."""
    rids = [f"cleared-{n}" for n in range(count)]
    for rid in rids:
        store.put(rid, {"n": 1}, updated_at="2026-11-01T00:00:00Z")
        assert store.index.condemn(rid, ["ab" * 32], now, store.index.read(rid).version)
    return rids


def test_every_expired_condemnation_cleared_is_counted(inprocess: Backend):
    store = inprocess.store()
    now = time.time()
    rids = condemned_ids(inprocess, store, 3, now)
    expired = now + 3600
    report = GarbageCollector(store, clock=lambda: expired).run(sorted(map(shard_of, rids)))
    assert (report.markers_cleared, report.failed) == (3, 0)
    for rid in rids:
        assert condemnation_of(store.index.read_raw_many([rid])[rid]) is None


def test_a_condemnation_that_cannot_be_cleared_is_one_failure(
    inprocess: Backend, caplog: pytest.LogCaptureFixture
):
    store = inprocess.store()
    now = time.time()
    rids = condemned_ids(inprocess, store, 3, now)

    def throttle_one(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["id"]["S"] == rids[1]:
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "hot"}
            raise ClientError({"Error": error}, "UpdateItem")

    events = store.index.dynamodb.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", throttle_one)
    try:
        collector = GarbageCollector(store, clock=lambda: now + 3600)
        report = collector.run(sorted(map(shard_of, rids)))
    finally:
        events.unregister("before-parameter-build.dynamodb.UpdateItem", throttle_one)
    assert (report.markers_cleared, report.failed, report.ok) == (2, 1, False)
    assert condemnation_of(store.index.read_raw_many([rids[1]])[rids[1]]) is not None
    assert f"could not clear the condemnation of {rids[1]!r}: " in caplog.text
    assert "ProvisionedThroughputExceededException" in caplog.text


def test_a_failed_read_of_the_condemned_items_is_one_failure_logged_with_its_error(
    inprocess: Backend, caplog: pytest.LogCaptureFixture
):
    store = inprocess.store()
    now = time.time()
    rids = condemned_ids(inprocess, store, 1, now)

    def unavailable(**_: Any) -> None:
        error = {"Code": "InternalServerError", "Message": "the index is unwell"}
        raise ClientError({"Error": error}, "Scan")

    events = store.index.dynamodb.meta.events
    events.register("before-parameter-build.dynamodb.Scan", unavailable)
    try:
        report = GarbageCollector(store, clock=lambda: now + 3600).run([shard_of(rids[0])])
    finally:
        events.unregister("before-parameter-build.dynamodb.Scan", unavailable)
    assert (report.markers_cleared, report.failed) == (0, 1)
    assert "could not read the condemned items: " in caplog.text
    assert "the index is unwell" in caplog.text


def test_a_stopped_collection_resumes_after_its_last_key_and_reports_each_shard(
    inprocess: Backend,
):
    """A dry run deletes nothing, so a resumed listing that started over would see every
    object again."""
    store = inprocess.store()
    rid = "paged"
    made = orphans(inprocess, store, rid, 25)
    shard = shard_of(rid)
    collector = GarbageCollector(store, grace=timedelta(0), dry_run=True, page_size=10)
    seen: list[tuple[str, int]] = []

    def progress(name: str, report: GcReport) -> None:
        seen.append((name, report.listed))

    first, remaining, after = collector.run_until(
        [shard], should_stop=lambda: True, progress=progress
    )
    assert (first.listed, remaining, after) == (10, [shard], made[9])
    rest, remaining, after = collector.run_until(
        remaining, start_after=after, should_stop=lambda: False, progress=progress
    )
    assert (rest.listed, rest.orphaned, remaining, after) == (15, 15, [], None)
    assert seen == [(shard, 10), (shard, 15)]
    assert set(made) <= keys_in(inprocess)


def test_collect_shard_returns_the_shards_report(inprocess: Backend):
    store = inprocess.store()
    orphans(inprocess, store, "one", 3)
    report = GarbageCollector(store, grace=timedelta(0), dry_run=True).collect_shard(
        shard_of("one")
    )
    assert isinstance(report, GcReport)
    assert (report.shards, report.listed, report.orphaned) == (1, 3, 3)


def test_a_body_already_condemned_is_deleted_without_condemning_it_again(inprocess: Backend):
    """An earlier run condemned it and stopped before deleting (time ran out, say): this run
    deletes it under the standing condemnation, with no write to the item."""
    store = inprocess.store()
    rid = "standing"
    (key,) = orphans(inprocess, store, rid, 1)
    now = time.time() + 7200
    assert store.index.condemn(rid, [sha_of(key)], now + LEASE, seen_version=None)
    writes: list[str] = []
    events = store.index.dynamodb.meta.events
    counted = "before-parameter-build.dynamodb.UpdateItem"

    def count(params: dict[str, Any], **_: Any) -> None:
        writes.append(params["Key"]["id"]["S"])

    events.register(counted, count)
    try:
        report = GarbageCollector(store, clock=lambda: now).run([shard_of(rid)])
    finally:
        events.unregister(counted, count)
    assert (report.orphaned, report.deleted, writes) == (1, 1, [])
    assert key not in keys_in(inprocess)
    assert condemnation_of(store.index.read_raw_many([rid])[rid]).deadline == now + LEASE
