"""The store's put path (VersionedHybridStore.put_validated): a version's body, or its body
and parts (docs/design.md, "Parts"), uploaded to S3 where not inline, then one index write.
It is the store's own code, kept out of store.py so that the façade stays readable, and uses
the store's private helpers.

A body is uploaded first and the write made after, guarded by when the upload began: the
collector's condemnation of the object since then refuses it (BodyCondemned), and the writer
waits the condemnation out and uploads again (docs/gc.md). A body that cannot win (the id's
current key, as this process saw it, is at or above it: KnownCurrent) is not uploaded.

A version with parts: the body and the parts share one inline allowance, and whatever does not
fit the entry goes to S3. The item is read before anything is uploaded, so that only the
objects its current entry does not already reference are uploaded (a change to the JSON alone
uploads nothing), and the write is made against that item as read (DynamoIndex.put_planned
with `reuse`): the objects it reuses are then surely still there, and if the item changed
meanwhile the write is refused (PartsNotHeld) and what the new item no longer references is
uploaded.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from . import keys
from .codec import Body
from .errors import InvalidPart, WriteConflict
from .index import BodyCondemned, WriteResult
from .item import INLINE, item_from_dynamo
from .item_size import held_size
from .model import Entry, Item, PutResult, StoredPart
from .ordering import OrderKey, Outcome, classify
from .parts import PartBody, manifest_hash
from .updates import PartsNotHeld

if TYPE_CHECKING:
    from .store import VersionedHybridStore

# A write must reach DynamoDB within this long of creating its S3 object. The collector clears
# a condemnation only after its deadline plus this window, so no slower writer can rely on it.
MAX_WRITE_WINDOW = timedelta(minutes=15)
# The collector skips bodies uploaded within its grace period, so a second condemnation of a
# body just uploaded again means something is badly wrong; give up rather than loop.
MAX_CONDEMNED_RETRIES = 3


class KnownCurrent:
    """The highest current ordering key this process has seen for each of the ids it wrote
    most recently. An id's current key never goes down (a write is admitted only above it, a
    touch moves it forward, and purges, trims and the collector keep it), so a key seen is a
    lower bound of the key now: a write at or below it can only be stale or unchanged, and its
    body need not be uploaded. Bounded: the least recently written ids are forgotten."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[str, OrderKey] = OrderedDict()
        self._lock = threading.Lock()

    def saw(self, item: Item | None) -> None:
        if item is None:
            return
        key = item.current.order_key
        with self._lock:
            known = self._keys.pop(item.id, None)
            self._keys[item.id] = key if known is None or key > known else known
            while len(self._keys) > self.capacity:
                self._keys.popitem(last=False)

    def at_least(self, id: str, key: OrderKey) -> bool:
        """Whether `id`'s current key is surely at least `key`."""
        with self._lock:
            known = self._keys.get(id)
        return known is not None and key <= known


def put_body(store: VersionedHybridStore, id: str, body: Body, stamp: str) -> PutResult:
    """A put of a version without parts, by `store`: its body uploaded unless inline (or
    surely beaten), then one index write, blind or planned (DynamoIndex.put_blind,
    put_planned)."""
    entry = store._new_entry(stamp, body, store._inline_form(body))
    inline = entry.inline
    key = keys.body_key(store.prefix, id, body.sha256)
    keep_history = store.retention.versions > 0
    # An inline body keeps the one it supersedes as a delta against itself: the writer
    # reads the item first (half a read unit) and writes the history whole.
    history = None
    if store.delta_history and keep_history and inline is not None and body.data is not None:
        history = store._history_after(entry, body.data)
    # A body that cannot win (a duplicate or stale put of an id whose current entry this
    # store has seen) is not uploaded: the write can only be refused or change nothing.
    # Its read is then only for the result's version: one strongly consistent read.
    beaten = store.known.at_least(id, entry.order_key)
    upload = inline is None and not beaten
    for _ in range(MAX_CONDEMNED_RETRIES):
        uploaded_after = None
        if upload:
            created = store.bodies.put(key, body, keys.body_metadata(id, stamp))
            if store.clock() - created > MAX_WRITE_WINDOW.total_seconds():
                continue  # too slow for the collector's marker expiry: upload again
            uploaded_after = created - store.clock_skew
        guards = {} if uploaded_after is None else {body.sha256: uploaded_after}
        try:
            if history is None:
                result = store.index.put_blind(
                    id,
                    entry,
                    keep_history=keep_history,
                    guards=guards,
                    fallback=store._history_after(entry, None) if keep_history else None,
                )
            else:
                result = store.index.put_planned(
                    id, entry, history=history, guards=guards, consistent_basis=beaten
                )
            break
        except BodyCondemned as condemned:
            store._wait_out(id, condemned)
    else:
        raise WriteConflict(f"{id!r}: the garbage collector kept condemning its body")
    store._settled(result)
    location = "inline" if inline is not None else store.bodies.location(key)
    return PutResult(id, result.outcome, result.version, body.sha256, _stored(result, location))


