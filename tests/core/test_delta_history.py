"""Delta history: earlier inline versions kept as zlib deltas against their successor
(vhs/history/stored_deltas.py, docs/design.md "History: the arithmetic").

What must hold, whatever the encoding: every retained version reads back exactly; a write
decided on an eventually consistent read never loses or reorders anything (the read may be
stale, or the item may change between the read and the write); damage is reported, never
read as data; and a hot id with a long chain costs the same per update as a short one.
"""

from __future__ import annotations

import copy
import json
import random
import zlib
from datetime import timedelta
from typing import Any

import pytest

from vhs import BodyHashMismatch, RecordNotFound, Retention
from vhs.bodies.packing import DELTA, compress
from vhs.codec import sha256_hex
from vhs.errors import ConfigurationError
from vhs.history.stored_deltas import inline_bodies, inline_body, supersede
from vhs.model import Entry
from vhs.settings import DELTA_HISTORY, StoreSettings
from vhs.store import VersionedHybridStore
from vhs_ops.admin.findings import FindingKind
from vhs_ops.admin.verify import verify
from vhs_ops.local.metering import RequestMeter
from vhs_testing.records import at


def catalogue_record(edition: int) -> dict[str, Any]:
    """A catalogue record (about 1.2 KB of JSON) whose editions differ in a field or two, as
    a source system's daily re-publication does."""
    return {
        "id": "b1234567",
        "title": "Moby-Dick; or, The Whale",
        "contributors": [{"name": "Melville, Herman", "role": "author", "dates": "1819-1891"}],
        "publisher": "Harper & Brothers",
        "subjects": ["Whaling -- Fiction", "Sea stories", "Ahab, Captain (Fictitious character)"],
        "physical": f"{edition} v. ; 24 cm",
        "notes": [f"Edition {edition}.", "First published in London as The Whale."]
        + [f"Holding {n}: shelfmark PR{1000 + n}.M4" for n in range(edition % 5 + 8)],
        "edition": edition,
        "modified": f"2026-01-{1 + edition % 28:02d}T00:00:00Z",
    }


def raw_item(backend: Any, id: str) -> dict[str, Any]:
    return backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": id}})["Item"]


def stored_history_bytes(backend: Any, id: str) -> int:
    return sum(
        len(entry["M"]["b"]["B"]) for entry in raw_item(backend, id).get("p", {}).get("L", [])
    )


# --- every version reads back ----------------------------------------------------------------


def test_catalogue_edits_are_kept_as_small_deltas_and_every_version_reads_back(backend):
    deltas = backend.store(retention=Retention(versions=10))
    whole = backend.store(retention=Retention(versions=10), delta_history=False)
    rid_delta, rid_whole = backend.id("deltas"), backend.id("whole")
    for edition in range(1, 9):
        deltas.put(rid_delta, catalogue_record(edition), updated_at=at(edition))
        whole.put(rid_whole, catalogue_record(edition), updated_at=at(edition))

    for edition in range(1, 9):
        assert deltas.get(rid_delta, version=edition).json() == catalogue_record(edition)
    assert [h.version for h in deltas.history(rid_delta)] == list(range(1, 9))
    item = deltas.index.read(rid_delta)
    assert [entry.codec for entry in item.history] == [DELTA] * 7
    # Each earlier version costs a small fraction of its compressed body.
    compressed = len(zlib.compress(json.dumps(catalogue_record(4)).encode(), 9))
    assert all(len(entry.inline) < compressed / 4 for entry in item.history)
    assert stored_history_bytes(backend, rid_delta) < stored_history_bytes(backend, rid_whole) / 4
    # The same versions as the store that keeps them whole.
    assert [(h.version, h.content_hash, h.size) for h in deltas.history(rid_delta)] == [
        (h.version, h.content_hash, h.size) for h in whole.history(rid_whole)
    ]


