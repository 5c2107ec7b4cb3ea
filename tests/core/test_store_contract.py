"""The store's contract, run against every backend (in-process moto, moto's server, live AWS),
with every write compact and with the item layouts mixed (`item_layouts`).

Each test names the semantic of the issue it holds: two phases, order, content-addressed keys,
inline bodies, the request floor, retention and bad input.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import zlib
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vhs import (
    BodyHashMismatch,
    BodyTooLarge,
    DanglingPointer,
    InvalidId,
    InvalidRecord,
    InvalidTimestamp,
    RecordNotFound,
    Retention,
)
from vhs.bodies.packing import pack
from vhs.codec import MAX_BODY_SIZE
from vhs.errors import ConfigurationError, InvalidInput
from vhs.index.budget import largest_entry
from vhs.index.codec import ITEM_BUDGET
from vhs.index.size import held_size
from vhs.keys import MAX_ID_LENGTH, body_key, encode_id
from vhs.model import VersionInfo
from vhs.store import VersionedHybridStore
from vhs.store_config import StoreConfig
from vhs_ops.local.metering import RequestMeter
from vhs_testing.backends import Backend
from vhs_testing.condemnation import SKEW, FakeTime, condemn, make_store
from vhs_testing.dictionaries import ZSTD_CODEC, trained_dictionary
from vhs_testing.layouts import COMPACT, LAYOUTS
from vhs_testing.records import at, large

# moto's server is the in-process moto behind HTTP; dynalite (DynamoDB's comparison rules)
# doubles the suite's time: `VHS_TEST_MIXED_EVERYWHERE=1` runs mixed layouts on both too.
MIXED_SKIPPED = () if os.environ.get("VHS_TEST_MIXED_EVERYWHERE") else ("server", "dynalite")


@pytest.fixture(autouse=True, params=[*LAYOUTS, ZSTD_CODEC])
def item_layouts(request: pytest.FixtureRequest) -> None:
    """Every test of the contract three times: with every write compact; on a store whose
    writes alternate the item layouts id by id (vhs_testing.layouts), so the table holds items
    of both and of each rewritten by the other; and on a store that writes with zstd and a
    trained dictionary (vhs_testing.dictionaries), beside what the others wrote without."""
    backends = [name for name in ("backend", "inprocess") if name in request.fixturenames]
    if not backends:
        if request.param != COMPACT:
            pytest.skip("no store: nothing to lay out")
        return
    if request.param != COMPACT and request.node.callspec.params.get("backend") in MIXED_SKIPPED:
        pytest.skip("these variants run in-process and on live AWS (make test's time)")
    for name in backends:
        backend = request.getfixturevalue(name)
        if request.param == ZSTD_CODEC:
            backend.codec = ZSTD_CODEC
        else:
            backend.layouts = request.param


def s3_keys(backend) -> list[str]:
    response = backend.s3.list_objects_v2(Bucket=backend.bucket_name)
    return [o["Key"] for o in response.get("Contents", [])]


# --- 1. Two phases --------------------------------------------------------------------------


def test_large_body_goes_to_s3_before_the_index_points_at_it(backend):
    store = backend.store()
    rid = backend.id("big")
    meter = RequestMeter(backend.s3, backend.dynamodb)
    order: list[str] = []
    for client in (backend.s3, backend.dynamodb):
        client.meta.events.register(
            "request-created", lambda operation_name, **_: order.append(operation_name)
        )
    result = store.put(rid, large(1), updated_at=at(0))
    meter.close()
    assert result.outcome == "stored"
    assert order == ["PutObject", "UpdateItem"]
    record = store.get(rid)
    assert record.body == large(1)
    assert (
        result.location == f"s3://{backend.bucket_name}/{store.body_key(rid, result.content_hash)}"
    )


def test_delete_writes_the_index_only_and_leaves_bodies_to_gc(backend):
    store = backend.store()
    rid = backend.id("gone")
    put = store.put(rid, large(2), updated_at=at(0))
    meter = RequestMeter(backend.s3, backend.dynamodb)
    with meter.measure() as counts:
        result = store.delete(rid, deleted_at=at(1))
    assert result.outcome == "deleted"
    assert dict(counts) == {"UpdateItem": 1}
    with pytest.raises(RecordNotFound):
        store.get(rid)
    key = store.body_key(rid, put.content_hash)
    assert backend.s3.head_object(Bucket=backend.bucket_name, Key=key)["ContentLength"] > 0


# --- 2. Order -------------------------------------------------------------------------------


def test_stale_and_unchanged_outcomes(backend):
    store = backend.store()
    rid = backend.id("ordered")
    assert store.put(rid, {"v": 1}, updated_at=at(10)).outcome == "stored"
    assert store.put(rid, {"v": 0}, updated_at=at(5)).outcome == "stale"
    duplicate = store.put(rid, {"v": 1}, updated_at=at(10))
    assert (duplicate.outcome, duplicate.version) == ("unchanged", 1)
    second = store.put(rid, {"v": 2}, updated_at=at(20))
    assert (second.outcome, second.version) == ("stored", 2)
    assert store.get(rid).json() == {"v": 2}


def test_same_timestamp_ties_are_broken_by_content_hash(backend):
    store = backend.store()
    rid_a, rid_b = backend.id("tie-a"), backend.id("tie-b")
    first, second = {"n": "first"}, {"n": "second"}
    # Same two writes, opposite arrival order: the same winner.
    store.put(rid_a, first, updated_at=at(0))
    store.put(rid_a, second, updated_at=at(0))
    store.put(rid_b, second, updated_at=at(0))
    store.put(rid_b, first, updated_at=at(0))
    assert store.get(rid_a).body == store.get(rid_b).body
    winner = max(
        first,
        second,
        key=lambda r: hashlib.sha256(json.dumps(r).replace(" ", "").encode()).hexdigest(),
    )
    assert store.get(rid_a).json() == winner


# The same bytes at the same updated_at under two content types: the ordering key's third part,
# the content type (absent, i.e. JSON, read as "application/json"), breaks the tie, compared
# by code point. Each case: (lower, higher) content type, written here by hand.
CONTENT_TYPE_TIES = [
    pytest.param("application/xml", "text/plain", id="both-stored"),
    pytest.param("application/cbor", "application/json", id="higher-is-json-absent-ct"),
    pytest.param("application/json", "application/vnd.api+json", id="lower-is-json-absent-ct"),
]


@pytest.mark.parametrize(("lower", "higher"), CONTENT_TYPE_TIES)
def test_same_bytes_and_timestamp_under_two_content_types_end_with_the_higher_type(
    backend, lower, higher
):
    store = backend.store()
    body = b'{"a":1}'
    rid_up, rid_down = backend.id("ct-tie-up"), backend.id("ct-tie-down")
    told = {}
    for rid, order in ((rid_up, (lower, higher)), (rid_down, (higher, lower))):
        told[rid] = [
            store.put(rid, body, updated_at=at(0), content_type=content_type)
            for content_type in order
        ]
    # Either arrival order: the higher content type is current.
    for rid in (rid_up, rid_down):
        record = store.get(rid)
        assert (record.body, record.updated_at, record.content_type) == (body, at(0), higher)
    # Lower first: the higher type is a new version. Higher first: the lower one is stale.
    assert [(r.outcome, r.version) for r in told[rid_up]] == [("stored", 1), ("stored", 2)]
    assert [(r.outcome, r.version) for r in told[rid_down]] == [("stored", 1), ("stale", 1)]
    for rid in (rid_up, rid_down):
        # Repeating either write changes nothing.
        assert store.put(rid, body, updated_at=at(0), content_type=higher).outcome == "unchanged"
        assert store.put(rid, body, updated_at=at(0), content_type=lower).outcome == "stale"
        assert store.get(rid).content_type == higher


def test_same_bytes_under_another_content_type_later_is_a_new_version(backend):
    store = backend.store()
    rid_in_order, rid_reversed = backend.id("ct-later"), backend.id("ct-later-rev")
    body = large(12)
    first = {"updated_at": at(1), "content_type": "text/plain"}
    second = {"updated_at": at(2), "content_type": "application/octet-stream"}
    assert store.put(rid_in_order, body, **first).outcome == "stored"
    changed = store.put(rid_in_order, body, **second)
    assert (changed.outcome, changed.version) == ("stored", 2)
    assert [h.content_type for h in store.history(rid_in_order)] == [
        "text/plain",
        "application/octet-stream",
    ]
    assert store.put(rid_reversed, body, **second).outcome == "stored"
    assert store.put(rid_reversed, body, **first).outcome == "stale"
    for rid in (rid_in_order, rid_reversed):
        record = store.get(rid)
        assert (record.body, record.updated_at, record.content_type) == (
            body,
            at(2),
            "application/octet-stream",
        )
    # The same bytes and content type later: a touch, which moves updated_at only.
    touch = store.put(rid_in_order, body, updated_at=at(3), content_type="application/octet-stream")
    assert (touch.outcome, touch.version) == ("unchanged", 2)
    record = store.get(rid_in_order)
    assert (record.version, record.updated_at, record.content_type) == (
        2,
        at(3),
        "application/octet-stream",
    )


def test_same_content_with_a_later_timestamp_moves_updated_at_without_a_new_version(backend):
    store = backend.store()
    rid = backend.id("touch")
    store.put(rid, {"v": "A"}, updated_at=at(1))
    store.put(rid, {"v": "B"}, updated_at=at(2))
    again = store.put(rid, {"v": "B"}, updated_at=at(3))
    assert (again.outcome, again.version) == ("unchanged", 2)
    assert store.get(rid).updated_at == at(3)
    # A write between the two B timestamps is now stale, as if B@3 had arrived first.
    assert store.put(rid, {"v": "C"}, updated_at=at(2) + timedelta(seconds=30)).outcome == "stale"


def test_delete_makes_later_arriving_older_or_equal_puts_stale(backend):
    store = backend.store()
    rid = backend.id("tomb")
    store.put(rid, {"v": 1}, updated_at=at(1))
    assert store.delete(rid, deleted_at=at(5)).outcome == "deleted"
    assert store.put(rid, {"v": 2}, updated_at=at(5)).outcome == "stale"
    assert store.put(rid, {"v": 2}, updated_at=at(4)).outcome == "stale"
    assert store.delete(rid, deleted_at=at(5)).outcome == "unchanged"
    assert store.delete(rid, deleted_at=at(3)).outcome == "stale"
    reborn = store.put(rid, {"v": 3}, updated_at=at(6))
    assert (reborn.outcome, reborn.version) == ("stored", 3)
    assert store.get(rid).json() == {"v": 3}


def test_delete_of_an_unknown_id_is_remembered(backend):
    store = backend.store()
    rid = backend.id("never-seen")
    assert store.delete(rid, deleted_at=at(5)).version == 1
    assert store.put(rid, {"late": True}, updated_at=at(4)).outcome == "stale"
    with pytest.raises(RecordNotFound):
        store.get(rid)


def test_versions_are_numbered_without_gaps_or_reuse(backend):
    store = backend.store(retention=Retention(versions=20))
    rid = backend.id("numbers")
    outcomes = []
    for minute, value in [(1, "a"), (3, "b"), (2, "x"), (3, "b"), (4, "c"), (4, "c")]:
        outcomes.append(store.put(rid, {"v": value}, updated_at=at(minute)))
    store.delete(rid, deleted_at=at(5))
    store.put(rid, {"v": "d"}, updated_at=at(6))
    versions = [info.version for info in store.history(rid)]
    assert versions == [1, 2, 3, 4, 5]
    assert [o.version for o in outcomes] == [1, 2, 2, 2, 3, 3]
    assert [info.deleted for info in store.history(rid)] == [False, False, False, True, False]


def test_the_final_state_does_not_depend_on_arrival_order(backend):
    """Every order ends at the write the ordering rules name (the independent model's winner:
    the highest (updated_at, hash, content type)), not merely at the same state."""
    from vhs_testing.model import Delete, Put, winner

    store = backend.store()
    writes = [({"v": n}, at(n % 4)) for n in range(6)] + [(None, at(2))]
    orders = [writes, list(reversed(writes)), writes[3:] + writes[:3]]
    for n, order in enumerate(orders):
        rid = backend.id(f"arrival-{n}")
        for record, when in order + order[:2]:  # with duplicates
            if record is None:
                store.delete(rid, deleted_at=when)
            else:
                store.put(rid, record, updated_at=when)
        best = winner(
            Delete(rid, when) if record is None else Put(rid, record, when)
            for record, when in writes
        )
        assert isinstance(best, Put)  # at(3) puts beat the delete at at(2)
        current = store.get(rid)
        assert (current.body, current.updated_at) == (best.body, best.at), order


# --- 3. Content-addressed keys --------------------------------------------------------------


def test_s3_keys_are_prefix_shard_id_sha256_with_metadata_and_checksum(backend):
    store = backend.store(prefix="catalogue")
    rid = backend.id("b1234/5")
    body = large(3)
    result = store.put(rid, body, updated_at=at(0), content_type="application/marc")
    sha = hashlib.sha256(body).hexdigest()
    key = store.body_key(rid, sha)
    parts = key.split("/")
    assert parts[0] == "catalogue"
    assert parts[1] == hashlib.sha256(rid.encode()).hexdigest()[:2]
    assert parts[2] == encode_id(rid) and "/" not in parts[2]
    assert parts[3] == sha == result.content_hash
    head = backend.s3.head_object(Bucket=backend.bucket_name, Key=key, ChecksumMode="ENABLED")
    assert base64.urlsafe_b64decode(head["Metadata"]["vhs-id"]).decode() == rid
    assert head["Metadata"]["vhs-updated-at"] == "2026-01-01T00:00:00.000000Z"
    assert head["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(sha)).decode()
    assert head["ContentType"] == "application/marc"


def test_an_upload_carries_the_checksum_of_the_content_hashed_not_of_what_is_sent(backend):
    """S3 refuses an upload whose bytes do not match the ChecksumSHA256 it is sent with. The
    store sends the sha256 it hashed (the body's name), so bytes that changed between the hash
    and the upload are refused by S3; a checksum botocore computed from the bytes sent would
    accept them. (moto does not check checksums, so the request itself is checked here.)"""
    store = backend.store()
    events = store.bodies.s3.meta.events
    sent: list[str] = []

    def swap_bytes(params, **_):  # the body changes after it was hashed
        params["Body"] = b"x" * len(params["Body"])

    def capture(request, **_):
        sent.append(request.headers.get("x-amz-checksum-sha256", b""))

    events.register("before-parameter-build.s3.PutObject", swap_bytes, unique_id="t-swap")
    events.register("before-send.s3.PutObject", capture, unique_id="t-capture")
    try:
        result = store.put(backend.id("checksummed"), large(41), updated_at=at(0))
    finally:
        events.unregister("before-parameter-build.s3.PutObject", unique_id="t-swap")
        events.unregister("before-send.s3.PutObject", unique_id="t-capture")
    expected = base64.b64encode(bytes.fromhex(result.content_hash)).decode()
    assert [h.decode() if isinstance(h, bytes) else h for h in sent] == [expected]


def test_same_content_for_two_versions_shares_one_object(backend):
    store = backend.store()
    rid = backend.id("shared")
    store.put(rid, large(4), updated_at=at(1))
    store.put(rid, large(5), updated_at=at(2))
    store.put(rid, large(4), updated_at=at(3))
    assert len([k for k in s3_keys(backend) if encode_id(rid) in k]) == 2
    assert store.history(rid)[0].content_hash == store.get(rid).content_hash


@pytest.mark.parametrize(
    "rid",
    [
        "a/b",
        "../etc",
        "..",
        ".",
        "x%2Fy",
        "~tilde",
        "sp ace",
        "ünïcödé",
        "日本語",
        "emoji-🙂",
        "a\u200db",
        "x" * MAX_ID_LENGTH,
        "🙂" * MAX_ID_LENGTH,
        "%" * MAX_ID_LENGTH,
    ],
)
def test_every_valid_id_gives_a_valid_key_that_round_trips(backend, rid):
    store = backend.store(prefix="p" * 40)
    full = backend.id(rid)[:MAX_ID_LENGTH]
    result = store.put(full, large(6, 1000), updated_at=at(0))
    assert store.get(full).body == large(6, 1000)
    key = store.body_key(full, result.content_hash)
    assert len(key.encode()) <= 1024
    # Exactly prefix/shard/id/sha256: the encoded id is one segment, never "." or "..".
    parts = key.split("/")
    assert len(parts) == 4 and parts[2] == encode_id(full), key
    assert parts[2] not in {".", ".."}


def test_distinct_ids_never_share_a_key_segment():
    ids = ["a/b", "a%2Fb", "a%252Fb", "a.b", "a%2Eb", "x" * 256, "x" * 255 + "y", "~", "%7E"]
    ids += ["🙂" * 256, "🙂" * 255 + "🙃", "%" * 256, "%" * 255 + "&"]
    segments = {encode_id(i) for i in ids}
    assert len(segments) == len(ids)


def test_a_corrupted_s3_body_raises_instead_of_returning_wrong_data(backend):
    store = backend.store()
    rid = backend.id("corrupt")
    result = store.put(rid, large(7), updated_at=at(0))
    key = store.body_key(rid, result.content_hash)
    backend.s3.put_object(Bucket=backend.bucket_name, Key=key, Body=b"not the body")
    with pytest.raises(BodyHashMismatch):
        store.get(rid)


def packed_as_current(backend, rid: str, data: bytes) -> bytes:
    """`data` packed as the current entry of `rid` is (its codec, and dictionary if any)."""
    current = backend.store().index.read(rid).current
    dictionary = trained_dictionary() if current.dictionary else None
    return pack(data, current.codec, dictionary).data


def _set_inline_body(backend, rid, stored: bytes) -> None:
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": rid}},
        UpdateExpression="SET c[0].b = :b",
        ExpressionAttributeValues={":b": {"B": stored}},
    )


def test_a_corrupted_inline_body_raises_instead_of_returning_wrong_data(backend):
    store = backend.store()
    rid = backend.id("corrupt-inline")
    record = {"title": "Moby-Dick", "words": ["whale"] * 50}  # compressible: stored zlib'd
    store.put(rid, record, updated_at=at(0))
    other = json.dumps({"title": "Moby-Dock", "words": ["whale"] * 50}, separators=(",", ":"))
    _set_inline_body(backend, rid, zlib.compress(other.encode()))  # same size, other bytes
    with pytest.raises(BodyHashMismatch):
        store.get(rid)
    _set_inline_body(backend, rid, b"not zlib at all")
    with pytest.raises(BodyHashMismatch):
        store.get(rid)


def test_an_inline_body_never_inflates_past_its_recorded_size(backend):
    """A damaged or hostile item's zlib body that inflates to 64 MiB: the read stops at the
    entry's recorded size (and refuses it), so it never holds the 64 MiB."""
    import tracemalloc

    store = backend.store()
    rid = backend.id("zlib-bomb")
    store.put(rid, {"words": ["whale"] * 50}, updated_at=at(0))
    bomb = zlib.compress(b"\0" * (64 * 2**20), 9)
    assert len(bomb) < 100_000
    _set_inline_body(backend, rid, bomb)
    tracemalloc.start()
    try:
        with pytest.raises(BodyHashMismatch):
            store.get(rid)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


def test_a_missing_s3_body_raises_dangling_pointer(backend):
    store = backend.store()
    rid = backend.id("dangling")
    result = store.put(rid, large(8), updated_at=at(0))
    backend.s3.delete_object(
        Bucket=backend.bucket_name, Key=store.body_key(rid, result.content_hash)
    )
    with pytest.raises(DanglingPointer):
        store.get(rid)


def test_a_large_put_that_cannot_win_uploads_nothing_once_the_current_entry_is_known(backend):
    """A duplicate or stale large put of an id this store has written is refused or changes
    nothing, so its body is not uploaded; one that may win (the same content at a later time,
    or another store that has seen nothing) uploads as before."""
    store = backend.store()
    rid = backend.id("known")
    meter = RequestMeter(backend.s3, backend.dynamodb)
    assert store.put(rid, large(1), updated_at=at(5)).outcome == "stored"
    for body, minutes, outcome in ((large(1), 5, "unchanged"), (large(2), 4, "stale")):
        with meter.measure() as counts:
            result = store.put(rid, body, updated_at=at(minutes))
        assert (result.outcome, result.version) == (outcome, 1)
        assert counts["PutObject"] == counts["CreateMultipartUpload"] == 0, counts
        assert counts["UpdateItem"] == 1
    # The same content later moves updated_at forward; it uploads, since the version it
    # names may have been written by a store whose body was collected since.
    with meter.measure() as counts:
        assert store.put(rid, large(1), updated_at=at(6)).outcome == "unchanged"
    assert counts["PutObject"] == 1
    stranger = backend.store()
    with meter.measure() as counts:
        assert stranger.put(rid, large(3), updated_at=at(1)).outcome == "stale"
    assert counts["PutObject"] == 1
    # What the known store skipped never mattered: the record reads as written.
    assert store.get(rid).body == large(1)
    assert [v.version for v in store.history(rid)] == [1]


# --- 4. Inline small bodies -----------------------------------------------------------------


def test_small_bodies_are_inline_and_compressed_where_that_pays(backend):
    store = backend.store()
    rid = backend.id("small")
    record = {"title": "Moby-Dick; or, The Whale", "subjects": ["whaling"] * 50}
    result = store.put(rid, record, updated_at=at(0))
    assert result.location == "inline"
    assert not [k for k in s3_keys(backend) if encode_id(rid) in k]
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    entry = raw["c"]["L"][0]["M"]
    if backend.codec == ZSTD_CODEC:  # zstd with the dictionary: smaller than zlib here
        assert (entry["z"]["S"], entry["zd"]["B"].hex()) == ("Z", trained_dictionary().id)
        assert len(entry["b"]["B"]) < len(zlib.compress(json.dumps(record).encode(), 6))
    else:
        assert entry["z"]["S"] == "zlib" and "zd" not in entry
    assert len(entry["b"]["B"]) < len(json.dumps(record))
    assert store.get(rid).json() == record


def test_incompressible_small_bodies_are_stored_as_they_are(backend):
    store = backend.store()
    rid = backend.id("tiny")
    store.put(rid, b"\x00\x01", updated_at=at(0))
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert "z" not in raw["c"]["L"][0]["M"]
    assert store.get(rid).body == b"\x00\x01"


def test_bodies_over_the_threshold_go_to_s3(backend):
    store = backend.store(inline_threshold=1024)
    rid = backend.id("threshold")
    assert store.put(rid, large(9, 1025), updated_at=at(0)).location != "inline"
    assert store.put(rid, large(9, 1024), updated_at=at(1)).location == "inline"


def test_multipart_upload_for_large_file_bodies(backend):
    store = backend.store(multipart_threshold=5 * 1024 * 1024)
    store.bodies.part_size = 5 * 1024 * 1024
    rid = backend.id("multipart")
    data = large(10, 11 * 1024 * 1024)
    result = store.put(rid, io.BytesIO(data), updated_at=at(0))
    assert result.content_hash == hashlib.sha256(data).hexdigest()
    assert store.get(rid).body == data


# --- 5. The request floor -------------------------------------------------------------------


@pytest.mark.parametrize("delta_history", [True, False], ids=["delta-history", "blind"])
def test_request_floor(backend, delta_history):
    """Requests per operation. With delta history (the default) a small put reads the item
    first (half a read unit, eventually consistent) and writes nothing for a duplicate or
    stale put, whose result must carry the version current now: a store that has
    seen the id's current version at or above the put's knows it cannot win, so its one read
    is strongly consistent (one read unit); a store that has not reads again, strongly
    consistent, when the first read says stale. Without delta history a small put is one
    blind UpdateItem, and a write that cannot win learns why from the refusal. Large puts
    and deletes are one blind write either way."""
    store = backend.store(delta_history=delta_history)
    unseen = backend.store(delta_history=delta_history)  # has not seen the id
    rid_small, rid_large = backend.id("floor-small"), backend.id("floor-large")
    meter = RequestMeter(backend.s3, backend.dynamodb)
    consistent: list[bool] = []  # each GetItem's ConsistentRead, in order

    def note(params, **_):
        consistent.append(params.get("ConsistentRead", False))

    backend.dynamodb.meta.events.register("before-parameter-build.dynamodb.GetItem", note)
    # A write whose condition fails learns why from the item DynamoDB returns with the error.
    # dynalite does not implement ReturnValuesOnConditionCheckFailure, so there the index reads
    # the item: exactly one GetItem more, and only when a condition failed.
    refused = {"UpdateItem": 1, "GetItem": 1} if backend.name == "dynalite" else {"UpdateItem": 1}
    small_write = {"GetItem": 1, "UpdateItem": 1} if delta_history else {"UpdateItem": 1}
    small_refused = {"GetItem": 1} if delta_history else refused
    unseen_refused = {"GetItem": 2} if delta_history else refused
    cases = [
        ("small put", lambda: store.put(rid_small, {"a": 1}, updated_at=at(1)), small_write),
        ("small update", lambda: store.put(rid_small, {"a": 2}, updated_at=at(2)), small_write),
        ("duplicate", lambda: store.put(rid_small, {"a": 2}, updated_at=at(2)), small_refused),
        ("stale", lambda: store.put(rid_small, {"a": 0}, updated_at=at(0)), small_refused),
        (
            "stale, unseen",
            lambda: unseen.put(rid_small, {"a": 0}, updated_at=at(0)),
            unseen_refused,
        ),
        ("small read", lambda: store.get(rid_small), {"GetItem": 1}),
        (
            "large put",
            lambda: store.put(rid_large, large(11), updated_at=at(1)),
            {"PutObject": 1, "UpdateItem": 1},
        ),
        ("large read", lambda: store.get(rid_large), {"GetItem": 1, "GetObject": 1}),
        ("delete", lambda: store.delete(rid_small, deleted_at=at(3)), {"UpdateItem": 1}),
    ]
    for name, operation, expected in cases:
        consistent.clear()
        with meter.measure() as counts:
            result = operation()
        assert dict(counts) == expected, name
        if name.startswith(("duplicate", "stale")):
            assert result.version == 2, name
            if delta_history:  # the read the result's version comes from is the last one
                assert consistent[-1] is True and consistent[0] is (name != "stale, unseen")
    backend.dynamodb.meta.events.unregister("before-parameter-build.dynamodb.GetItem", note)
    meter.close()


# --- 6. Ambiguous outcomes ------------------------------------------------------------------


def test_a_lost_response_followed_by_a_retry_still_reports_stored(backend):
    """Replays Iceberg #7151: our first UpdateItem succeeded but its response was lost; the
    retried request then fails its condition because of our own write."""
    store = backend.store()
    rid = backend.id("ambiguous")
    store.put(rid, {"v": 1}, updated_at=at(1))
    other = backend.new_client("dynamodb")
    landed: list[dict] = []

    def land_first_attempt(params, **_):
        if not landed:
            landed.append(params)
            other.update_item(**params)  # the "lost" first attempt reaches DynamoDB

    event = "provide-client-params.dynamodb.UpdateItem"
    backend.dynamodb.meta.events.register(event, land_first_attempt)
    try:
        result = store.put(rid, {"v": 2}, updated_at=at(2))
    finally:
        backend.dynamodb.meta.events.unregister(event, land_first_attempt)
    assert landed
    assert (result.outcome, result.version) == ("stored", 2)
    assert store.get(rid).json() == {"v": 2}


def test_a_lost_response_is_still_recognised_after_a_touch(backend):
    """A touch (the same content, later) moves `updated_at` only: the version keeps its
    writer's token, so that writer's retry after a lost response still finds its own write."""
    store = backend.store()
    rid = backend.id("touched-then-retried")
    entries = []
    write = store.index.put_planned

    def recording(id, entry, **options):
        entries.append((entry, options))
        return write(id, entry, **options)

    store.index.put_planned = recording
    store.put(rid, {"v": 0}, updated_at=at(0))
    stored = store.put(rid, {"v": 1}, updated_at=at(1))
    assert (stored.outcome, stored.version) == ("stored", 2)
    touch = store.put(rid, {"v": 1}, updated_at=at(3))
    assert (touch.outcome, touch.version) == ("unchanged", 2)
    (_, _), (writer, options), (toucher, touch_options) = entries

    # The response to the version 2 write was lost: its writer sends it again, after the touch.
    retry = write(rid, writer, **options)
    assert (retry.outcome, retry.version) == ("stored", 2)
    # And the touch's own retry is a duplicate of what it did.
    touch_retry = write(rid, toucher, **touch_options)
    assert (touch_retry.outcome, touch_retry.version) == ("unchanged", 2)
    record = store.get(rid)
    assert (record.json(), record.version, record.updated_at) == ({"v": 1}, 2, at(3))
    assert [h.version for h in store.history(rid)] == [1, 2]


# --- 8. Retention ---------------------------------------------------------------------------


def test_earlier_versions_stay_readable_within_retention(backend):
    store = backend.store(retention=Retention(versions=3))
    rid = backend.id("retained")
    for n in range(1, 10):
        body = large(n, 2000) if n % 2 else {"n": n}
        store.put(rid, body, updated_at=at(n))
    history = store.history(rid)
    assert [h.version for h in history] == [6, 7, 8, 9]
    assert store.get(rid, version=6).json() == {"n": 6}
    assert store.get(rid, version=7).body == large(7, 2000)
    with pytest.raises(RecordNotFound):
        store.get(rid, version=5)
    with pytest.raises(RecordNotFound):
        store.get(rid, version=10)
    # Trimming keeps the item bounded: never more than versions + trim_batch earlier entries.
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert len(raw["p"]["L"]) <= store.retention.max_held


def test_a_trim_of_several_entries_drops_exactly_the_oldest(backend):
    """A trim that finds more than one expired entry (two writers made versions between
    trims, say) drops the oldest ones and nothing else: each remaining version still reads
    its own body. (Ascending REMOVE paths dropped every other entry on dynalite.)"""
    store = backend.store(retention=Retention(versions=10))
    rid = backend.id("trim-several")
    for n in range(1, 7):
        store.put(rid, {"n": n}, updated_at=at(n))
    item = store.index.read(rid)
    assert (item.version, len(item.history)) == (6, 5)
    raw = store.index.read_for_write(rid, consistent=True)
    assert store.index.trim(rid, raw, 3)
    assert [h.version for h in store.history(rid)] == [4, 5, 6]
    assert [store.get(rid, version=v).json() for v in (4, 5, 6)] == [{"n": 4}, {"n": 5}, {"n": 6}]
    # Sent again (a lost response), it drops nothing more.
    assert not store.index.trim(rid, raw, 3)
    assert [h.version for h in store.history(rid)] == [4, 5, 6]


def test_time_based_retention(backend):
    clock = [1_000_000.0]
    store = backend.store(
        retention=Retention(versions=10, age=timedelta(hours=1)), clock=lambda: clock[0]
    )
    rid = backend.id("aged")
    store.put(rid, {"n": 1}, updated_at=at(1))
    clock[0] += 600
    store.put(rid, {"n": 2}, updated_at=at(2))
    assert [h.version for h in store.history(rid)] == [1, 2]
    clock[0] += 3601
    assert [h.version for h in store.history(rid)] == [2]
    with pytest.raises(RecordNotFound):
        store.get(rid, version=1)


def test_no_retention_keeps_only_the_current_version(backend):
    store = backend.store(retention=Retention(versions=0))
    rid = backend.id("latest-only")
    for n in range(3):
        store.put(rid, {"n": n}, updated_at=at(n))
    assert [h.version for h in store.history(rid)] == [3]
    raw = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    assert "p" not in raw


def test_history_of_an_unknown_id_raises(backend):
    with pytest.raises(RecordNotFound):
        backend.store().history(backend.id("nobody"))


# --- 9. Bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"id": ""}, InvalidId, "id"),
        ({"id": "x" * (MAX_ID_LENGTH + 1)}, InvalidId, "id"),
        ({"id": "tab\there"}, InvalidId, "id"),
        ({"id": "nul\x00"}, InvalidId, "id"),
        ({"id": "   "}, InvalidId, "id"),
        ({"id": "\ud800"}, InvalidId, "id"),
        ({"id": 42}, InvalidId, "id"),
        ({"updated_at": datetime(2026, 1, 1)}, InvalidTimestamp, "updated_at"),
        ({"updated_at": "2026-01-01T00:00:00"}, InvalidTimestamp, "updated_at"),
        ({"updated_at": "yesterday"}, InvalidTimestamp, "updated_at"),
        ({"updated_at": 1767225600}, InvalidTimestamp, "updated_at"),
        ({"updated_at": "2026-01-01"}, InvalidTimestamp, "updated_at"),
        ({"updated_at": "9999-01-01T00:00:00Z"}, InvalidTimestamp, "updated_at"),
        ({"record": {"x": float("nan")}}, InvalidRecord, "record"),
        ({"record": {"x": object()}}, InvalidRecord, "record"),
        ({"record": {"x": "\ud800"}}, InvalidRecord, "record"),
        ({"content_type": ""}, InvalidRecord, "content_type"),
    ],
)
def test_bad_input_raises_a_typed_error_naming_the_field_and_writes_nothing(
    backend, kwargs, error, field
):
    store = backend.store()
    meter = RequestMeter(backend.s3, backend.dynamodb)
    args = {"id": backend.id("valid"), "record": {"ok": True}, "updated_at": at(0)}
    args.update(kwargs)
    with meter.measure() as counts, pytest.raises(error) as raised:
        store.put(args.pop("id"), args.pop("record"), **args)
    meter.close()
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)
    assert field in str(raised.value)
    assert not counts


