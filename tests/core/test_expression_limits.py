"""DynamoDB's expression limits as a tested property (docs/design.md, "Expression
limits"): every expression the store, the collector, `vhs migrate` and `vhs
reindex` send stays within 4 KB and 300 operators or functions (vhs_testing.expression_limits), at
the extreme configurations the store's constructor accepts.

* each builder of index/updates.py, driven directly at its extremes (the longest history a trim
  meets, a version with every part uploaded anew, every branch of the ordering conditions and
  the collector's condemnation);
* every request a store at the largest accepted retention makes, with the collector, a
  migration and a reindex, recorded as botocore builds it;
* 2,000 puts at the largest accepted retention on in-process moto, moto's server and dynalite:
  every request within the limits, every item DynamoDB's size rules allow (index.size.item_size).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from vhs.bodies.parts import MAX_PARTS
from vhs.changes.publish import ChangePublisher
from vhs.changes.reindex import Selection, Target, reindex_segment
from vhs.errors import ConfigurationError
from vhs.index import updates
from vhs.index.codec import ITEM_BUDGET, MAX_CONDEMNED, entry_to_dynamo
from vhs.index.layouts import Layout
from vhs.index.size import item_size
from vhs.keys import shard_of
from vhs.maintenance.gc import GarbageCollector
from vhs.model import Entry
from vhs.ordering import TOMBSTONE_HASH
from vhs.retention import Retention
from vhs.store import VersionedHybridStore
from vhs.store_config import StoreConfig
from vhs_ops.admin.migrate import migrate
from vhs_testing.backends import Backend
from vhs_testing.expression_limits import (
    MAX_EXPRESSION_BYTES,
    MAX_OPERATORS,
    Measure,
    measure,
    problems,
)

T = "2026-11-01T09:00:00.000000Z"


def largest_retention(inline_threshold: int = 0) -> int:
    """The most versions the store's constructor accepts at `inline_threshold`."""
    low, high = 0, 10_000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            VersionedHybridStore(
                "t",
                "b",
                StoreConfig(
                    inline_threshold=inline_threshold, retention=Retention(versions=middle)
                ),
                s3_client=object(),
                dynamodb_client=object(),
            )
            low = middle
        except ConfigurationError:
            high = middle - 1
    return low


LARGEST = largest_retention()