def test_chains_end_at_large_bodies_and_deletes(backend):
    """A body is stored against its successor only when that successor is inline: a large
    body or a delete between two small ones leaves the earlier one whole."""
    store = backend.store(retention=Retention(versions=10))
    rid = backend.id("mixed-chain")
    large = random.Random(2).randbytes(16 * 1024)  # incompressible: an S3 body
    writes = [
        ("put", catalogue_record(1)),
        ("put", large),
        ("put", catalogue_record(3)),
        ("put", catalogue_record(4)),
        ("delete", None),
        ("put", catalogue_record(6)),
        ("put", catalogue_record(7)),
    ]
    for minute, (kind, body) in enumerate(writes, start=1):
        if kind == "put":
            store.put(rid, body, updated_at=at(minute))
        else:
            store.delete(rid, deleted_at=at(minute))
    codecs = [entry.codec for entry in store.index.read(rid).history]
    assert codecs == ["zlib", None, DELTA, "zlib", None, DELTA]
    for version, (kind, body) in enumerate(writes, start=1):
        if kind == "delete":
            with pytest.raises(RecordNotFound):
                store.get(rid, version=version)
        elif isinstance(body, bytes):
            assert store.get(rid, version=version).body == body
        else:
            assert store.get(rid, version=version).json() == body


def test_tiny_bodies_are_kept_whole_when_a_delta_would_not_be_smaller(backend):
    store = backend.store()
    rid = backend.id("tiny")
    store.put(rid, {"a": 1}, updated_at=at(1))
    store.put(rid, {"a": 2}, updated_at=at(2))
    assert [entry.codec for entry in store.index.read(rid).history] == [None]
    assert store.get(rid, version=1).json() == {"a": 1}


# --- scale: one hot id ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_hot_id_costs_the_same_per_update_at_its_thousandth_version(inprocess):
    """1,000 versions of one id: every update makes the same two requests (the read and the
    write, trims folded in), and the history it is billed on is no larger at the thousandth
    version than at the tenth."""
    store = inprocess.store(retention=Retention(versions=5))
    rid = inprocess.id("hot")
    meter = RequestMeter(inprocess.s3, inprocess.dynamodb)
    counts, sizes = [], {}
    for edition in range(1, 1001):
        with meter.measure() as calls:
            store.put(rid, catalogue_record(edition), updated_at=at(edition))
        counts.append(dict(calls))
        if edition in (10, 1000):
            sizes[edition] = stored_history_bytes(inprocess, rid)
    meter.close()
    assert all(count == {"GetItem": 1, "UpdateItem": 1} for count in counts)
    assert sizes[1000] <= sizes[10] * 1.1
    assert len(store.index.read(rid).history) == 5
    assert [h.version for h in store.history(rid)] == list(range(995, 1001))
    assert store.get(rid, version=995).json() == catalogue_record(995)
    assert verify(store, ids=[rid]).ok


def test_a_chain_of_thousands_of_deltas_decodes_every_version():
    """The codec alone (no item-size limit applies): 3,000 versions, each stored against the
    next, read back one by one and in the one pass `vhs verify` makes."""
    bodies = [json.dumps(catalogue_record(n)).encode() for n in range(1, 3001)]
    versions: list[tuple[int, Entry]] = []
    for number, body in enumerate(bodies, start=1):
        packed, codec, _ = compress(body)
        entry = Entry(
            updated_at=str(number),
            content_hash=sha256_hex(body),
            size=len(body),
            written_at=number,
            token=str(number),
            inline=packed,
            codec=codec,
        )
        if versions:
            previous_number, previous = versions[-1]
            versions[-1] = (
                previous_number,
                supersede(previous, bodies[previous_number - 1], entry, body),
            )
        versions.append((number, entry))
    assert sum(entry.codec == DELTA for _, entry in versions) == 2999
    for number in (1, 2, 1500, 2999, 3000):
        assert inline_body(versions, number) == bodies[number - 1]
    decoded = dict(inline_bodies(versions))
    assert [decoded[number] for number in range(1, 3001)] == bodies


# --- the read before the write ----------------------------------------------------------------


class OnRead:
    """Runs `action` once, after the writer's GetItem of an item and before its write: the
    window in which a write decided on a read can be overtaken."""

    def __init__(self, client: Any, action: Any) -> None:
        self.client, self.action, self.ran = client, action, False
        client.meta.events.register("after-call.dynamodb.GetItem", self)

    def __call__(self, parsed: dict, **_: Any) -> None:
        if not self.ran:
            self.ran = True
            self.action(parsed)

    def close(self) -> None:
        self.client.meta.events.unregister("after-call.dynamodb.GetItem", self)