def test_deeply_nested_records_are_refused():
    from vhs.codec import canonical_json

    nested: list = []
    for _ in range(10_000):
        nested = [nested]
    with pytest.raises(InvalidRecord, match="record"):
        canonical_json(nested)


def test_bodies_over_the_maximum_size_are_refused(backend):
    store = backend.store(max_body_size=1000)
    with pytest.raises(BodyTooLarge) as raised:
        store.put(backend.id("huge"), b"x" * 1001, updated_at=at(0))
    assert raised.value.field == "record"
    with pytest.raises(RecordNotFound):
        store.get(backend.id("huge"))


# --- Deletes end: retention after a delete, and purges --------------------------------------

DAY = 86_400.0


def _bodies_of(backend, store, rid) -> set[str]:
    """The S3 keys of `rid`'s bodies."""
    response = backend.s3.list_objects_v2(
        Bucket=backend.bucket_name, Prefix=store.body_key(rid, "")
    )
    return {o["Key"] for o in response.get("Contents", [])}


def _collect(store, rid, now: float):
    """One collection of `rid`'s shard, by a collector whose clock reads `now`."""
    from vhs import keys
    from vhs.maintenance.gc import GarbageCollector

    return GarbageCollector(store, clock=lambda: now).run([keys.shard_of(rid)])