def put_with_parts(
    store: VersionedHybridStore, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
) -> PutResult:
    """A put of a version with parts, by `store`. The item is read first (half a read unit),
    so that only the objects its current entry does not already reference in S3 are
    uploaded, and the write is made against that item as read."""
    entry, sources = entry_with_parts(store, id, body, stamp, parts)
    history = store._history_after(entry, body.data if entry.inline is not None else None)
    needed = entry.s3_objects()
    metadata = keys.body_metadata(id, stamp)
    uploaded: dict[str, float] = {}  # sha256 → when its upload began, less the skew
    beaten = store.known.at_least(id, entry.order_key)  # see put_validated
    basis = store.index.read_for_write(id, consistent=beaten)
    for _ in range(MAX_CONDEMNED_RETRIES + 2):
        seen = item_from_dynamo(basis)
        now = store.clock()
        # An upload older than the write window is no longer one the collector respects.
        horizon = now - MAX_WRITE_WINDOW.total_seconds() - store.clock_skew
        uploaded = {h: since for h, since in uploaded.items() if since > horizon}
        if seen is None or classify(seen.current.order_key, entry.order_key) not in (
            Outcome.STALE,
            Outcome.UNCHANGED,
        ):
            held = seen.current.s3_objects() if seen is not None else {}
            for content_hash in needed:
                if content_hash not in held and content_hash not in uploaded:
                    key = keys.body_key(store.prefix, id, content_hash)
                    created = store.bodies.put(key, sources[content_hash], metadata)
                    uploaded[content_hash] = created - store.clock_skew
        try:
            result = store.index.put_planned(
                id,
                entry,
                history=history,
                guards=uploaded,
                basis=basis,
                reuse=frozenset(needed) - uploaded.keys(),
                reuse_skew=store.clock_skew,
                consistent_basis=beaten,
            )
            break
        except PartsNotHeld as changed:
            basis = changed.basis  # upload what the item no longer references, and retry
        except BodyCondemned as condemned:
            store._wait_out(id, condemned)
            uploaded.clear()  # every object is uploaded again, after the deadline
            basis = {}  # and none is taken as held: the condemnation may name it
    else:
        raise WriteConflict(
            f"{id!r}: its current version kept changing, or the garbage collector kept "
            "condemning its parts, while this put uploaded them: retry later"
        )
    store._settled(result)
    location = (
        INLINE
        if entry.inline is not None
        else store.bodies.location(keys.body_key(store.prefix, id, body.sha256))
    )
    return PutResult(
        id,
        result.outcome,
        result.version,
        entry.content_hash,
        _stored(result, location),
        body_hash=body.sha256,
        parts=store._parts_info(id, entry),
    )


def _stored(result: WriteResult, location: str) -> str | None:
    """Where the put's body is: nowhere when it was stale (refused: nothing was written, and
    the version reported is the current one, another body or a delete)."""
    return None if result.outcome is Outcome.STALE else location


def entry_with_parts(
    store: VersionedHybridStore, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
) -> tuple[Entry, dict[str, Body]]:
    """The entry of a version with parts, and the bodies of its S3 objects by sha256.
    Inline by the body's rule, out of one allowance: the body and the parts together store at
    most `inline_threshold` bytes in the entry (the body first, then the parts by name), so a
    held entry is no bigger than one without parts but for the parts' names and hashes."""
    packed_body = store._inline_form(body)
    allowance = store.inline_threshold - (len(packed_body.data) if packed_body else 0)
    sources: dict[str, Body] = {} if packed_body else {body.sha256: body}
    stored: list[StoredPart] = []
    for part in parts:
        # Parts are packed without the dictionary: it is trained on records, not parts.
        packed = store._inline_form(part.body, with_dictionary=False)
        if packed is not None and len(packed.data) <= allowance:
            allowance -= len(packed.data)
        else:
            packed = None
            sources[part.body.sha256] = part.body
        stored.append(
            StoredPart(
                part.name,
                part.body.sha256,
                part.body.size,
                part.body.content_type,
                inline=packed.data if packed else None,
                codec=packed.codec if packed else None,
            )
        )
    entry = store._new_entry(
        stamp,
        body,
        packed_body,
        content_hash=manifest_hash(body.sha256, body.content_type, parts),
        body_hash=body.sha256,
        parts=tuple(stored),
    )
    # Within what one held entry may take of the item: inline parts move to S3, largest
    # first, until it fits; their names and hashes alone must fit (docs/design.md).
    bodies = {p.body.sha256: p.body for p in parts}
    while held_size(entry) > store.entry_budget:
        inline_parts = [p for p in entry.parts if p.inline is not None]
        if not inline_parts:
            raise InvalidPart(
                f"{len(parts)} parts take {held_size(entry)} bytes of the item, "
                f"more than this store's retention leaves each version "
                f"({store.entry_budget} bytes): fewer parts, shorter names or content "
                "types, or a lower retention",
            )
        largest = max(inline_parts, key=lambda p: len(p.inline or b""))
        sources[largest.content_hash] = bodies[largest.content_hash]
        entry = dataclasses.replace(
            entry,
            parts=tuple(
                dataclasses.replace(p, inline=None, codec=None) if p is largest else p
                for p in entry.parts
            ),
        )
    return entry, sources
