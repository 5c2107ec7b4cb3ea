"""The promises VHS keeps whatever fails, checked against the backend itself.

A `StoreState` is what a reader and the raw table and bucket show for some ids. The checks
say what must hold of one state (every pointer resolves, retention keeps what it promises,
the collector left no orphan) or between two states taken in order (no version went back).
The fault-injection suites (test_faults.py, test_pipeline_faults.py) use them after every
injected fault and again after recovery.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vhs import RecordNotFound
from vhs.index.codec import item_from_dynamo
from vhs_testing.model import Delete, Write, winner

# (version, updated_at, size, content hash, deleted, content type): one line of history().
HistoryLine = tuple[int, Any, int, str | None, bool, str | None]


@dataclass(frozen=True)
class StoreState:
    histories: dict[str, tuple[HistoryLine, ...] | None]  # history() per id (None: unknown)
    held: dict[str, tuple]  # (version, updated_at, hash) of every entry an item holds
    objects: frozenset[str]  # S3 keys in the body bucket
    referenced: frozenset[str]  # S3 keys that some held entry points at
    retained: frozenset[str]  # S3 keys that some retained entry points at (what GC keeps)
    uploads: frozenset[str]  # keys of multipart uploads still in progress

    @property
    def orphans(self) -> frozenset[str]:
        """Objects that no held entry references (a stopped put's body, an expired one's)."""
        return self.objects - self.referenced

    @property
    def collectable(self) -> frozenset[str]:
        """Objects the garbage collector must delete: no retained entry references them."""
        return self.objects - self.retained


def snapshot(backend: Any, reader: Any, ids: Iterable[str]) -> StoreState:
    """The state of `ids` as `reader` (a VersionedHybridStore) and the raw table show it, and
    every object in the body bucket."""
    histories: dict[str, tuple[HistoryLine, ...] | None] = {}
    held: dict[str, tuple] = {}
    referenced: set[str] = set()
    retained: set[str] = set()
    now = reader.clock()
    for id in ids:
        try:
            histories[id] = tuple(
                (i.version, i.updated_at, i.size, i.content_hash, i.deleted, i.content_type)
                for i in reader.history(id)
            )
        except RecordNotFound:
            histories[id] = None
        raw = backend.dynamodb.get_item(
            TableName=backend.table_name, Key={"id": {"S": id}}, ConsistentRead=True
        )
        item = item_from_dynamo(raw.get("Item", {}))
        if item is None:
            continue
        held[id] = tuple((n, e.updated_at, e.content_hash) for n, e in item.versions())
        referenced |= {
            reader.body_key(id, sha) for _, e in item.versions() for sha in e.s3_objects()
        }
        retained |= {
            reader.body_key(id, sha)
            for _, e in reader.retention.retained(item, now)
            for sha in e.s3_objects()
        }
    listed = backend.s3.get_paginator("list_objects_v2").paginate(Bucket=backend.bucket_name)
    uploads = backend.s3.list_multipart_uploads(Bucket=backend.bucket_name)
    return StoreState(
        histories,
        held,
        frozenset(o["Key"] for page in listed for o in page.get("Contents", [])),
        frozenset(referenced),
        frozenset(retained),
        frozenset(u["Key"] for u in uploads.get("Uploads", [])),
    )


def check_pointers(reader: Any, state: StoreState) -> None:
    """Every body a reader can reach exists, and every current or retained version reads back
    intact. (An entry past retention that no writer has trimmed yet is invisible to readers,
    so the collector may already have taken its body.)"""
    missing = state.retained - state.objects
    assert not missing, f"retained entries point at missing S3 bodies: {sorted(missing)}"
    for id, history in state.histories.items():
        for version, _, size, content_hash, deleted, _ in history or ():
            if deleted:
                continue
            record = reader.get(id, version)  # raises if the body is missing or corrupt
            assert hashlib.sha256(record.body).hexdigest() == record.content_hash == content_hash
            assert len(record.body) == size
            if version == history[-1][0]:
                current = reader.get(id)
                assert (current.version, current.content_hash) == (version, content_hash)


def check_retained(state: StoreState, retain: int) -> None:
    """History shows the current version and the `retain` before it: none is lost early."""
    for id, history in state.histories.items():
        if history:
            current = history[-1][0]
            expected = list(range(max(1, current - retain), current + 1))
            assert [info[0] for info in history] == expected, f"{id}: retained versions lost"


def check_monotonic(state: StoreState) -> None:
    """Each id's history counts up without gaps, and its versions' timestamps only rise."""
    for id, history in state.histories.items():
        numbers = [line[0] for line in history or ()]
        if numbers:
            expected = list(range(numbers[0], numbers[0] + len(numbers)))
            assert numbers == expected, f"{id}: versions out of sequence: {numbers}"
        stamps = [line[1] for line in history or ()]
        assert stamps == sorted(stamps), f"{id}: history goes back in time: {stamps}"


def check_nothing_went_back(before: StoreState, after: StoreState) -> None:
    for id, old in before.held.items():
        new = after.held.get(id)
        assert new is not None, f"{id} disappeared"
        assert new[-1][0] >= old[-1][0], f"{id} went back from version {old[-1][0]}"
        assert (new[-1][1], new[-1][2]) >= (old[-1][1], old[-1][2]), f"{id}'s key went back"
        # A version keeps its content; only the current one's updated_at may move forward.
        kept = {n: (t, h) for n, t, h in new}
        for n, t, h in old:
            if n in kept:
                assert kept[n][1] == h and kept[n][0] >= t, f"{id} version {n} changed"


def check_collected(state: StoreState) -> None:
    """After a complete collection: every object in the bucket is a retained body."""
    assert not state.collectable, f"orphans the collector left: {sorted(state.collectable)}"


def check_winners(reader: Any, writes: Iterable[Write]) -> None:
    """Each id reads as its write with the highest ordering key (vhs_testing.model.winner): that
    put's body and timestamp, or not found for a delete, whatever order the writes came in."""
    by_id: dict[str, list[Write]] = defaultdict(list)
    for write in writes:
        by_id[write.id].append(write)
    for id, its_writes in by_id.items():
        expected = winner(its_writes)
        if isinstance(expected, Delete):
            try:
                reader.get(id)
            except RecordNotFound:
                continue
            raise AssertionError(f"{id} should read as deleted")
        assert expected is not None
        record = reader.get(id)
        assert (record.body, record.content_hash, record.updated_at) == (
            expected.body,
            expected.content_hash,
            expected.at,
        ), id