def _raw_item(backend, rid) -> dict:
    return backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    )["Item"]


def _wall_clock() -> list[float]:
    """A fake clock that starts at the real time: the collector's grace period is judged
    against S3's LastModified, so the clocks must agree at the start."""
    import time

    return [time.time()]


def test_a_deleted_records_versions_are_readable_for_the_window_then_collected(backend):
    clock = _wall_clock()
    store = backend.store(inline_threshold=256, clock=lambda: clock[0])
    assert store.retention.after_delete == timedelta(days=30)  # the documented default
    rid = backend.id("deleted-window")
    store.put(rid, large(71), updated_at=at(1))
    store.put(rid, large(72), updated_at=at(2))
    keys_before = _bodies_of(backend, store, rid)
    assert len(keys_before) == 2
    store.delete(rid, deleted_at=at(3))
    clock[0] += 29 * DAY
    assert store.get(rid, version=1).body == large(71)
    assert store.get(rid, version=2).body == large(72)
    assert _collect(store, rid, clock[0]).deleted == 0
    assert _bodies_of(backend, store, rid) == keys_before
    clock[0] += 2 * DAY  # 31 days after the delete
    for version in (1, 2):
        with pytest.raises(RecordNotFound):
            store.get(rid, version=version)
    assert [h.version for h in store.history(rid)] == [3]
    assert _collect(store, rid, clock[0]).deleted == 2
    assert _bodies_of(backend, store, rid) == set()
    # The tombstone stays: a late put is still stale.
    assert store.put(rid, {"late": True}, updated_at=at(3)).outcome == "stale"
    with pytest.raises(RecordNotFound):
        store.get(rid)