class Recorded:
    """Every DynamoDB request a client builds (its parameters), and every item an UpdateItem
    or GetItem answers with."""

    def __init__(self, *clients: Any) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.items: list[dict[str, Any]] = []
        for client in {id(c): c for c in clients}.values():
            client.meta.events.register("before-parameter-build.dynamodb", self._request)
            client.meta.events.register("after-call.dynamodb", self._answer)

    def _request(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.requests.append((model.name, dict(params)))

    def _answer(self, parsed: dict[str, Any], **_: Any) -> None:
        for key in ("Attributes", "Item"):
            if parsed.get(key):
                self.items.append(parsed[key])

    def problems(self) -> list[tuple[str, str]]:
        return [(name, found) for name, params in self.requests for found in problems(params)]


# --- the measure -------------------------------------------------------------------------------


def test_the_measure_counts_bytes_and_every_operator_and_function():
    assert measure("#a = :b") == Measure(7, 1)
    assert measure("attribute_not_exists(#c) OR (#c[0].#t < :t AND #h <> :h)").operators == 5
    update = "SET #p = list_append(if_not_exists(#p, :e), :x), #c = :c ADD #v :one"
    assert measure(update).operators == 4  # two functions, and SET's two "="
    assert measure("SET #a = :v1 + :v2 - :v3").operators == 3  # "=" counted: an upper bound
    assert measure("NOT contains(#gs, :gh) AND size(#p) >= :n").operators == 5
    assert measure("#x-y").operators == 1 and measure("#x_y :IN_1").operators == 0
    assert measure("é").length == 2  # bytes, as DynamoDB counts them
    assert problems({"ConditionExpression": " AND ".join(["#a = :b"] * 150)}) == []  # 299
    assert problems({"ConditionExpression": " AND ".join(["#a = :b"] * 151)})  # 301
    assert problems({"ConditionExpression": "#a = :" + "b" * (4096 - 6)}) == []  # 4,096 bytes
    assert problems({"ConditionExpression": "#a = :" + "b" * (4097 - 6)})
    assert problems({"ExpressionAttributeValues": {":" + "v" * 255: {"N": "1"}}})
    assert problems({"UpdateExpression": "SET #a = :b", "ConditionExpression": "#a = :b"}) == []


# --- every builder at its extremes ------------------------------------------------------------


def _entry(content_hash: str = "f" * 64, content_type: str | None = "x/y", **more: Any) -> Entry:
    return Entry(T, content_hash, 10, 1, "token", content_type=content_type, **more)


def _raw(held: int, current: Entry, layout: Layout = Layout.COMPACT) -> dict[str, Any]:
    raw = {
        "id": {"S": "i"},
        "v": {"N": str(held + 1)},
        "c": {"L": [entry_to_dynamo(current, layout)]},
    }
    if held:
        raw["p"] = {"L": [entry_to_dynamo(_entry(), layout)] * held}
    return raw


def _every_update() -> Iterator[tuple[str, tuple[str, ...]]]:
    """(what, its expressions) of every request index/updates.py builds, at the extremes."""
    most_held = (LARGEST + max(1, LARGEST // 2)) * 4  # past what retention ever holds
    guards = {f"{n:064x}": 1.0 for n in range(1 + MAX_PARTS)}  # a body and every part, new
    incoming = [_entry(content_type=ct) for ct in ("application/json", "a/b", "z/z", None)] + [
        _entry(TOMBSTONE_HASH, None),
        _entry(TOMBSTONE_HASH, None, purge=True),
    ]
    currents = [_entry(), _entry(TOMBSTONE_HASH, None, purge=True)]
    currents += [_entry(TOMBSTONE_HASH, None, dropped=True)]
    for layout in Layout:
        for entry in incoming:
            for keep in (True, False):
                update = updates.new_version(entry, keep, guards, layout)
                yield (
                    f"new_version {layout} {entry.content_type}",
                    (update.update, update.condition),
                )
            for current in currents:
                # The history's length is in values only: the longest retention holds does.
                basis = _raw(LARGEST + LARGEST // 2, current, layout)
                update = updates.replace(
                    "i", entry, basis, lambda item: item.history, guards, layout
                )
                yield f"replace {layout}", (update.update, update.condition)
                update = updates.rewrite(basis, Layout.COMPACT)
                yield f"rewrite {layout}", (update.update, update.condition)
            update = updates.touch(entry, layout)
            yield f"touch {layout}", (update.update, update.condition)
    yield "purge", updates.purge()[:2]
    hashes = [f"{n:064x}" for n in range(MAX_CONDEMNED)]
    for standing in (None, 1.0, 0.5):
        for drop in (True, False):
            condemned = updates.condemnation(hashes, 1.0, 7, standing=standing, drop_history=drop)
            if condemned is not None:
                yield f"condemnation {standing} {drop}", condemned[:2]
    yield (
        "condemnation of no version",
        updates.condemnation(hashes, 1.0, None, standing=None, drop_history=False)[:2],
    )  # type: ignore[index]
    yield "clear_condemnation", updates.clear_condemnation(1.0)[:2]
    for held in (1, LARGEST, most_held):
        raw = _raw(held, _entry())
        for count in (1, held // 2, held):
            yield f"trim {count} of {held}", updates.trim(held + 1, raw["p"]["L"], count)[:2]


def test_every_builder_stays_within_the_limits_at_its_extremes():
    worst = {"length": 0, "operators": 0}
    for what, expressions in _every_update():
        for expression in expressions:
            size = measure(expression)
            assert size.within(), (what, size, expression[:200])
            worst = {
                "length": max(worst["length"], size.length),
                "operators": max(worst["operators"], size.operators),
            }
    # The largest: a planned write of a version with every part uploaded anew (its guards).
    assert worst["length"] < MAX_EXPRESSION_BYTES and worst["operators"] < MAX_OPERATORS


def test_a_trim_is_one_fixed_expression_however_long_the_history():
    """It was one REMOVE path a dropped entry: 260 of them made moto's validator recurse past
    Python's limit, and about 600 crossed DynamoDB's 4 KB."""
    forms = {
        updates.trim(n + 1, [{"M": {}}] * n, count)[:2] for n in (3, 780, 5000) for count in (1, 2)
    }
    assert forms == {
        ("SET #p = :p", "#v = :v AND attribute_exists(#p) AND size(#p) = :held"),
    }


# --- every request a store, the collector, migrate and reindex make ---------------------------


def test_every_request_of_every_kind_of_work_stays_within_the_limits(inprocess: Backend):
    """A store at the largest accepted retention, versions with every part in S3, deletes, a
    purge, a touch, a stale write, items in the text layout migrated, a collection and a
    reindex: every request within the limits."""
    # Every part in S3 (their guards) at the retention that leaves an entry room for them;
    # the rest at the largest retention (too little room per entry for 16 parts).
    parted = inprocess.store(inline_threshold=0)
    store = inprocess.store(inline_threshold=0, retention=Retention(versions=LARGEST))
    recorded = Recorded(store.index.dynamodb, parted.index.dynamodb, inprocess.dynamodb)
    parts = {f"p{n:02d}": bytes([n]) * 10 for n in range(MAX_PARTS)}
    for n in range(1, 4):
        parted.put("parted", {"n": n}, updated_at=f"2026-11-0{n}T00:00:00Z", parts=parts)
        store.put("a", {"n": n}, updated_at=f"2026-11-0{n}T00:00:00Z", parts={"p": b"%d" % n})
    store.put("a", {"n": 3}, updated_at="2026-11-05T00:00:00Z", parts={"p": b"3"})  # touch
    store.put("a", {"n": 0}, updated_at="2026-10-01T00:00:00Z")  # stale
    store.delete("a", deleted_at="2026-11-06T00:00:00Z")
    store.put("b", {"n": 1}, updated_at="2026-11-01T00:00:00Z")
    store.delete("b", deleted_at="2026-11-02T00:00:00Z", purge=True)
    store.index.layout = Layout.TEXT
    for n in range(1, 4):
        store.put("c", {"n": n}, updated_at=f"2026-11-0{n}T00:00:00Z")
    store.index.layout = Layout.COMPACT
    assert migrate(store).rewritten == 1
    collector = GarbageCollector(store, grace=timedelta(0), clock=lambda: time.time() + 10**6)
    shards = sorted({shard_of(rid) for rid in ("a", "b", "parted")})
    collector.run(shards)
    collector.run(shards)
    sns = boto3.client("sns", inprocess.region)
    topic = sns.create_topic(
        Name="limits.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"}
    )["TopicArn"]
    target = Target(
        inprocess.dynamodb, store.table_name, ChangePublisher(sns, topic), store.bucket_name
    )
    for selection in (Selection(), Selection(ids=("a", "b", "c"))):
        reindex_segment(target, run_id="r", segment=0, total_segments=1, selection=selection)
    assert recorded.problems() == []
    kinds = {name for name, _ in recorded.requests}
    assert {"UpdateItem", "GetItem", "Scan", "BatchGetItem"} <= kinds, kinds
    expressions = {name for _, params in recorded.requests for name in params}
    assert {"UpdateExpression", "ConditionExpression", "FilterExpression"} <= expressions


# --- the largest retention, on every backend ----------------------------------------------------

# The done-when's run: `VHS_LARGEST_RETENTION_PUTS=2000 .venv/bin/python -m pytest
# tests/core/test_expression_limits.py -k largest_retention_takes` (docs/testing.md). `make
# test` starts the id at its fullest instead (seeded), so the trims at the limit come in a few
# puts: moto takes about half a second for each put of an item of ~790 entries.
PUTS = int(os.environ.get("VHS_LARGEST_RETENTION_PUTS", "0"))


def _seed_fullest(backend: Backend, store: VersionedHybridStore, rid: str) -> int:
    """Plant `rid` as the store holds an id at its fullest between trims (retention's
    `max_held` earlier versions and the current one; their bodies are never read here, so
    none is uploaded); the number of its current version."""
    held = store.retention.max_held
    entries = []
    for number in range(1, held + 2):
        body = b'{"seed":%d}' % number
        entry = Entry(
            f"2026-01-01T00:00:00.{number:06d}Z",
            hashlib.sha256(body).hexdigest(),
            len(body),
            int(store.clock()),
            f"seed{number}",
        )
        entries.append(entry_to_dynamo(entry))
    backend.dynamodb.put_item(
        TableName=backend.table_name,
        Item={
            "id": {"S": rid},
            "v": {"N": str(held + 1)},
            "c": {"L": entries[-1:]},
            "p": {"L": entries[:-1]},
        },
    )
    return held + 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inprocess", "server", "dynalite"], indirect=True)
def test_the_largest_retention_takes_puts_at_its_fullest_within_every_limit(backend: Backend):
    """An id at its fullest at the largest accepted retention (`inline_threshold=0`): puts that
    trim it at the limit, one with a part (a planned write, guarded), every item within
    DynamoDB's size rules and every expression within its limits, on each backend."""
    store = backend.store(inline_threshold=0, retention=Retention(versions=LARGEST))
    rid = backend.id("fullest")
    first = _seed_fullest(backend, store, rid)
    recorded = Recorded(store.index.dynamodb)
    # The first put makes one entry more than retention holds between trims: it trims at the
    # limit (half the retention at once); the second is planned (a part); then two more.
    puts = 4
    for n in range(first, first + puts):
        stamp = f"2026-01-02T00:00:00.{n:06d}Z"
        with_parts = {"p": b"%d" % n} if n == first + 1 else None
        assert store.put(rid, {"n": n}, updated_at=stamp, parts=with_parts).version == n + 1
    assert recorded.problems() == []
    assert max(item_size(item) for item in recorded.items) <= ITEM_BUDGET
    assert len(recorded.items) >= puts
    trims = [
        params
        for _, params in recorded.requests
        if params.get("UpdateExpression") in ("SET #p = :p", "REMOVE #p")  # updates.trim's
    ]
    assert trims, "no trim at the limit"
    retained = store.history(rid)
    assert retained[-1].version == first + puts and len(retained) == LARGEST + 1
    assert store.get(rid).json() == {"n": first + puts - 1}


@pytest.mark.slow
@pytest.mark.skipif(not PUTS, reason="the long run: VHS_LARGEST_RETENTION_PUTS=2000")
@pytest.mark.parametrize("backend", ["inprocess", "server", "dynalite"], indirect=True)
def test_the_largest_retention_takes_2000_puts_within_every_limit(backend: Backend):
    """The long run: a store at the largest accepted retention takes 2,000 puts on
    in-process moto, moto's server and dynalite, every item within DynamoDB's size rules and
    every expression within its limits. One version in a hundred has a part (a planned write,
    its part in S3 and guarded); the rest are blind writes, whose trims drop half the
    retention at once."""
    store = backend.store(inline_threshold=0, retention=Retention(versions=LARGEST))
    recorded = Recorded(store.index.dynamodb)
    rid = backend.id("largest-retention")
    started = time.monotonic()
    for n in range(PUTS):
        stamp = f"2026-01-01T00:00:00.{n:06d}Z"
        with_parts = {"p": b"%d" % n} if n % 100 == 0 else None
        assert store.put(rid, {"n": n}, updated_at=stamp, parts=with_parts).version == n + 1
    elapsed = time.monotonic() - started
    assert recorded.problems() == []
    largest = max(item_size(item) for item in recorded.items)
    assert largest <= ITEM_BUDGET, largest
    retained = store.history(rid)
    assert [v.version for v in retained] == list(range(PUTS - LARGEST, PUTS + 1))
    assert store.get(rid).json() == {"n": PUTS - 1}
    print(f"{backend.name}: {PUTS} puts in {elapsed:.1f} s, largest item {largest} bytes")
