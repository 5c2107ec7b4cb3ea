"""The store's writes, a collaborator the store holds (`Writer`): a put of a version's body,
or its body and parts (docs/design.md, "Parts"), uploaded to S3 where not inline, then one
index write; a delete, one index write. The writer owns what writing needs (the body store,
the index, the dictionaries, the write settings, the cache of keys seen, how to wait out the
collector) and nothing of the store above it.

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
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from . import keys
from .bodies.dictionaries import DictionaryStore
from .bodies.packing import Packed, compress
from .bodies.parts import PartBody, manifest_hash
from .bodies.s3 import S3BodyStore
from .codec import Body
from .errors import BodyCondemned, InvalidPart, PartsNotHeld, WriteConflict
from .history.stored_deltas import history_after
from .index.codec import INLINE, item_from_dynamo
from .index.size import held_size
from .index.table import DynamoIndex, WriteResult
from .model import DeleteResult, Entry, Item, PartInfo, PutResult, StoredPart
from .ordering import TOMBSTONE_HASH, OrderKey, Outcome, classify
from .retention import Retention

# The store's log, the one users configure (the writer is part of the store).
logger = logging.getLogger("vhs.store")

# A write must reach DynamoDB within this long of creating its S3 object. The collector clears
# a condemnation only after its deadline plus this window, so no slower writer can rely on it.
MAX_WRITE_WINDOW = timedelta(minutes=15)
# The collector skips bodies uploaded within its grace period, so a second condemnation of a
# body just uploaded again means something is badly wrong; give up rather than loop.
MAX_CONDEMNED_RETRIES = 3
# Bodies up to this multiple of the threshold are worth trying to compress into it.
_COMPRESSIBLE_RATIO = 16


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


@dataclass(frozen=True)
class WriteSettings:
    """What a writer is configured with (the store's constructor checks it)."""

    prefix: str
    inline_threshold: int
    retention: Retention
    delta_history: bool
    # Whether new writes pack with the newest dictionary (every reader decodes one).
    write_dictionaries: bool
    # What one held entry may take of an item (index.budget.entry_budget).
    entry_budget: int
    clock: Callable[[], float]
    # How far apart this writer's clock and the garbage collector's may be, in seconds.
    clock_skew: float


class Writer:
    """A store's writes (puts and deletes) against its body store and index."""

    def __init__(
        self,
        bodies: S3BodyStore,
        index: DynamoIndex,
        dictionaries: DictionaryStore,
        settings: WriteSettings,
    ) -> None:
        self.bodies = bodies
        self.index = index
        self.dictionaries = dictionaries
        self.settings = settings
        self.known = KnownCurrent()
        # How a writer waits out a condemnation: tests give a clock's.
        self.sleep: Callable[[float], None] = time.sleep
        # Seconds the caller may still wait, if it is bounded (a Lambda's remaining time): a
        # write that would have to wait longer for the collector fails with WriteConflict
        # instead, to be retried (the ingest handler sets this for each invocation).
        self.wait_budget: Callable[[], float] | None = None

    def put(self, id: str, body: Body, stamp: str, parts: Sequence[PartBody] = ()) -> PutResult:
        """A put of validated arguments (VersionedHybridStore.put_validated)."""
        if parts:
            return self._put_with_parts(id, body, stamp, parts)
        return self._put_body(id, body, stamp)

    def delete(self, id: str, stamp: str, *, purge: bool = False) -> DeleteResult:
        """A delete of validated arguments (VersionedHybridStore.delete_validated)."""
        entry = Entry(
            updated_at=stamp,
            content_hash=TOMBSTONE_HASH,
            size=0,
            written_at=int(self.settings.clock()),
            token=_token(),
            purge=purge,
        )
        keep_history = self.settings.retention.versions > 0 and not purge
        # A delete is never refused for its size (a tombstone is tiny): the item makes room.
        fallback = self._history_after(entry, None) if keep_history else None
        result = self.index.delete(id, entry, keep_history=keep_history, fallback=fallback)
        self.known.saw(result.item)
        item, raw = result.item, result.raw
        if purge and item is not None and result.outcome is not Outcome.DELETED:
            purged_item = self.index.purge(id)
            # A purge leaves no history: nothing to trim.
            item, raw = (purged_item, None) if purged_item is not None else (item, raw)
        self._trim_if_due(item, raw)
        purged = bool(purge and item is not None and item.current.deleted and not item.history)
        return DeleteResult(id, result.outcome, result.version, purged)

    def _put_body(self, id: str, body: Body, stamp: str) -> PutResult:
        """A put of a version without parts: its body uploaded unless inline (or surely beaten),
        then one index write, blind or planned (DynamoIndex.put_blind, put_planned)."""
        entry = self._new_entry(stamp, body, self._inline_form(body))
        inline = entry.inline
        key = keys.body_key(self.settings.prefix, id, body.sha256)
        keep_history = self.settings.retention.versions > 0
        # An inline body keeps the one it supersedes as a delta against itself: the writer
        # reads the item first (half a read unit) and writes the history whole.
        history = None
        if (
            self.settings.delta_history
            and keep_history
            and inline is not None
            and body.data is not None
        ):
            history = self._history_after(entry, body.data)
        # A body that cannot win (a duplicate or stale put of an id whose current entry this
        # store has seen) is not uploaded: the write can only be refused or change nothing.
        # Its read is then only for the result's version: one strongly consistent read.
        beaten = self.known.at_least(id, entry.order_key)
        upload = inline is None and not beaten
        for _ in range(MAX_CONDEMNED_RETRIES):
            uploaded_after = None
            if upload:
                created = self.bodies.put(key, body, keys.body_metadata(id, stamp))
                if self.settings.clock() - created > MAX_WRITE_WINDOW.total_seconds():
                    continue  # too slow for the collector's marker expiry: upload again
                uploaded_after = created - self.settings.clock_skew
            guards = {} if uploaded_after is None else {body.sha256: uploaded_after}
            try:
                if history is None:
                    result = self.index.put_blind(
                        id,
                        entry,
                        keep_history=keep_history,
                        guards=guards,
                        fallback=self._history_after(entry, None) if keep_history else None,
                    )
                else:
                    result = self.index.put_planned(
                        id, entry, history=history, guards=guards, consistent_basis=beaten
                    )
                break
            except BodyCondemned as condemned:
                self._wait_out(id, condemned)
        else:
            raise WriteConflict(f"{id!r}: the garbage collector kept condemning its body")
        self._settled(result)
        location = "inline" if inline is not None else self.bodies.location(key)
        return PutResult(id, result.outcome, result.version, body.sha256, _stored(result, location))

    def _put_with_parts(
        self, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
    ) -> PutResult:
        """A put of a version with parts. The item is read first (half a read unit),
        so that only the objects its current entry does not already reference in S3 are
        uploaded, and the write is made against that item as read."""
        entry, sources = self.entry_with_parts(id, body, stamp, parts)
        history = self._history_after(entry, body.data if entry.inline is not None else None)
        needed = entry.s3_objects()
        metadata = keys.body_metadata(id, stamp)
        uploaded: dict[str, float] = {}  # sha256 → when its upload began, less the skew
        beaten = self.known.at_least(id, entry.order_key)  # see put_validated
        basis = self.index.read_for_write(id, consistent=beaten)
        for _ in range(MAX_CONDEMNED_RETRIES + 2):
            seen = item_from_dynamo(basis)
            now = self.settings.clock()
            # An upload older than the write window is no longer one the collector respects.
            horizon = now - MAX_WRITE_WINDOW.total_seconds() - self.settings.clock_skew
            uploaded = {h: since for h, since in uploaded.items() if since > horizon}
            if seen is None or classify(seen.current.order_key, entry.order_key) not in (
                Outcome.STALE,
                Outcome.UNCHANGED,
            ):
                held = seen.current.s3_objects() if seen is not None else {}
                for content_hash in needed:
                    if content_hash not in held and content_hash not in uploaded:
                        key = keys.body_key(self.settings.prefix, id, content_hash)
                        created = self.bodies.put(key, sources[content_hash], metadata)
                        uploaded[content_hash] = created - self.settings.clock_skew
            try:
                result = self.index.put_planned(
                    id,
                    entry,
                    history=history,
                    guards=uploaded,
                    basis=basis,
                    reuse=frozenset(needed) - uploaded.keys(),
                    reuse_skew=self.settings.clock_skew,
                    consistent_basis=beaten,
                )
                break
            except PartsNotHeld as changed:
                basis = changed.basis  # upload what the item no longer references, and retry
            except BodyCondemned as condemned:
                self._wait_out(id, condemned)
                uploaded.clear()  # every object is uploaded again, after the deadline
                basis = {}  # and none is taken as held: the condemnation may name it
        else:
            raise WriteConflict(
                f"{id!r}: its current version kept changing, or the garbage collector kept "
                "condemning its parts, while this put uploaded them: retry later"
            )
        self._settled(result)
        location = (
            INLINE
            if entry.inline is not None
            else self.bodies.location(keys.body_key(self.settings.prefix, id, body.sha256))
        )
        return PutResult(
            id,
            result.outcome,
            result.version,
            entry.content_hash,
            _stored(result, location),
            body_hash=body.sha256,
            parts=parts_info(id, entry, self.bodies, self.settings.prefix),
        )

    def entry_with_parts(
        self, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
    ) -> tuple[Entry, dict[str, Body]]:
        """The entry of a version with parts, and the bodies of its S3 objects by sha256.
        Inline by the body's rule, out of one allowance: the body and the parts together store at
        most `inline_threshold` bytes in the entry (the body first, then the parts by name), so a
        held entry is no bigger than one without parts but for the parts' names and hashes."""
        packed_body = self._inline_form(body)
        allowance = self.settings.inline_threshold - (len(packed_body.data) if packed_body else 0)
        sources: dict[str, Body] = {} if packed_body else {body.sha256: body}
        stored: list[StoredPart] = []
        for part in parts:
            # Parts are packed without the dictionary: it is trained on records, not parts.
            packed = self._inline_form(part.body, with_dictionary=False)
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
        entry = self._new_entry(
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
        while held_size(entry) > self.settings.entry_budget:
            inline_parts = [p for p in entry.parts if p.inline is not None]
            if not inline_parts:
                raise InvalidPart(
                    f"{len(parts)} parts take {held_size(entry)} bytes of the item, "
                    f"more than this store's retention leaves each version "
                    f"({self.settings.entry_budget} bytes): fewer parts, shorter names or content "
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

    def _wait_out(self, id: str, condemned: BodyCondemned) -> None:
        """The collector may delete a condemned object until its deadline: wait until the next
        upload is surely later (past the deadline and the clock-skew allowance), so that the
        upload after this wait makes an object the collector's deletes cannot touch."""
        settings = self.settings
        wait = max(0.0, condemned.deadline + settings.clock_skew - settings.clock()) + 1
        budget = self.wait_budget() if self.wait_budget is not None else None
        if budget is not None and wait > budget:
            raise WriteConflict(
                f"{id!r}: the garbage collector condemned its body for {wait:.0f} s "
                f"more, longer than this caller may wait ({budget:.0f} s): retry later"
            ) from None
        self.sleep(wait)

    def _new_entry(self, stamp: str, body: Body, packed: Packed | None, **more: Any) -> Entry:
        """The entry of a put of `body` at `stamp`, written now by a writer of its own, its
        body inline as `packed` (None: in S3) (`more`: what a version with parts adds, its
        manifest's hash among them)."""
        fields: dict[str, Any] = {"content_hash": body.sha256, **more}
        return Entry(
            updated_at=stamp,
            size=body.size,
            written_at=int(self.settings.clock()),
            token=_token(),
            content_type=body.content_type,
            inline=packed.data if packed else None,
            codec=packed.codec if packed else None,
            dictionary=packed.dictionary if packed else None,
            **fields,
        )

    def _settled(self, result: WriteResult) -> None:
        """After a put: remember the key its item holds, and trim the history if due."""
        self.known.saw(result.item)
        self._trim_if_due(result.item, result.raw)

    def _inline_form(self, body: Body, *, with_dictionary: bool = True) -> Packed | None:
        """`body` packed as the item would hold it, or None when it goes to S3."""
        threshold = self.settings.inline_threshold
        if body.data is None or body.size > threshold * _COMPRESSIBLE_RATIO:
            return None
        with_dictionary = with_dictionary and self.settings.write_dictionaries
        packed = compress(body.data, self.dictionaries.newest() if with_dictionary else None)
        return packed if len(packed.data) <= threshold else None

    def _history_after(self, new: Entry, new_body: bytes | None) -> Callable[[Item], list[Entry]]:
        """deltas.history_after, by this writer's retention, clock and delta setting."""
        settings = self.settings
        return history_after(
            new,
            new_body,
            settings.retention,
            settings.clock,
            settings.delta_history,
            self.dictionaries.get,
            zstd_deltas=settings.write_dictionaries,
        )

    def _trim_if_due(self, item: Item | None, raw: Mapping[str, Any] | None) -> None:
        """Trim the expired history of `item` (`raw`: as the write returned it) once
        `trim_batch` entries have expired."""
        if item is None or raw is None:
            return
        retention = self.settings.retention
        expired = retention.expired_count(item, self.settings.clock())
        if expired < retention.trim_batch:
            return
        try:
            self.index.trim(item.id, raw, expired)
        except (ClientError, BotoCoreError) as error:
            # The version is written; trimming is housekeeping that the next writer redoes
            # (expired entries are invisible to readers meanwhile), so it must not fail the put.
            logger.warning("could not trim the history of %r: %s", item.id, error)


def parts_info(id: str, entry: Entry, bodies: S3BodyStore, prefix: str) -> dict[str, PartInfo]:
    """Each part of `entry` (of `id`) as a PutResult and a Record describe it: where it is."""
    return {
        p.name: PartInfo(
            p.name,
            p.content_hash,
            p.size,
            p.content_type,
            INLINE
            if p.inline is not None
            else bodies.location(keys.body_key(prefix, id, p.content_hash)),
        )
        for p in entry.parts
    }


def _stored(result: WriteResult, location: str) -> str | None:
    """Where the put's body is: nowhere when it was stale (refused: nothing was written, and
    the version reported is the current one, another body or a delete)."""
    return None if result.outcome is Outcome.STALE else location


def _token() -> str:
    return secrets.token_urlsafe(9)
