"""The store's options, read errors, history entries and write path, on in-process moto (mutation
testing found them unpinned: docs/reliability.md, "Mutation testing"): the constructor's checks
and their messages, the version a RecordNotFound names, get's InvalidInput field, what history()
reports for a delete, an inline version and an S3 version, an inline body that fails its hash,
the warning of a trim that fails, a tombstone's size, history kept at `versions=1`, how long a
condemned writer waits, PutResult's id and which ids the KnownCurrent cache forgets first.

Failures are injected through the clients' own botocore event hooks; the store runs unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vhs import BodyHashMismatch, RecordNotFound, Retention
from vhs.codec import MAX_BODY_SIZE
from vhs.errors import ConfigurationError, InvalidInput
from vhs.item import ITEM_BUDGET, entry_size
from vhs.keys import body_key
from vhs.model import VersionInfo
from vhs.store import VersionedHybridStore, _largest_entry
from vhs_testing.backends import Backend
from vhs_testing.condemnation import SKEW, FakeTime, condemn, make_store
from vhs_testing.records import at, large


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(backend: Backend, table: str | None = None, bucket: str | None = None, **options: Any):
    return VersionedHybridStore(
        backend.table_name if table is None else table,
        backend.bucket_name if bucket is None else bucket,
        s3_client=backend.s3,
        dynamodb_client=backend.dynamodb,
        **options,
    )


# --- the constructor's checks ------------------------------------------------------------------


@pytest.mark.parametrize("table, bucket", [("", "bucket"), ("table", ""), ("", "")])
def test_a_store_needs_both_a_table_and_a_bucket(inprocess: Backend, table: str, bucket: str):
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, table, bucket)
    assert str(raised.value) == "table_name and bucket_name are required"


# At most one earlier version (`versions=0` holds one between trims), so the item budget allows
# the largest threshold.
ONE_HELD = Retention(versions=0)


@pytest.mark.parametrize("threshold", [0, 1, 64 * 1024])
def test_the_inline_threshold_may_be_anything_from_0_to_65536(inprocess: Backend, threshold: int):
    assert build(inprocess, inline_threshold=threshold, retention=ONE_HELD).inline_threshold == (
        threshold
    )


@pytest.mark.parametrize("threshold", [-1, 64 * 1024 + 1, 65 * 1024])
def test_an_inline_threshold_outside_0_to_65536_is_refused(inprocess: Backend, threshold: int):
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, inline_threshold=threshold, retention=ONE_HELD)
    assert str(raised.value) == "inline_threshold must be between 0 and 65536 bytes"


def test_an_inline_threshold_of_0_puts_every_body_in_s3(inprocess: Backend):
    store = build(inprocess, inline_threshold=0)
    rid = inprocess.id("never-inline")
    assert store.put(rid, {"a": 1}, updated_at=at(0)).location == (
        f"s3://{inprocess.bucket_name}/{body_key('', rid, store.get(rid).content_hash)}"
    )


@pytest.mark.parametrize("size", [1, MAX_BODY_SIZE])
def test_max_body_size_may_be_anything_from_1_to_the_codecs_limit(inprocess: Backend, size: int):
    assert build(inprocess, max_body_size=size).max_body_size == size


@pytest.mark.parametrize("size", [0, -1, MAX_BODY_SIZE + 1])
def test_a_max_body_size_outside_1_to_the_limit_is_refused(inprocess: Backend, size: int):
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, max_body_size=size)
    assert str(raised.value) == f"max_body_size must be between 1 and {MAX_BODY_SIZE}"


def test_the_item_budget_admits_a_configuration_that_fills_it_exactly(inprocess: Backend):
    """Default retention: 5 versions, trimmed in batches of 2, so 8 entries held at most, each
    up to the threshold plus 397 bytes by DynamoDB's rules (a 255-character content type, the
    numbers, names and map overheads), beside 1,046 bytes of the item's own at its largest,
    within item.ITEM_BUDGET (313,570): 1,046 + 8 * (38,668 + 397) = 313,566."""
    assert entry_size(_largest_entry(38_668, MAX_BODY_SIZE)) == 38_668 + 397
    assert 1_046 + 8 * (38_668 + 397) <= ITEM_BUDGET < 1_046 + 8 * (38_669 + 397)
    assert build(inprocess, inline_threshold=38_668).inline_threshold == 38_668
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, inline_threshold=38_669)
    assert str(raised.value) == (
        "8 versions of up to 39066 bytes each (an inline body of up to 38669 bytes, a "
        "255-character content type) could outgrow the 313570 bytes a write may take of a "
        "DynamoDB item: lower retention.versions or inline_threshold"
    )


def test_the_item_budget_counts_retention(inprocess: Backend):
    """versions=10 holds 10 + 5 earlier entries and the current one:
    1,046 + 16 * (19,135 + 397) = 313,558."""
    assert 1_046 + 16 * (19_135 + 397) <= ITEM_BUDGET < 1_046 + 16 * (19_136 + 397)
    many = Retention(versions=10)
    assert build(inprocess, inline_threshold=19_135, retention=many).retention == many
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, inline_threshold=19_136, retention=many)
    assert str(raised.value).startswith("16 versions of up to 19533 bytes each")


# --- reads ---------------------------------------------------------------------------------


def test_record_not_found_names_the_version_asked_for(inprocess: Backend):
    store = inprocess.store(retention=Retention(versions=1))
    rid = inprocess.id("versions")
    missing = inprocess.id("missing")
    with pytest.raises(RecordNotFound) as unknown:
        store.get(missing, version=2)
    assert (unknown.value.id, unknown.value.version) == (missing, 2)
    assert str(unknown.value) == f"record {missing!r} version 2 not found"

    for minute in (1, 2, 3):
        store.put(rid, {"n": minute}, updated_at=at(minute))
    store.delete(rid, deleted_at=at(4))
    with pytest.raises(RecordNotFound) as expired:
        store.get(rid, version=2)
    assert (expired.value.id, expired.value.version) == (rid, 2)
    assert str(expired.value) == f"record {rid!r} version 2 not found: not retained"
    with pytest.raises(RecordNotFound) as deleted:
        store.get(rid, version=4)
    assert (deleted.value.id, deleted.value.version) == (rid, 4)
    assert str(deleted.value) == f"record {rid!r} version 4 not found: that version is a delete"
    with pytest.raises(RecordNotFound) as current:
        store.get(rid)
    assert (current.value.id, current.value.version) == (rid, None)
    assert str(current.value) == f"record {rid!r} not found: deleted at version 4"
    assert store.get(rid, version=3).json() == {"n": 3}


@pytest.mark.parametrize("version", [0, -1, True, False, 1.0, "1"])
def test_get_refuses_a_version_that_is_not_a_whole_number_from_1(inprocess: Backend, version):
    store = inprocess.store()
    rid = inprocess.id("asked")
    store.put(rid, {"a": 1}, updated_at=at(0))
    with pytest.raises(InvalidInput) as raised:
        store.get(rid, version=version)
    assert raised.value.field == "version"
    assert str(raised.value) == "version: must be a whole number >= 1"
    assert store.get(rid, version=1).json() == {"a": 1}


def test_history_reports_each_versions_location_time_size_and_type(inprocess: Backend):
    store = inprocess.store()
    rid = inprocess.id("history")
    body = large(1)
    small = b"a small opaque body"
    store.put(rid, body, updated_at=at(1), content_type="application/marc")
    store.put(rid, small, updated_at=at(2))
    store.delete(rid, deleted_at=at(3))
    s3_location = f"s3://{inprocess.bucket_name}/{body_key('', rid, sha(body))}"
    assert store.history(rid) == [
        VersionInfo(
            version=1,
            updated_at=at(1),
            size=len(body),
            content_hash=sha(body),
            deleted=False,
            content_type="application/marc",
            location=s3_location,
        ),
        VersionInfo(
            version=2,
            updated_at=at(2),
            size=len(small),
            content_hash=sha(small),
            deleted=False,
            content_type="application/octet-stream",
            location="inline",
        ),
        VersionInfo(
            version=3,
            updated_at=at(3),
            size=0,
            content_hash=None,
            deleted=True,
            content_type=None,
            location=None,
        ),
    ]


def test_history_of_a_prefixed_store_names_the_objects_key(inprocess: Backend):
    store = inprocess.store(prefix="bodies")
    rid = inprocess.id("prefixed")
    body = large(2)
    put = store.put(rid, body, updated_at=at(1))
    where = f"s3://{inprocess.bucket_name}/{body_key('bodies', rid, sha(body))}"
    assert put.location == where
    assert [info.location for info in store.history(rid)] == [where]


def damage_current_body(backend: Backend, rid: str, stored: bytes) -> None:
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": rid}},
        UpdateExpression="SET c[0].b = :b",
        ExpressionAttributeValues={":b": {"B": stored}},
    )


def record(edition: int) -> dict[str, Any]:
    """About 1 KB of JSON whose editions differ in a field: stored inline, zlib, and earlier
    editions as deltas against the next."""
    return {
        "title": "Moby-Dick; or, The Whale",
        "notes": [f"Holding {n}: shelfmark PR{1000 + n}.M4" for n in range(30)],
        "edition": edition,
    }


def test_an_inline_body_that_decodes_to_other_bytes_names_both_hashes(inprocess: Backend):
    store = inprocess.store()
    rid = inprocess.id("other-bytes")
    puts = [store.put(rid, record(edition), updated_at=at(edition)) for edition in (1, 2, 3)]
    other = b'{"title":"Billy Budd"}'
    damage_current_body(inprocess, rid, zlib.compress(other))
    where = f"dynamodb://{inprocess.table_name}/{rid}"
    with pytest.raises(BodyHashMismatch) as current:
        store.get(rid)
    assert (current.value.location, current.value.expected, current.value.actual) == (
        where,
        puts[2].content_hash,
        sha(other),
    )
    assert str(current.value) == (
        f"body at {where} has sha256 {sha(other)}, expected {puts[2].content_hash}"
    )
    # Version 1 is a delta against version 2, and 2 against 3: it cannot be decoded, and the
    # hash of version 3's bytes is not version 1's.
    with pytest.raises(BodyHashMismatch) as earlier:
        store.get(rid, version=1)
    assert (earlier.value.location, earlier.value.expected, earlier.value.actual) == (
        where,
        puts[0].content_hash,
        "(undecodable)",
    )


def test_an_inline_body_that_does_not_decode_is_reported_undecodable(inprocess: Backend):
    store = inprocess.store()
    rid = inprocess.id("garbage")
    put = store.put(rid, record(1), updated_at=at(1))
    damage_current_body(inprocess, rid, b"\x78\xbb not zlib at all")
    with pytest.raises(BodyHashMismatch) as raised:
        store.get(rid)
    where = f"dynamodb://{inprocess.table_name}/{rid}"
    assert (raised.value.location, raised.value.expected, raised.value.actual) == (
        where,
        put.content_hash,
        "(undecodable)",
    )
    assert str(raised.value) == (
        f"body at {where} has sha256 (undecodable), expected {put.content_hash}"
    )


# --- the write path --------------------------------------------------------------------------


def test_a_failed_trim_is_logged_and_the_put_still_succeeds(inprocess: Backend, caplog):
    """versions=1 trims each expired entry (trim_batch 1). The trim, a REMOVE UpdateItem, is
    refused; the version is written all the same and the failure logged."""
    store = inprocess.store(retention=Retention(versions=1))
    rid = inprocess.id("untrimmed")
    refused: list[ClientError] = []

    def refuse_trims(params: dict[str, Any], **_: Any) -> None:
        if params.get("UpdateExpression", "").startswith("REMOVE"):
            error = ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "no"}},
                "UpdateItem",
            )
            refused.append(error)
            raise error

    inprocess.dynamodb.meta.events.register(
        "before-parameter-build.dynamodb.UpdateItem", refuse_trims
    )
    store.put(rid, large(11), updated_at=at(1))
    store.put(rid, large(12), updated_at=at(2))
    assert refused == []
    with caplog.at_level(logging.WARNING, logger="vhs.store"):
        result = store.put(rid, large(13), updated_at=at(3))
    assert (result.outcome, result.version) == ("stored", 3)
    assert len(refused) == 1
    warnings = [r for r in caplog.records if r.name == "vhs.store"]
    assert [(r.levelno, r.getMessage()) for r in warnings] == [
        (logging.WARNING, f"could not trim the history of {rid!r}: {refused[0]}")
    ]
    assert len(store.index.read(rid).history) == 2  # untrimmed: the next writer trims
    assert store.get(rid).body == large(13)


def test_a_tombstone_has_size_0(inprocess: Backend):
    store = inprocess.store()
    rid = inprocess.id("tombstone")
    store.put(rid, {"a": 1}, updated_at=at(1))
    store.delete(rid, deleted_at=at(2))
    assert store.index.read(rid).current.size == 0
    assert [info.size for info in store.history(rid)][-1] == 0


@pytest.mark.parametrize("body", [large(21), {"small": "inline"}], ids=["s3", "inline"])
def test_one_retained_version_is_kept_by_puts_and_deletes(inprocess: Backend, body: Any):
    store = inprocess.store(retention=Retention(versions=1))
    rid = inprocess.id("one-kept")
    store.put(rid, body, updated_at=at(1))
    store.put(rid, large(22), updated_at=at(2))
    assert [info.version for info in store.history(rid)] == [1, 2]
    first = store.get(rid, version=1)
    assert (first.body if isinstance(body, bytes) else first.json()) == body
    store.delete(rid, deleted_at=at(3))
    assert [(info.version, info.deleted) for info in store.history(rid)] == [
        (2, False),
        (3, True),
    ]
    assert store.get(rid, version=2).body == large(22)


def test_a_condemned_writer_waits_exactly_past_the_deadline_and_skew(inprocess: Backend):
    fake = FakeTime()
    store = make_store(inprocess, fake)
    rid = inprocess.id("condemned")
    body = large(31)
    first = store.put(rid, body, updated_at=at(1))
    store.put(rid, large(32), updated_at=at(2))
    condemn(inprocess, rid, first.content_hash, fake.now + 300)
    result = store.put(rid, body, updated_at=at(3))
    assert (result.outcome, result.version) == ("stored", 3)
    assert fake.slept == [300 + SKEW + 1]


def test_put_result_names_the_record(inprocess: Backend):
    store = inprocess.store()
    rid = inprocess.id("named")
    inline = store.put(rid, {"a": 1}, updated_at=at(1))
    in_s3 = store.put(rid, large(41), updated_at=at(2))
    assert (inline.id, inline.version, inline.location) == (rid, 1, "inline")
    assert (in_s3.id, in_s3.version) == (rid, 2)
    assert str(in_s3) == f"{rid}: stored (version 2)"


def test_the_known_current_cache_forgets_the_least_recently_written_id(inprocess: Backend):
    """A cache of two: after a, b and c, a is forgotten, so a duplicate put of a uploads its
    body again (and is unchanged), while b's and c's duplicates upload nothing."""
    store = inprocess.store()
    store.known.capacity = 2
    uploads: list[str] = []
    inprocess.s3.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: uploads.append(params["Key"])
    )
    rids = [inprocess.id(name) for name in ("a", "b", "c")]
    for n, rid in enumerate(rids):
        store.put(rid, large(50 + n), updated_at=at(1))
    assert len(uploads) == 3
    for n, rid in reversed(list(enumerate(rids[1:], start=1))):
        assert store.put(rid, large(50 + n), updated_at=at(1)).outcome == "unchanged"
    assert len(uploads) == 3, "b and c are known: their duplicates need no upload"
    assert store.put(rids[0], large(50), updated_at=at(1)).outcome == "unchanged"
    assert len(uploads) == 4, "a was forgotten: its duplicate is uploaded again"
