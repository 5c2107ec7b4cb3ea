"""The garbage collector: what it deletes, what it keeps, and that concurrent writers never
lose a body to it."""

from __future__ import annotations

import functools
import hashlib
import random
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vhs import Retention, StoreConfig, VersionedHybridStore
from vhs.errors import WriteConflict
from vhs.index.codec import condemnation_of, condemned_name
from vhs.keys import (
    MAX_ID_LENGTH,
    all_shards,
    body_key,
    body_metadata,
    encode_id,
    shard_of,
    shard_prefix,
)
from vhs.maintenance.gc import DEFAULT_LEASE, GarbageCollector, parse_duration
from vhs.maintenance.report import GcReport
from vhs_ops import provisioning
from vhs_testing.backends import Backend
from vhs_testing.condemnation import SkippingClock
from vhs_testing.records import at, large


def later(hours: float):
    """A collector's clock this far ahead: everything uploaded so far is past the grace."""
    return lambda: time.time() + hours * 3600


def s3_store(backend, **options):
    """A store that keeps every body in S3, so that there is something to collect."""
    return backend.store(inline_threshold=256, **options)


def objects(backend) -> dict[str, int]:
    paginator = backend.s3.get_paginator("list_objects_v2")
    found = {}
    for page in paginator.paginate(Bucket=backend.bucket_name):
        for listed in page.get("Contents", []):
            found[listed["Key"]] = listed["Size"]
    return found


def referenced_keys(store, ids) -> set[str]:
    keys_ = set()
    for rid in ids:
        try:
            history = store.history(rid)
        except LookupError:
            continue
        for version in history:
            if version.location and version.location.startswith("s3://"):
                keys_.add(version.location.split("/", 3)[3])
    return keys_


def crash_between_phases(store, rid: str, body: bytes) -> str:
    """Upload a body and never write the index: what a writer that died leaves behind."""
    from vhs.codec import encode_record

    encoded = encode_record(body, None, max_size=store.max_body_size)
    key = store.body_key(rid, encoded.sha256)
    store.bodies.put(key, encoded, {})
    return key


def test_collects_orphans_and_keeps_referenced_and_young_bodies(backend):
    store = s3_store(backend, retention=Retention(versions=1))
    ids = [backend.id(f"gc-{n}") for n in range(3)]
    for n, rid in enumerate(ids):
        for version in range(3):  # version 1 falls out of retention
            store.put(rid, large(n * 10 + version, 3000), updated_at=at(version))
    crashed = crash_between_phases(store, backend.id("crashed"), large(99, 3000))
    deleted_id = backend.id("deleted")
    store.put(deleted_id, large(98, 3000), updated_at=at(0))
    store.delete(deleted_id, deleted_at=at(1))  # still retained: history keeps version 1

    before = objects(backend)
    keep = referenced_keys(store, [*ids, deleted_id])
    report = GarbageCollector(store, clock=later(2)).run()

    after = objects(backend)
    assert set(after) == keep
    assert crashed in before and crashed not in after
    assert report.deleted == len(before) - len(keep) == 4
    assert report.referenced == len(keep) and report.orphaned == 4
    assert report.bytes_reclaimed == 4 * 3000
    assert report.shards == 256 and report.listed == len(before)
    for rid in ids:
        for version in store.history(rid):
            store.get(rid, version=version.version)  # every retained pointer resolves


