"""The item layout's own rules, checked directly and through `vhs verify` (mutation testing
found them unpinned: docs/reliability.md, "Mutation testing").

Damaged items are written behind the store's back, in the layout index/codec.py documents, so
each of `layout_problem`'s rules is seen to report its own reason, and a well-formed item none.
"""

from __future__ import annotations

from typing import Any

import pytest

from vhs.index.codec import (
    Condemnation,
    MalformedItem,
    condemnation_of,
    entry_from_dynamo,
    entry_to_dynamo,
    item_from_dynamo,
    layout_problem,
)
from vhs.keys import body_key, shard_of
from vhs.maintenance.gc import GarbageCollector
from vhs.model import Entry
from vhs.ordering import TOMBSTONE_HASH
from vhs_ops.admin.verify import verify
from vhs_testing.backends import Backend

T = "2026-11-01T00:00:00.000000Z"
H1, H2 = "1" * 64, "2" * 64


def entry(content_hash: str = H1, *, size: int = 10, **extra: Any) -> dict[str, Any]:
    """An entry map as index/codec.py lays it out (an S3 body unless `b` is given)."""
    attrs = {
        "t": {"S": T},
        "h": {"S": content_hash},
        "n": {"N": str(size)},
        "w": {"N": "1700000000"},
        "k": {"S": "writer"},
    }
    return {"M": attrs | extra}


def raw_item(id: str, version: int, current: dict, history: list[dict] = ()) -> dict[str, Any]:
    raw = {"id": {"S": id}, "v": {"N": str(version)}, "c": {"L": [current]}}
    if history:
        raw["p"] = {"L": list(history)}
    return raw


def problem_of(raw: dict[str, Any]) -> str | None:
    return layout_problem(raw, item_from_dynamo(raw))


def test_a_purge_flag_survives_the_round_trip_and_a_plain_delete_has_none():
    purge = Entry(T, TOMBSTONE_HASH, 0, 1700000000, "writer", purge=True)
    written = entry_to_dynamo(purge)
    assert written["M"]["x"] == {"BOOL": True}
    assert entry_from_dynamo(written).purge is True
    plain = entry_to_dynamo(Entry(T, TOMBSTONE_HASH, 0, 1700000000, "writer"))
    assert "x" not in plain["M"] and entry_from_dynamo(plain).purge is False


def test_a_purging_delete_stores_its_flag(inprocess: Backend):
    store = inprocess.store()
    store.put("p1", {"n": 1}, updated_at="2026-11-01T00:00:00Z")
    store.put("p1", {"n": 2}, updated_at="2026-11-02T00:00:00Z")
    assert store.delete("p1", deleted_at="2026-11-03T00:00:00Z", purge=True).purged
    raw = inprocess.dynamodb.get_item(TableName=store.table_name, Key={"id": {"S": "p1"}})
    (current,) = raw["Item"]["c"]["L"]
    assert current["M"]["x"] == {"BOOL": True}
    item = store.index.read("p1")
    assert item is not None and item.current.purge and item.history == ()
    assert problem_of(raw["Item"]) is None


def test_well_formed_items_have_no_problem():
    delete = entry(TOMBSTONE_HASH, size=0)
    purge = entry(TOMBSTONE_HASH, size=0, x={"BOOL": True})
    assert problem_of(raw_item("a", 1, entry())) is None
    assert problem_of(raw_item("a", 3, delete, [entry(H1), entry(H2)])) is None
    assert problem_of(raw_item("a", 7, purge)) is None  # earlier versions trimmed away
    assert problem_of({"id": {"S": "a"}, "gcd": {"N": "1.7e9"}, "gcs": {"SS": ["0" * 16]}}) is None


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        (
            raw_item("a", 2, entry(H2), [entry(H1), entry(H1)]),
            "v",
            "version 2 is lower than the 3 entries held",
        ),
        (raw_item("a", 1, entry("not-a-digest")), "c[0].h", "not a sha256"),
        (raw_item("a", 2, entry(H2), [entry("A" * 64)]), "p[0].h", "not a sha256"),
        (raw_item("a", 1, entry(size=-1)), "c[0].n", "-1 is out of range"),
        (
            raw_item("a", 2, entry(TOMBSTONE_HASH, size=0, b={"B": b"{}"}), [entry()]),
            "c[0].b",
            "a delete with a body",
        ),
        (raw_item("a", 1, entry(x={"BOOL": True})), "c[0].x", "a purge flag on a put"),
        (raw_item("a", 1, entry()) | {"id": {"N": "1"}}, "id", "expected a string, got {'N'"),
        (raw_item("a", 1, entry(t={"S": 5})), "c[0].t", "expected a string, got {'S': 5}"),
        (raw_item("a", 1, entry(k={"B": b"w"})), "c[0].k", "expected a string, got {'B': b'w'}"),
    ],
)
def test_each_damaged_field_is_named(raw: dict[str, Any], field: str, reason: str):
    with pytest.raises(MalformedItem) as raised:
        item_from_dynamo(raw)
    assert raised.value.field == field and raised.value.reason.startswith(reason)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"id": {"S": "a"}, "v": {"N": "3"}, "gcd": {"N": "1.7e9"}}, "no current entry, but has v"),
        ({"id": {"S": "a"}, "p": {"L": []}, "v": {"N": "3"}}, "no current entry, but has p, v"),
    ],
)
def test_stray_attributes_without_a_current_entry_are_named(raw: dict[str, Any], reason: str):
    assert problem_of(raw) == reason


def test_verify_reports_each_damaged_item_with_its_reason(inprocess: Backend):
    store = inprocess.store()
    store.put("fine", {"n": 1}, updated_at="2026-11-01T00:00:00Z")
    damaged = {
        "short": raw_item("short", 1, entry(H2), [entry(H1)]),
        "purged-put": raw_item("purged-put", 1, entry(x={"BOOL": True})),
        "stray": {"id": {"S": "stray"}, "v": {"N": "2"}},
    }
    for raw in damaged.values():
        inprocess.dynamodb.put_item(TableName=store.table_name, Item=raw)
    report = verify(store)
    details = {f.id: (str(f.kind), f.detail) for f in report.findings}
    assert details == {
        "short": ("unparseable", "damaged: v: version 1 is lower than the 2 entries held"),
        "purged-put": ("unparseable", "damaged: c[0].x: a purge flag on a put"),
        "stray": ("unparseable", "no current entry, but has v"),
    }


def test_a_condemnation_without_its_bodies_condemns_none():
    """`gcd` without `gcs`: not how the collector writes it (both at once), but an item
    damaged that way is read as a condemnation of nothing rather than failing."""
    assert condemnation_of({"id": {"S": "a"}, "gcd": {"N": "1700000000.5"}}) == Condemnation(
        1700000000.5, frozenset()
    )
    assert condemnation_of({"id": {"S": "a"}}) is None


def test_the_collector_goes_on_past_a_condemnation_without_its_bodies(inprocess: Backend):
    store = inprocess.store()
    rid = "half-marked"
    orphan = body_key(store.prefix, rid, H1)
    inprocess.s3.put_object(Bucket=inprocess.bucket_name, Key=orphan, Body=b"orphan")
    inprocess.dynamodb.put_item(
        TableName=store.table_name, Item={"id": {"S": rid}, "gcd": {"N": "1700000000"}}
    )
    report = GarbageCollector(store, clock=lambda: 1800000000.0).run([shard_of(rid)])
    assert (report.orphaned, report.failed, report.failed_shards) == (1, 0, [])
