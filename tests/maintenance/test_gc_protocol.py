"""The writer's half of the garbage collector's protocol (docs/gc.md).

The collector condemns a body by naming it in the id's item's condemnation (`gcs`, with the
deadline `gcd`), then deletes the object before the deadline. A writer whose upload began
before that deadline must not make the body current: it waits the deadline out, uploads
again, and then writes.
"""

from __future__ import annotations

from datetime import timedelta
from hashlib import sha256

from vhs.index.codec import condemnation_of
from vhs.keys import shard_of
from vhs.maintenance.gc import GarbageCollector
from vhs_ops.local.metering import RequestMeter
from vhs_testing.condemnation import SKEW, FakeTime, condemn, make_store
from vhs_testing.records import at, large


def test_a_condemned_body_is_uploaded_again_after_the_deadline(backend):
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("condemned")
    body = large(1)
    first = store.put(rid, body, updated_at=at(1))
    store.put(rid, large(2), updated_at=at(2))  # the first body is now history
    key = store.body_key(rid, first.content_hash)
    # The collector condemned the first body (deadline in 5 minutes) and deletes it while
    # the writer waits.
    condemn(backend, rid, first.content_hash, fake.now + 300)
    fake.during_sleep = lambda: backend.s3.delete_object(Bucket=backend.bucket_name, Key=key)
    meter = RequestMeter(backend.s3, backend.dynamodb)
    with meter.measure() as counts:
        result = store.put(rid, body, updated_at=at(3))
    assert result.outcome == "stored" and result.version == 3
    assert fake.slept == [300 + SKEW + 1]
    assert counts["PutObject"] == 2 and counts["UpdateItem"] == 2
    assert store.get(rid).body == body  # the pointer and the object agree


def test_a_condemnation_that_ended_before_the_upload_does_not_block(backend):
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("old-marker")
    body = large(3)
    sha = store.put(rid, large(4), updated_at=at(1)).content_hash
    condemn(backend, rid, sha, fake.now - 1000)
    condemn(backend, rid, sha256(body).hexdigest(), fake.now - 2 * SKEW)
    meter = RequestMeter(backend.s3, backend.dynamodb)
    with meter.measure() as counts:
        assert store.put(rid, body, updated_at=at(2)).outcome == "stored"
    assert dict(counts) == {"PutObject": 1, "UpdateItem": 1}
    assert fake.slept == []


def test_a_marker_on_an_id_with_no_versions_yet(backend):
    """The collector condemns orphans of ids that never got a version (a writer that crashed
    between its two phases); the item then holds only the marker."""
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("shell")
    body = large(5)
    condemn(backend, rid, sha256(body).hexdigest(), fake.now + 30)
    result = store.put(rid, body, updated_at=at(1))
    assert (result.outcome, result.version) == ("stored", 1)
    assert fake.slept == [30 + SKEW + 1]
    assert store.get(rid).body == body


def test_inline_bodies_are_not_subject_to_condemnation(backend):
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("inline")
    result = store.put(rid, {"small": True}, updated_at=at(1))
    condemn(backend, rid, result.content_hash, fake.now + 300)
    assert store.put(rid, {"small": False}, updated_at=at(2)).outcome == "stored"
    assert fake.slept == []


def test_stale_writes_are_reported_stale_even_when_condemned(backend):
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("stale-condemned")
    store.put(rid, large(6), updated_at=at(5))
    old = large(7)
    condemn(backend, rid, sha256(old).hexdigest(), fake.now + 300)
    assert store.put(rid, old, updated_at=at(1)).outcome == "stale"
    assert fake.slept == []


def test_a_writer_waiting_out_a_condemnation_is_not_condemned_again(backend):
    """Liveness, with no grace period: a collector pass that runs while a writer waits out a
    condemnation deletes the body under that same condemnation, rather than condemning it
    afresh with a later deadline, which would send the writer back to wait again (and again:
    after three refusals it gives up with WriteConflict)."""
    fake = FakeTime()
    store = make_store(backend, fake)
    rid = backend.id("waiting")
    body = large(8)
    sha = sha256(body).hexdigest()
    store.put(rid, large(9), updated_at=at(2))
    condemn(backend, rid, sha, fake.now + 300)  # an earlier pass condemned it, then stopped
    collector = GarbageCollector(store, grace=timedelta(0), clock=lambda: fake.now + 100)
    passes = []
    fake.during_sleep = lambda: passes.append(collector.run([shard_of(rid)]))
    result = store.put(rid, body, updated_at=at(3))  # its upload is an orphan until it commits
    assert (result.outcome, result.version) == ("stored", 2)
    assert store.get(rid).body == body
    assert fake.slept == [300 + SKEW + 1]
    assert [p.deleted for p in passes] == [1]  # the writer's first upload, under the old marker
    item = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    standing = condemnation_of(item)
    assert standing.covers(sha)
    assert standing.deadline == fake.now - SKEW - 1  # the old deadline: not condemned again