def test_retention_after_delete_is_a_store_option(backend):
    clock = [1_000_000.0]
    store = backend.store(
        retention=Retention(after_delete=timedelta(hours=1)), clock=lambda: clock[0]
    )
    rid = backend.id("deleted-hour")
    store.put(rid, {"n": 1}, updated_at=at(1))
    store.delete(rid, deleted_at=at(2))
    clock[0] += 3599
    assert store.get(rid, version=1).json() == {"n": 1}
    clock[0] += 2
    with pytest.raises(RecordNotFound):
        store.get(rid, version=1)
    # A put after the delete makes the record live again.
    store.put(rid, {"n": 3}, updated_at=at(3))
    assert store.get(rid).json() == {"n": 3}


def test_purge_drops_every_earlier_version_at_once_and_the_collection_empties_s3(backend):
    clock = _wall_clock()
    store = backend.store(inline_threshold=256, clock=lambda: clock[0])
    rid = backend.id("purged")
    store.put(rid, large(81), updated_at=at(1))
    store.put(rid, {"small": "inline"}, updated_at=at(2))
    store.put(rid, large(82), updated_at=at(3))
    assert len(_bodies_of(backend, store, rid)) == 2
    result = store.delete(rid, deleted_at=at(4), purge=True)
    assert (result.outcome, result.version, result.purged) == ("deleted", 4, True)
    for version in (1, 2, 3, 4):
        with pytest.raises(RecordNotFound):
            store.get(rid, version=version)
    assert [h.version for h in store.history(rid)] == [4]
    raw = _raw_item(backend, rid)
    assert "p" not in raw and len(raw["c"]["L"]) == 1
    assert raw["c"]["L"][0]["M"]["h"] == {"S": "~"}
    report = _collect(store, rid, clock[0] + 2 * 3600)  # past the grace period
    assert report.deleted == 2
    assert _bodies_of(backend, store, rid) == set()
    # The collector's condemnation stays while a writer may still rely on it (docs/gc.md)...
    assert set(_raw_item(backend, rid)) == {"id", "v", "c", "gcd", "gcs"}
    # ...and the next collection once it expired clears it, though the id has no object left.
    report = _collect(store, rid, clock[0] + 3 * 3600)
    assert (report.listed, report.markers_cleared) == (0, 1)
    # Only the tombstone remains of the record: its id, version and timestamp.
    raw = _raw_item(backend, rid)
    assert set(raw) == {"id", "v", "c"}
    assert raw["v"] == {"N": "4"}
    assert set(raw["c"]["L"][0]["M"]) == {"t", "h", "n", "w", "k", "x"}
    for late in (at(1), at(4)):
        assert store.put(rid, {"late": True}, updated_at=late).outcome == "stale"
    with pytest.raises(RecordNotFound):
        store.get(rid)