def test_a_stale_read_costs_a_retry_and_nothing_else(backend):
    """An eventually consistent read may return the item as it was: the write is conditional
    on the item as read, so it is refused, and the item the refusal returns is the basis of
    the next attempt."""
    store = backend.store()
    rid = backend.id("stale-read")
    store.put(rid, catalogue_record(1), updated_at=at(1))
    old = copy.deepcopy(raw_item(backend, rid))
    store.put(rid, catalogue_record(2), updated_at=at(2))

    def replay_old(parsed: dict) -> None:
        parsed["Item"] = copy.deepcopy(old)

    hook = OnRead(store.index.dynamodb, replay_old)
    try:
        result = store.put(rid, catalogue_record(3), updated_at=at(3))
    finally:
        hook.close()
    assert hook.ran and (result.outcome, result.version) == ("stored", 3)
    assert [store.get(rid, version=v).json() for v in (1, 2, 3)] == [
        catalogue_record(v) for v in (1, 2, 3)
    ]


def test_a_read_that_has_not_seen_the_create_costs_a_retry(backend):
    store = backend.store()
    rid = backend.id("not-yet-visible")
    store.put(rid, catalogue_record(1), updated_at=at(1))

    def not_found(parsed: dict) -> None:
        parsed.pop("Item", None)

    hook = OnRead(store.index.dynamodb, not_found)
    try:
        result = store.put(rid, catalogue_record(2), updated_at=at(2))
    finally:
        hook.close()
    assert hook.ran and (result.outcome, result.version) == ("stored", 2)
    assert store.get(rid, version=1).json() == catalogue_record(1)


@pytest.mark.parametrize("ours_is_newer", [True, False], ids=["ours-newer", "theirs-newer"])
def test_a_write_between_our_read_and_our_write(backend, ours_is_newer):
    store, other = backend.store(), backend.store()
    rid = backend.id("overtaken")
    store.put(rid, catalogue_record(1), updated_at=at(1))
    ours, theirs = (3, 2) if ours_is_newer else (2, 3)
    hook = OnRead(
        store.index.dynamodb,
        lambda _: other.put(rid, catalogue_record(theirs), updated_at=at(theirs)),
    )
    try:
        result = store.put(rid, catalogue_record(ours), updated_at=at(ours))
    finally:
        hook.close()
    assert hook.ran
    assert result.outcome == ("stored" if ours_is_newer else "stale")
    assert store.get(rid).json() == catalogue_record(3)
    expected = [1, 2, 3] if ours_is_newer else [1, 3]
    assert [store.get(rid, version=v).json()["edition"] for v in range(1, 4)[: len(expected)]] == (
        expected
    )


def test_a_touch_between_our_read_and_our_write(backend):
    """The same content re-sent later moves `updated_at` only: the write decided on the item
    before the touch must not undo it."""
    store, other = backend.store(), backend.store()
    rid = backend.id("touched-meanwhile")
    store.put(rid, catalogue_record(1), updated_at=at(1))
    hook = OnRead(
        store.index.dynamodb,
        lambda _: other.put(rid, catalogue_record(1), updated_at=at(5)),
    )
    try:
        result = store.put(rid, catalogue_record(2), updated_at=at(3))
    finally:
        hook.close()
    assert hook.ran and result.outcome == "stale"  # at(3) is older than the touch
    assert store.get(rid).json() == catalogue_record(1)
    assert store.get(rid).updated_at == at(5)


def test_a_purge_between_our_read_and_our_write_stays_a_purge(backend):
    store, other = backend.store(), backend.store()
    rid = backend.id("purged-meanwhile")
    for edition in (1, 2):
        store.put(rid, catalogue_record(edition), updated_at=at(edition))
    hook = OnRead(
        store.index.dynamodb,
        lambda _: other.delete(rid, deleted_at=at(3), purge=True),
    )
    try:
        result = store.put(rid, catalogue_record(4), updated_at=at(4))
    finally:
        hook.close()
    assert hook.ran and (result.outcome, result.version) == ("stored", 4)
    # The versions the purge dropped do not come back with the history read before it.
    assert [h.version for h in store.history(rid)] == [3, 4]
    for version in (1, 2):
        with pytest.raises(RecordNotFound):
            store.get(rid, version=version)


def test_a_trim_between_our_read_and_our_write(backend):
    store = backend.store(retention=Retention(versions=4))
    rid = backend.id("trimmed-meanwhile")
    for edition in range(1, 6):
        store.put(rid, catalogue_record(edition), updated_at=at(edition))
    raw = store.index.read_for_write(rid, consistent=True)
    hook = OnRead(store.index.dynamodb, lambda _: store.index.trim(rid, raw, 1))
    try:
        result = store.put(rid, catalogue_record(6), updated_at=at(6))
    finally:
        hook.close()
    assert hook.ran and (result.outcome, result.version) == ("stored", 6)
    assert [h.version for h in store.history(rid)] == [2, 3, 4, 5, 6]
    for version in range(3, 7):
        assert store.get(rid, version=version).json() == catalogue_record(version)