def test_young_objects_are_never_judged(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("young")
    store.put(rid, large(1), updated_at=at(0))
    store.put(rid, large(2), updated_at=at(1))  # the first body is unreferenced but new
    report = GarbageCollector(store, grace=timedelta(hours=1)).run()
    assert report.young == 2 and report.deleted == 0
    assert len(objects(backend)) == 2


def test_dry_run_reports_and_deletes_nothing(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("dry")
    store.put(rid, large(3, 5000), updated_at=at(0))
    store.put(rid, large(4, 5000), updated_at=at(1))
    before = objects(backend)
    report = GarbageCollector(store, clock=later(2), dry_run=True).run()
    assert (report.orphaned, report.deleted, report.bytes_reclaimed) == (1, 0, 5000)
    assert objects(backend) == before
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert not [name for name in raw if name.startswith("gc:")]


def test_versions_beyond_retention_are_collected_by_age_too(backend):
    clock = [time.time()]
    store = s3_store(
        backend, retention=Retention(versions=10, age=timedelta(days=1)), clock=lambda: clock[0]
    )
    rid = backend.id("aged")
    store.put(rid, large(5), updated_at=at(0))
    store.put(rid, large(6), updated_at=at(1))
    assert GarbageCollector(store, clock=later(2)).run().deleted == 0  # both retained
    report = GarbageCollector(store, clock=later(49)).run()  # a day after being superseded
    assert report.deleted == 1
    assert store.get(rid).body == large(6)


def test_a_reader_whose_clock_is_behind_keeps_the_bodies_it_may_still_read(backend):
    """Retention by age depends on clocks: a version that has just expired by the collector's
    clock is still retained by a reader whose clock is behind it, within the skew allowance,
    so its body stays until the allowance has passed too."""
    start = float(int(time.time()))
    retention = Retention(versions=10, age=timedelta(hours=1))
    store = s3_store(backend, retention=retention, clock=lambda: start)
    rid = backend.id("skewed")
    store.put(rid, large(5), updated_at=at(0))
    store.put(rid, large(6), updated_at=at(1))  # version 1 superseded at `start`
    expired = start + 3600 + store.clock_skew / 2  # by the collector's clock
    assert GarbageCollector(store, clock=lambda: expired).run().deleted == 0
    reader = s3_store(backend, retention=retention, clock=lambda: expired - store.clock_skew)
    assert reader.get(rid, 1).body == large(5)
    past_the_allowance = expired + store.clock_skew
    assert GarbageCollector(store, clock=lambda: past_the_allowance).run().deleted == 1


def test_a_condemnation_past_its_delete_window_is_left_to_expire(backend):
    """A body an earlier pass condemned but did not delete in time is neither deleted late nor
    condemned afresh (a writer may be waiting that deadline out: docs/gc.md); once the marker
    has expired, a later run judges and collects it."""
    store = s3_store(backend)
    rid = backend.id("late")
    key = crash_between_phases(store, rid, large(20))
    sha = key.rsplit("/", 1)[1]
    now = time.time() + 7200  # past the grace period
    assert store.index.condemn(rid, [sha], now + 1, seen_version=None)  # under half a lease left
    collector = GarbageCollector(store, clock=lambda: now)
    report = collector.run([shard_of(rid)])
    assert (report.orphaned, report.deleted, report.skipped) == (1, 0, 1)
    assert key in objects(backend)
    raw = store.index.read_raw_many([rid])[rid]
    standing = condemnation_of(raw)  # the same deadline: not condemned again
    assert (standing.deadline, standing.covers(sha)) == (now + 1, True)
    expired = now + 1 + collector.marker_expiry + 1
    assert GarbageCollector(store, clock=lambda: expired).run([shard_of(rid)]).deleted == 1
    assert key not in objects(backend)


def test_long_ids_are_found_through_object_metadata(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("🙂" * (MAX_ID_LENGTH - 20))[:MAX_ID_LENGTH]
    store.put(rid, large(7), updated_at=at(0))
    store.put(rid, large(8), updated_at=at(1))
    report = GarbageCollector(store, clock=later(2)).run()
    assert report.deleted == 1 and report.unrecognised == 0
    assert store.get(rid).body == large(8)


def test_a_cut_key_body_that_vanishes_before_its_head_is_gone_not_a_failure(backend):
    """The collector reads a cut id from the object's metadata (HeadObject). On AWS a HEAD of
    a key deleted since the listing answers 403, not 404, because the collector's role may
    list only under the body prefix: a listing of the key tells gone from denied."""
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("gone") + CUT_ID
    store.put(rid, large(20), updated_at=at(0))
    store.put(rid, large(21), updated_at=at(1))
    (orphan,) = set(objects(backend)) - referenced_keys(store, [rid])
    vanish = {"on": True}

    def forbidden(params: dict, **_: object) -> None:
        if not params["url_path"].endswith(orphan.rsplit("/", 1)[1]):
            return  # the current body: read as usual
        if vanish["on"]:
            backend.s3.delete_object(Bucket=backend.bucket_name, Key=orphan)
        raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject")

    backend.s3.meta.events.register("before-call.s3.HeadObject", forbidden, unique_id="t-403")
    try:
        report = GarbageCollector(store, clock=later(2)).run([shard_of(rid)])
        assert (report.failed_shards, report.failed, report.deleted) == ([], 0, 0)
        assert report.ok
        assert orphan not in objects(backend)
        # A 403 on a key that is still there is a denial: the shard fails, the body is kept.
        store.put(rid, large(22), updated_at=at(2))
        (orphan,) = set(objects(backend)) - referenced_keys(store, [rid])
        vanish["on"] = False
        report = GarbageCollector(store, clock=later(2)).run([shard_of(rid)])
        assert (report.failed_shards, report.deleted) == ([shard_of(rid)], 0)
    finally:
        backend.s3.meta.events.unregister("before-call.s3.HeadObject", unique_id="t-403")
    assert store.get(rid).body == large(22)
    assert GarbageCollector(store, clock=later(2)).run([shard_of(rid)]).deleted == 1


def test_a_changed_item_is_not_condemned(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("changed")
    store.put(rid, large(9), updated_at=at(0))
    store.put(rid, large(10), updated_at=at(1))
    collector = GarbageCollector(store, clock=later(2))
    # The writer re-points at the orphan between the collector's read and its condemnation.
    original = collector.index.condemn

    def writer_gets_there_first(*args, **kwargs):
        store.put(rid, large(9), updated_at=at(2))
        return original(*args, **kwargs)

    collector.index.condemn = writer_gets_there_first
    report = collector.run()
    assert (report.orphaned, report.deleted, report.skipped) == (1, 0, 1)
    assert store.get(rid).body == large(9)


def test_expired_markers_are_cleared(backend):
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("markers")
    store.put(rid, large(11), updated_at=at(0))
    store.put(rid, large(12), updated_at=at(1))
    GarbageCollector(store, clock=later(2)).run()
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert condemnation_of(raw).bodies == {condemned_name(hashlib.sha256(large(11)).hexdigest())}
    store.put(rid, large(13), updated_at=at(2))  # leaves another orphan, so the id is visited
    report = GarbageCollector(store, clock=later(3)).run()
    assert report.markers_cleared == 1 and report.deleted == 1
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert condemnation_of(raw).bodies == {condemned_name(hashlib.sha256(large(12)).hexdigest())}


def test_expired_condemnations_of_ids_without_objects_are_cleared_shard_by_shard(backend):
    """An id whose condemned bodies were its last has no object to be listed by: the run
    finds its condemnation through the sparse index, and clears it once expired, for the
    shards it collected only. A dry run clears nothing."""
    store = s3_store(backend)
    rids = {}
    for n in range(40):  # two ids in different shards
        rid = backend.id(f"unlisted-{n}")
        rids.setdefault(shard_of(rid), rid)
        if len(rids) == 2:
            break
    now = time.time()
    for rid in rids.values():
        store.put(rid, {"n": 1}, updated_at=at(1))
        version = store.index.read(rid).version
        assert store.index.condemn(rid, ["ab" * 32], now, version)
    (first, first_rid), (second, second_rid) = sorted(rids.items())

    def raw(rid):
        return backend.dynamodb.get_item(
            TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
        )["Item"]

    # Not expired yet (the lease, the skew allowance and the writers' window): kept.
    report = GarbageCollector(store, clock=lambda: now + 60).run([first, second])
    assert report.markers_cleared == 0
    assert condemnation_of(raw(first_rid)) and condemnation_of(raw(second_rid))

    def expired() -> float:
        return now + 3600

    assert GarbageCollector(store, clock=expired, dry_run=True).run([first]).markers_cleared == 0
    report = GarbageCollector(store, clock=expired).run([first])
    assert (report.listed, report.markers_cleared, report.failed) == (0, 1, 0)
    assert condemnation_of(raw(first_rid)) is None
    assert condemnation_of(raw(second_rid)) is not None  # another shard: not this run's
    assert GarbageCollector(store, clock=expired).run([second]).markers_cleared == 1
    assert condemnation_of(raw(second_rid)) is None
    assert store.get(first_rid).json() == {"n": 1}


def test_a_damaged_items_bodies_are_never_collected(backend):
    """Its references cannot be read, so none of its objects may go: they are counted as
    unrecognised (vhs verify reports the item) and left, the orphan among them too."""
    store = s3_store(backend, retention=Retention(versions=0))
    rid = backend.id("damaged")
    store.put(rid, large(31), updated_at=at(0))
    store.put(rid, large(32), updated_at=at(1))  # large(31) is an orphan now
    before = {k for k in objects(backend) if k.startswith(store.body_key(rid, ""))}
    assert len(before) == 2
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": rid}},
        UpdateExpression="SET c = :broken",
        ExpressionAttributeValues={":broken": {"S": "not a list of entries"}},
    )
    report = GarbageCollector(store, clock=later(2)).run([shard_of(rid)])
    assert (report.deleted, report.orphaned, report.unrecognised) == (0, 0, 2)
    assert before <= set(objects(backend))


def test_concurrent_writers_never_lose_a_body(server):
    """Writers keep re-using a few bodies (so they dedupe onto keys the collector is judging)
    while the collector runs with no grace period at all. Afterwards every retained pointer
    resolves, and one more collection leaves exactly the referenced objects. The writers wait
    out condemnations on a clock that skips the wait (SkippingClock), shared with the
    collector: the race itself runs in real time."""
    clock = SkippingClock()
    store = s3_store(
        server,
        retention=Retention(versions=1),
        clock_skew=timedelta(seconds=0.2),
        clock=clock.clock,
    )
    store.writer.sleep = clock.sleep
    ids = [server.id(f"race-{n}") for n in range(4)]
    bodies = [large(100 + n, 2000) for n in range(5)]
    stop = threading.Event()
    errors: list[BaseException] = []

    conflicts: list[WriteConflict] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(60):
                rid = rng.choice(ids)
                put = functools.partial(
                    store.put,
                    rid,
                    rng.choice(bodies),
                    updated_at=f"2026-01-01T00:{step:02d}:{seed:02d}Z",
                )
                while True:
                    try:
                        put()
                        break
                    except WriteConflict as conflict:
                        # With no grace period the collector may condemn a body again as soon
                        # as it is uploaded again; the writer gives up, and its caller (the
                        # queue, in the pipeline) sends the write again.
                        conflicts.append(conflict)
        except BaseException as error:
            errors.append(error)

    collector = GarbageCollector(store, grace=timedelta(0), lease=timedelta(seconds=1))
    reports = []

    def collect() -> None:
        while not stop.is_set():
            reports.append(collector.run(shards=sorted({s for s in _shards(ids)})))

    writers = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    gc_thread = threading.Thread(target=collect)
    gc_thread.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    gc_thread.join()
    assert not errors
    assert sum(r.deleted for r in reports) > 0  # the race was really run
    for rid in ids:
        for version in store.history(rid):
            assert store.get(rid, version=version.version).content_hash
    # The next scheduled run, once the condemnations made during the race have expired.
    GarbageCollector(store, grace=timedelta(0), clock=clock.later(1)).run(
        shards=sorted(set(_shards(ids)))
    )
    assert set(objects(server)) == referenced_keys(store, ids)


def _shards(ids):
    from vhs.keys import shard_of

    return [shard_of(rid) for rid in ids]


def test_parse_duration():
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("1h") == timedelta(hours=1)
    assert parse_duration("2d") == timedelta(days=2)
    assert parse_duration("15") == timedelta(seconds=15)
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


# --- stores sharing a bucket --------------------------------------------------------------
# Several stores may keep their bodies in one bucket under different prefixes (docs/gc.md).
# Shard prefixes are hex, so the shard "de" of the store at "" lists every object of the store
# at "de"; and the bucket may hold objects that are not VHS's at all.
SHARED_PREFIXES = ["", "de", "a/b"]
FOREIGN_SHA = hashlib.sha256(b"not a body").hexdigest()
CUT_ID = "/" * 200  # cut in its key: the collector reads it from the object's metadata


def _other_shard(id_: str) -> str:
    return next(shard for shard in all_shards() if shard != shard_of(id_))


def foreign_objects(store_id: str) -> dict[str, dict[str, str]]:
    """Keys (under a store's prefix) that are not bodies of that store, with their metadata.
    `store_id` is a cut id the store holds: metadata may name it."""
    elsewhere = CUT_ID + "x"  # another cut id: its segment, the metadata names store_id
    return {
        f"3f/reports/2024/{FOREIGN_SHA}": {},
        f"3f/x/{'z' * 64}": {},
        f"{shard_of('x')}/x/{FOREIGN_SHA.upper()}": {},  # uppercase hex
        f"{shard_of('x')}/x/extra/{FOREIGN_SHA}": {},  # an extra segment
        f"{_other_shard('x')}/x/{FOREIGN_SHA}": {},  # the id's shard is not the key's
        f"{shard_of('A')}/%41/{FOREIGN_SHA}": {},  # not the canonical encoding of "A"
        f"{shard_of('a.b')}/a%2eb/{FOREIGN_SHA}": {},  # nor of "a.b"
        # cut segments: the metadata must name an id whose body_key is exactly the key
        f"{shard_of(elsewhere)}/{encode_id(elsewhere)}/{FOREIGN_SHA}": body_metadata(
            store_id, "2026-01-01T00:00:00Z"
        ),
        f"{_other_shard(store_id)}/{encode_id(store_id)}/{FOREIGN_SHA}": body_metadata(
            store_id, "2026-01-01T00:00:00Z"
        ),
        f"{shard_of(store_id)}/{encode_id(store_id)}/{FOREIGN_SHA}": {},  # no metadata
    }


def _listed_by(prefix: str, key: str) -> bool:
    """Whether one of the 256 shard listings of a store at `prefix` lists `key`."""
    return any(key.startswith(shard_prefix(prefix, shard)) for shard in all_shards())


def test_stores_sharing_a_bucket_collect_only_their_own_orphans(backend):
    """Stores at "", "de" and "a/b" in one bucket, with foreign objects beside each: every
    store's collector, with no grace period, deletes its own orphans and nothing else; every
    referenced body of every store still reads."""
    # Live runs share one table and keep to a prefix of their own; locally each store has a
    # table of its own, as separate stores do, and the prefixes start at the bucket's root.
    live = backend.name == "live"
    root = f"t{uuid.uuid4().hex[:8]}" if live else ""
    stores: dict[str, VersionedHybridStore] = {}
    written: dict[str, set[str]] = {}
    for n, label in enumerate(SHARED_PREFIXES):
        table = backend.table_name
        if not live:
            table = f"{backend.table_name}-{n}"
            provisioning.create_table(backend.dynamodb, table)
        prefix = "/".join(part for part in (root, label) if part)
        store = stores[label] = VersionedHybridStore(
            table,
            backend.bucket_name,
            StoreConfig(prefix=prefix, inline_threshold=256, retention=Retention(versions=1)),
            s3_client=backend.s3,
            dynamodb_client=backend.dynamodb,
        )
        before = set(objects(backend))
        for rid in _shared_bucket_ids(backend, label):
            for version in range(3):  # version 1 falls out of retention: an orphan each
                store.put(rid, large(n * 100 + version, 1000), updated_at=at(version))
        crash_between_phases(store, backend.id(f"{label}crashed"), large(n * 100 + 99, 1000))
        written[label] = set(objects(backend)) - before
        for key, metadata in foreign_objects(_shared_bucket_ids(backend, label)[1]).items():
            backend.s3.put_object(
                Bucket=backend.bucket_name,
                Key=f"{prefix}/{key}" if prefix else key,
                Body=b"not a body",
                Metadata=metadata,
            )
    ours = set().union(*written.values())
    foreign = set(objects(backend)) - ours
    assert len(foreign) == len(SHARED_PREFIXES) * len(foreign_objects(CUT_ID))
    keep = {
        label: referenced_keys(store, _shared_bucket_ids(backend, label))
        for label, store in stores.items()
    }
    orphans = {label: written[label] - keep[label] for label in stores}
    assert all(len(found) == 3 for found in orphans.values())
    assert any(_listed_by(stores[""].prefix, key) for key in written["de"])  # the shared shards

    remaining = set(objects(backend))
    for label, store in stores.items():
        listed = {key for key in remaining if _listed_by(store.prefix, key)}
        report = GarbageCollector(store, grace=timedelta(0), clock=later(2)).run()
        after = set(objects(backend))
        assert after == remaining - orphans[label], label
        assert (report.orphaned, report.deleted) == (3, 3)
        assert report.referenced == len(keep[label])
        assert report.listed == len(listed)
        assert report.unrecognised == len(listed - written[label])
        remaining = after
    assert remaining == foreign | set().union(*keep.values())
    for label, store in stores.items():
        for rid in _shared_bucket_ids(backend, label):
            for version in store.history(rid):
                store.get(rid, version=version.version)  # every retained pointer resolves


def _shared_bucket_ids(backend, label: str) -> list[str]:
    """The same ids in every store locally (each has its own table); distinct ones live."""
    namespace = label.replace("/", "-") if backend.name == "live" else ""
    return [backend.id(f"{namespace}kept"), backend.id(namespace) + CUT_ID]


# --- the collector's boundaries and counts, on in-process moto ------------------------------------

# The collector's boundaries and counts, on in-process moto (mutation testing found them unpinned:
# docs/reliability.md, "Mutation testing"): the grace period's edge, a standing condemnation too
# near its deadline to join, the delete fence at half a lease, the counts of cleared and failed
# condemnations, resuming inside a shard, and the progress callback.
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
    return set(objects(backend))


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