def test_purge_of_an_unknown_id_leaves_a_tombstone(backend):
    store = backend.store()
    rid = backend.id("purge-unknown")
    result = store.delete(rid, deleted_at=at(5), purge=True)
    assert (result.outcome, result.version, result.purged) == ("deleted", 1, True)
    assert store.put(rid, {"late": True}, updated_at=at(4)).outcome == "stale"
    assert [h.deleted for h in store.history(rid)] == [True]


@pytest.mark.parametrize("again", [0, 1], ids=["same-time", "later"])
def test_purge_of_an_already_deleted_id_still_drops_its_history(backend, again):
    store = backend.store()
    rid = backend.id(f"purge-again-{again}")
    store.put(rid, {"n": 1}, updated_at=at(1))
    store.delete(rid, deleted_at=at(2))
    assert store.get(rid, version=1).json() == {"n": 1}
    result = store.delete(rid, deleted_at=at(2 + again), purge=True)
    assert (result.outcome, result.version, result.purged) == ("unchanged", 2, True)
    with pytest.raises(RecordNotFound):
        store.get(rid, version=1)
    assert "p" not in _raw_item(backend, rid)
    assert store.put(rid, {"late": True}, updated_at=at(2 + again)).outcome == "stale"


def test_a_stale_purge_of_a_live_record_purges_nothing(backend):
    store = backend.store()
    rid = backend.id("purge-stale")
    store.put(rid, {"n": 1}, updated_at=at(1))
    store.put(rid, {"n": 2}, updated_at=at(5))
    result = store.delete(rid, deleted_at=at(3), purge=True)
    assert (result.outcome, result.purged) == ("stale", False)
    assert store.get(rid, version=1).json() == {"n": 1}


