"""The index's purge, trim, batched reads and read-before-write retry, on in-process moto
(mutation testing found them unpinned: docs/reliability.md, "Mutation testing"): a purge marks
the tombstone and refuses a live record or one never written (whose refusal returns no item, so
the index reads it), a trim drops exactly the entries asked for (none for a count of 0),
`read_raw_many` follows `UnprocessedKeys` until every key is read, and a write decided on a read
that the item then overtakes still writes its history as deltas.

Failures are injected through the clients' own botocore event hooks; the index runs unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

from vhs import Retention
from vhs.bodies.packing import DELTA
from vhs.index.table import DynamoIndex
from vhs_testing.backends import Backend
from vhs_testing.records import at


def record(edition: int) -> dict[str, Any]:
    """A small JSON record (inline) whose editions differ in a field or two."""
    return {
        "title": "Moby-Dick; or, The Whale",
        "publisher": "Harper & Brothers",
        "subjects": ["Whaling -- Fiction", "Sea stories", "Ahab, Captain (Fictitious character)"],
        "notes": [f"Holding {n}: shelfmark PR{1000 + n}.M4" for n in range(12)],
        "edition": edition,
    }


def raw_item(backend: Backend, id: str) -> dict[str, Any]:
    return backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": id}})["Item"]


# --- purge ------------------------------------------------------------------------------------


def test_a_purge_marks_the_tombstone_and_refuses_a_live_record(inprocess):
    store = inprocess.store(retention=Retention(versions=10))
    deleted, live = inprocess.id("deleted"), inprocess.id("live")
    for edition in (1, 2):
        store.put(deleted, record(edition), updated_at=at(edition))
    store.delete(deleted, deleted_at=at(3))
    store.put(live, record(1), updated_at=at(1))

    # A live record is not purged: the condition refuses, and purge says so with None.
    assert store.index.purge(live) is None
    assert store.get(live).json() == record(1)
    # Nor one never written: the refusal returns no item, so the index reads it (strongly
    # consistent, as on an emulator without ReturnValuesOnConditionCheckFailure).
    assert store.index.purge(inprocess.id("never-written")) is None

    item = store.index.purge(deleted)
    assert item is not None and item.current.deleted and item.current.purge is True
    assert item.history == ()
    assert raw_item(inprocess, deleted)["c"]["L"][0]["M"]["x"] == {"BOOL": True}
    assert store.index.read(deleted).current.purge is True


def test_a_purging_delete_of_a_deleted_record_flags_its_tombstone(inprocess):
    store = inprocess.store(retention=Retention(versions=10))
    rid = inprocess.id("deleted-then-purged")
    for edition in (1, 2):
        store.put(rid, record(edition), updated_at=at(edition))
    store.delete(rid, deleted_at=at(3))
    # The same deleted_at: ordering says unchanged, so the store purges with index.purge.
    result = store.delete(rid, deleted_at=at(3), purge=True)
    assert (result.outcome, result.purged) == ("unchanged", True)
    assert store.index.read(rid).current.purge is True


# --- trim -------------------------------------------------------------------------------------


def test_a_trim_drops_exactly_the_count_asked_for(inprocess):
    store = inprocess.store(retention=Retention(versions=10))
    rid = inprocess.id("trimmed")
    for edition in range(1, 5):
        store.put(rid, record(edition), updated_at=at(edition))
    item = store.index.read(rid)
    assert (item.version, len(item.history)) == (4, 3)

    raw = store.index.read_for_write(rid, consistent=True)
    assert store.index.trim(rid, raw, 0) is False  # nothing to drop: no request, no change
    assert len(store.index.read(rid).history) == 3
    seen_before = {**raw, "v": {"N": "3"}}
    assert store.index.trim(rid, seen_before, 1) is False  # not at the version the caller saw
    assert len(store.index.read(rid).history) == 3

    assert store.index.trim(rid, raw, 1) is True
    assert [h.version for h in store.history(rid)] == [2, 3, 4]
    assert store.index.trim(rid, raw, 1) is False  # resent: already done, not one more
    assert [store.get(rid, version=v).json() for v in (2, 3, 4)] == [record(v) for v in (2, 3, 4)]


# --- read_raw_many ----------------------------------------------------------------------------


class Unprocessed:
    """Answers BatchGetItem as a throttled DynamoDB may: the first response reads nothing (and
    names no table in `Responses`), the second reads one key; each returns the rest as
    `UnprocessedKeys`. Later responses are left as they are."""

    def __init__(self, client: Any, table: str) -> None:
        self.client, self.table, self.calls = client, table, 0
        client.meta.events.register("after-call.dynamodb.BatchGetItem", self)

    def __call__(self, parsed: dict, **_: Any) -> None:
        self.calls += 1
        items = parsed.get("Responses", {}).get(self.table, [])
        if self.calls == 1:
            kept, postponed = [], items
            parsed["Responses"] = {}
        elif self.calls == 2:
            kept, postponed = items[:1], items[1:]
            parsed["Responses"] = {self.table: kept}
        else:
            return
        if postponed:
            keys = [{"id": raw["id"]} for raw in postponed]
            parsed["UnprocessedKeys"] = {self.table: {"Keys": keys, "ConsistentRead": True}}

    def close(self) -> None:
        self.client.meta.events.unregister("after-call.dynamodb.BatchGetItem", self)


def test_read_raw_many_reads_unprocessed_keys_until_none_are_left(inprocess):
    store = inprocess.store()
    ids = [inprocess.id(f"batch-{n}") for n in range(5)]
    for n, rid in enumerate(ids):
        store.put(rid, record(n), updated_at=at(n))
    client = inprocess.new_client("dynamodb")
    index = DynamoIndex(client, inprocess.table_name)
    hook = Unprocessed(client, inprocess.table_name)
    try:
        found = index.read_raw_many([*ids, inprocess.id("absent")])
    finally:
        hook.close()
    assert hook.calls == 3
    assert sorted(found) == sorted(ids)
    assert all(found[rid]["id"] == {"S": rid} for rid in ids)


# --- the read before the write ----------------------------------------------------------------


def test_a_write_overtaken_after_its_read_still_keeps_its_history_as_deltas(inprocess):
    """The write is conditional on the item as read; refused, it decides again against the
    item the refusal returned, still through the history plan: the superseded entry becomes
    a delta, not the whole body an unplanned write would move into the history."""
    store = inprocess.store()
    rid = inprocess.id("overtaken")
    store.put(rid, record(1), updated_at=at(1))
    old = copy.deepcopy(raw_item(inprocess, rid))
    store.put(rid, record(2), updated_at=at(2))
    assert [e.codec for e in store.index.read(rid).history] == [DELTA]

    replayed = []

    def replay_old(parsed: dict, **_: Any) -> None:
        if not replayed:
            replayed.append(True)
            parsed["Item"] = copy.deepcopy(old)

    client = store.index.dynamodb
    client.meta.events.register("after-call.dynamodb.GetItem", replay_old)
    try:
        result = store.put(rid, record(3), updated_at=at(3))
    finally:
        client.meta.events.unregister("after-call.dynamodb.GetItem", replay_old)
    assert replayed and (result.outcome, result.version) == ("stored", 3)
    assert [e.codec for e in store.index.read(rid).history] == [DELTA, DELTA]
    assert [store.get(rid, version=v).json() for v in (1, 2, 3)] == [record(v) for v in (1, 2, 3)]