def test_a_put_after_an_expired_delete_does_not_bring_back_what_it_dropped(backend):
    """Once a delete's `after_delete` has passed, its earlier versions are gone (and their
    bodies collectable); a later put that makes the record live again must not make them
    readable again from the entries still held."""
    clock = [1_000_000.0]
    store = backend.store(
        retention=Retention(versions=10, after_delete=timedelta(days=1)), clock=lambda: clock[0]
    )
    rid = backend.id("resurrected")
    store.put(rid, catalogue_record(1), updated_at=at(1))
    store.put(rid, catalogue_record(2), updated_at=at(2))
    store.delete(rid, deleted_at=at(3))
    clock[0] += 2 * 86_400
    store.put(rid, catalogue_record(4), updated_at=at(4))
    assert [h.version for h in store.history(rid)] == [3, 4]
    with pytest.raises(RecordNotFound):
        store.get(rid, version=2)


# --- damage -----------------------------------------------------------------------------------


def overwrite_inline_body(backend: Any, id: str, entry: str, data: bytes) -> None:
    """Damage the item as a bad actor or a bug could: the inline body of `entry` (a path such
    as c[0] or p[1]) replaced, its hash left as it was."""
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": id}},
        UpdateExpression=f"SET {entry}.b = :b",
        ExpressionAttributeValues={":b": {"B": data}},
    )


def test_a_damaged_successor_is_a_typed_error_and_one_finding(backend):
    store = backend.store()
    rid = backend.id("damaged")
    for edition in (1, 2, 3):
        store.put(rid, catalogue_record(edition), updated_at=at(edition))
    overwrite_inline_body(backend, rid, "c[0]", zlib.compress(b'{"title":"Billy Budd"}'))
    for version in (1, 2, 3):
        with pytest.raises(BodyHashMismatch):
            store.get(rid, version=version)
    findings = verify(store, ids=[rid]).findings
    assert [(f.kind, f.version, f.versions) for f in findings] == [
        (FindingKind.HASH_MISMATCH, 3, (1, 2, 3))
    ]


def test_a_damaged_delta_spoils_itself_and_the_versions_stored_against_it(backend):
    """Versions 1 and 2 are deltas, each against the next: damage to version 2 makes it and
    version 1 unreadable (typed errors, one finding), and leaves version 3 as it was."""
    store = backend.store()
    rid = backend.id("damaged-delta")
    for edition in (1, 2, 3):
        store.put(rid, catalogue_record(edition), updated_at=at(edition))
    overwrite_inline_body(backend, rid, "p[1]", b"\x78\xbb not a delta")
    for version in (1, 2):
        with pytest.raises(BodyHashMismatch):
            store.get(rid, version=version)
    assert store.get(rid).json() == catalogue_record(3)
    findings = verify(store, ids=[rid]).findings
    assert [(f.kind, f.version, f.versions) for f in findings] == [
        (FindingKind.HASH_MISMATCH, 2, (1, 2))
    ]


# --- the setting ------------------------------------------------------------------------------


def test_the_setting_turns_delta_history_off(inprocess):
    environ = {"VHS_TABLE_NAME": inprocess.table_name, "VHS_BUCKET_NAME": inprocess.bucket_name}
    on = StoreSettings.from_env(environ)
    off = StoreSettings.from_env({**environ, DELTA_HISTORY: "false"})
    assert on.delta_history is None and off.delta_history is False
    assert off.environment()[DELTA_HISTORY] == "false" and DELTA_HISTORY not in on.environment()
    clients = {"s3_client": inprocess.s3, "dynamodb_client": inprocess.dynamodb}
    assert VersionedHybridStore.from_settings(on, **clients).delta_history is True
    store = VersionedHybridStore.from_settings(off, **clients)
    rid = inprocess.id("off")
    for edition in (1, 2):
        store.put(rid, catalogue_record(edition), updated_at=at(edition))
    assert [entry.codec for entry in store.index.read(rid).history] == ["zlib"]
    with pytest.raises(ConfigurationError, match=DELTA_HISTORY):
        StoreSettings.from_env({**environ, DELTA_HISTORY: "sometimes"})