def serve_eventually_consistent_reads_from(client, snapshot: dict) -> None:
    """Make `client` answer every eventually consistent GetItem with `snapshot`, an item as an
    out-of-date replica may still hold it (strongly consistent reads are answered as they are)."""

    def note_consistency(params, context, **_):
        context["vhs_out_of_date"] = not params.get("ConsistentRead", False)

    def answer_out_of_date(parsed, context, **_):
        if context.get("vhs_out_of_date"):
            parsed["Item"] = snapshot

    client.meta.events.register("before-parameter-build.dynamodb.GetItem", note_consistency)
    client.meta.events.register("after-call.dynamodb.GetItem", answer_out_of_date)


def test_a_stale_put_after_an_out_of_date_read_reports_the_version_current_now(backend):
    """A small put reads the item first, eventually consistent; when that read is out of date
    and the put turns out stale, the result used to carry the version the read saw, not the
    version current when `put` returns."""
    store = backend.store()
    rid = backend.id("stale-after-old-read")
    store.put(rid, {"v": 1}, updated_at=at(10))
    store.put(rid, {"v": 2}, updated_at=at(30))
    snapshot = backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    )["Item"]
    assert store.put(rid, {"v": 3}, updated_at=at(40)).version == 3

    client = backend.new_client("dynamodb")
    serve_eventually_consistent_reads_from(client, snapshot)
    late = backend.store(dynamodb_client=client)
    stale = late.put(rid, {"v": 1.5}, updated_at=at(20))
    assert (stale.outcome, stale.version) == ("stale", 3)
    duplicate = late.put(rid, {"v": 2}, updated_at=at(30))
    assert (duplicate.outcome, duplicate.version) == ("stale", 3)
    assert store.get(rid).json() == {"v": 3}


# --- store.py's own pieces, on in-process moto ----------------------------------------------------


# The store's options, read errors, history entries and write path, on in-process moto (mutation
# testing found them unpinned: docs/reliability.md, "Mutation testing"): the constructor's checks
# and their messages, the version a RecordNotFound names, get's InvalidInput field, what history()
# reports for a delete, an inline version and an S3 version, an inline body that fails its hash, the
# warning of a trim that fails, a tombstone's size, history kept at `versions=1`, how long a
# condemned writer waits, PutResult's id and which ids the KnownCurrent cache forgets first.
#
# Failures are injected through the clients' own botocore event hooks; the store runs unchanged.
def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(backend: Backend, table: str | None = None, bucket: str | None = None, **options: Any):
    return VersionedHybridStore(
        backend.table_name if table is None else table,
        backend.bucket_name if bucket is None else bucket,
        StoreConfig(**options),
        s3_client=backend.s3,
        dynamodb_client=backend.dynamodb,
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
    up to the threshold plus 406 bytes by DynamoDB's rules (a 255-character content type, the
    numbers, names and map overheads, and a zstd body's codec with its dictionary's id),
    beside 1,046 bytes of the item's own at its largest, within index.codec.ITEM_BUDGET (313,570):
    1,046 + 8 * (38,659 + 406) = 313,566. Measured in the layout where it is largest (the text
    layout: an item may hold entries laid out so)."""
    assert held_size(largest_entry(38_659, MAX_BODY_SIZE)) == 38_659 + 406
    assert 1_046 + 8 * (38_659 + 406) <= ITEM_BUDGET < 1_046 + 8 * (38_660 + 406)
    assert build(inprocess, inline_threshold=38_659).inline_threshold == 38_659
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, inline_threshold=38_660)
    assert str(raised.value) == (
        "8 versions of up to 39066 bytes each (an inline body of up to 38660 bytes, a "
        "255-character content type) could outgrow the 313570 bytes a write may take of a "
        "DynamoDB item: lower retention.versions or inline_threshold"
    )


def test_the_item_budget_counts_retention(inprocess: Backend):
    """versions=10 holds 10 + 5 earlier entries and the current one:
    1,046 + 16 * (19,126 + 406) = 313,558."""
    assert 1_046 + 16 * (19_126 + 406) <= ITEM_BUDGET < 1_046 + 16 * (19_127 + 406)
    many = Retention(versions=10)
    assert build(inprocess, inline_threshold=19_126, retention=many).retention == many
    with pytest.raises(ConfigurationError) as raised:
        build(inprocess, inline_threshold=19_127, retention=many)
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
    _set_inline_body(inprocess, rid, packed_as_current(inprocess, rid, other))
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
    _set_inline_body(inprocess, rid, b"\x78\xbb not zlib at all")
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
    """versions=1 trims each expired entry (trim_batch 1). The trim, an UpdateItem of the
    history conditioned on its length (`:held`), is refused; the version is written all the
    same and the failure logged."""
    store = inprocess.store(retention=Retention(versions=1))
    rid = inprocess.id("untrimmed")
    refused: list[ClientError] = []

    def refuse_trims(params: dict[str, Any], **_: Any) -> None:
        if ":held" in params.get("ExpressionAttributeValues", {}):
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
