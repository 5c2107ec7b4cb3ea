"""VersionedHybridStore: a body store (S3) and an index (DynamoDB), composed.

Writes are two-phase. A body over the inline threshold goes to S3 first, under a key named by
its content; one conditional DynamoDB write then makes it current. A crash between the phases
leaves at worst an unreferenced object, which the garbage collector removes later; a reader
never sees a pointer to a body that is not yet in S3. Deletes write a tombstone to DynamoDB and
leave the bodies to the garbage collector: with content addressing another version may share
a key, so nothing on a write or failure path deletes a body.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from . import keys
from .aws import aws_client
from .bodies import MULTIPART_THRESHOLD, S3BodyStore
from .codec import (
    CODECS,
    MAX_BODY_SIZE,
    MAX_CONTENT_TYPE_LENGTH,
    Body,
    compress,
    encode_record,
)
from .deltas import UndecodableBody, inline_body, inline_part, share_parts, supersede
from .errors import (
    BodyHashMismatch,
    ConfigurationError,
    DanglingPointer,
    InvalidInput,
    InvalidPart,
    PartNotFound,
    RecordNotFound,
    WriteConflict,
)
from .index import BodyCondemned, DynamoIndex, PartsNotHeld
from .item import INLINE, ITEM_BUDGET, entry_size, item_from_dynamo, written_size
from .model import (
    DeleteResult,
    Entry,
    Item,
    PartInfo,
    PutResult,
    Record,
    StoredPart,
    StoredVersion,
    VersionInfo,
    entry_time,
)
from .ordering import TOMBSTONE_HASH, OrderKey, Outcome, classify, parse_timestamp
from .parts import PartBody, encode_parts, manifest_hash
from .retention import Retention
from .settings import StoreSettings

logger = logging.getLogger(__name__)

# From the cost model in docs/design.md: one S3 PUT costs as much as 8 KB of DynamoDB
# writes, so a body whose stored (compressed) form is at most 8 KB is cheaper inline.
DEFAULT_INLINE_THRESHOLD = 8 * 1024
DEFAULT_MAX_FUTURE = timedelta(days=1)
DEFAULT_CLOCK_SKEW = timedelta(seconds=60)
# A write must reach DynamoDB within this long of creating its S3 object. The collector clears
# a condemnation only after its deadline plus this window, so no slower writer can rely on it.
MAX_WRITE_WINDOW = timedelta(minutes=15)
# The collector skips bodies uploaded within its grace period, so a second condemnation of a
# body just uploaded again means something is badly wrong; give up rather than loop.
_MAX_CONDEMNED_RETRIES = 3
# The longest id by DynamoDB's count (UTF-8: up to 4 bytes a code point) and the highest
# version the configuration check allows for: the item's own overhead at its largest.
_LONGEST_ID = "\U0010ffff" * keys.MAX_ID_LENGTH
_HIGHEST_VERSION = 10**20 - 1
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


class VersionedHybridStore:
    """Versioned records of any size: bodies in S3, versions and small bodies in DynamoDB."""

    def __init__(
        self,
        table_name: str,
        bucket_name: str,
        *,
        prefix: str = "",
        s3_client: Any = None,
        dynamodb_client: Any = None,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        retention: Retention | None = None,
        max_body_size: int = MAX_BODY_SIZE,
        max_future: timedelta | None = DEFAULT_MAX_FUTURE,
        consistent_reads: bool = True,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        clock: Callable[[], float] = time.time,
        clock_skew: timedelta = DEFAULT_CLOCK_SKEW,
        delta_history: bool = True,
    ) -> None:
        if not table_name or not bucket_name:
            raise ConfigurationError("table_name and bucket_name are required")
        if not 0 <= inline_threshold <= 64 * 1024:
            raise ConfigurationError("inline_threshold must be between 0 and 65536 bytes")
        if not 0 < max_body_size <= MAX_BODY_SIZE:
            raise ConfigurationError(f"max_body_size must be between 1 and {MAX_BODY_SIZE}")
        self.retention = retention or Retention()
        self.delta_history = delta_history
        # The most entries an item holds between trims, each at its largest without parts
        # (parts are held to the same share on every put: _entry_with_parts), must fit the
        # item budget by DynamoDB's rules; every write also measures the item it makes.
        held = self.retention.max_held + 1
        overhead = written_size(_LONGEST_ID, _HIGHEST_VERSION, held)
        largest = entry_size(_largest_entry(inline_threshold, max_body_size))
        if overhead + held * largest > ITEM_BUDGET:
            raise ConfigurationError(
                f"{held} versions of up to {largest} bytes each (an inline body of up to "
                f"{inline_threshold} bytes, a {MAX_CONTENT_TYPE_LENGTH}-character content type) "
                f"could outgrow the {ITEM_BUDGET} bytes a write may take of a DynamoDB item: "
                "lower retention.versions or inline_threshold"
            )
        self.prefix = keys.validate_prefix(prefix)
        s3_client = s3_client or aws_client("s3")
        dynamodb_client = dynamodb_client or aws_client("dynamodb")
        self.table_name = table_name
        self.bucket_name = bucket_name
        self.inline_threshold = inline_threshold
        self.max_body_size = max_body_size
        self.max_future = max_future
        self.clock = clock
        # How far apart this writer's clock and the garbage collector's may be.
        self.clock_skew = clock_skew.total_seconds()
        self._sleep = time.sleep
        # Seconds the caller may still wait, if it is bounded (a Lambda's remaining time): a
        # write that would have to wait longer for the collector fails with WriteConflict
        # instead, to be retried (the ingest handler sets this for each invocation).
        self.wait_budget: Callable[[], float] | None = None
        self.bodies = S3BodyStore(
            s3_client, bucket_name, multipart_threshold=multipart_threshold, clock=clock
        )
        self.index = DynamoIndex(dynamodb_client, table_name, consistent_reads=consistent_reads)
        self.known = KnownCurrent()
        # What one held entry may take of an item, so that the most entries retention holds
        # still fit ITEM_BUDGET (checked above for entries without parts).
        self.entry_budget = (ITEM_BUDGET - overhead) // held

    @classmethod
    def from_env(cls, **options: Any) -> VersionedHybridStore:
        """Configure from the environment (`settings.StoreSettings`: VHS_TABLE_NAME,
        VHS_BUCKET_NAME and the optional prefix, inline threshold and retention). The endpoint
        comes from the standard AWS_ENDPOINT_URL, so the same code runs against moto's server
        or AWS."""
        return cls.from_settings(StoreSettings.from_env(), **options)

    @classmethod
    def from_settings(cls, settings: StoreSettings, **options: Any) -> VersionedHybridStore:
        options.setdefault("prefix", settings.prefix)
        if settings.delta_history is not None:
            options.setdefault("delta_history", settings.delta_history)
        if settings.inline_threshold is not None:
            options.setdefault("inline_threshold", settings.inline_threshold)
        if "retention" not in options and (
            settings.retain_versions is not None
            or settings.retain_days is not None
            or settings.retain_after_delete_days is not None
        ):
            options["retention"] = Retention(
                versions=Retention.versions
                if settings.retain_versions is None
                else settings.retain_versions,
                age=settings.retain_age,
                after_delete=Retention.after_delete
                if settings.retain_after_delete_days is None
                else settings.retain_after_delete,
            )
        return cls(settings.table_name, settings.bucket_name, **options)

    # --- writes ------------------------------------------------------------------------------

    def put(
        self,
        id: str,
        record: Any,
        *,
        updated_at: datetime | str,
        content_type: str | None = None,
        parts: Mapping[str, Any] | None = None,
    ) -> PutResult:
        """Store `record` as the next version of `id` if it is newer than the current one.

        `record` is a JSON value, or bytes (or a seekable binary file) for an opaque body.
        `parts` names binary parts stored beside it (name → bytes, a seekable binary file, or
        a (bytes or file, content type) pair; docs/design.md, "Parts"). Returns the outcome
        ("stored", "stale" or "unchanged") and the version now current.
        """
        id = keys.validate_id(id)
        stamp = parse_timestamp(updated_at, max_future=self.max_future)
        body = encode_record(record, content_type, max_size=self.max_body_size)
        encoded = encode_parts(parts, max_size=self.max_body_size)
        return self.put_validated(id, body, stamp, parts=encoded)

    def put_validated(
        self, id: str, body: Body, stamp: str, *, parts: Sequence[PartBody] = ()
    ) -> PutResult:
        """`put` of arguments already validated: an id that `keys.validate_id` passed, a body
        from `codec.encode_record` within `max_body_size`, and a timestamp in the stored form
        of `ordering.parse_timestamp` within `max_future`, and parts from
        `parts.encode_parts`. Ingest validates each message field once, naming the message's
        fields, and writes through this."""
        if parts:
            return self._put_with_parts(id, body, stamp, parts)
        inline, codec = self._inline_form(body)
        key = keys.body_key(self.prefix, id, body.sha256)
        entry = Entry(
            updated_at=stamp,
            content_hash=body.sha256,
            size=body.size,
            written_at=int(self.clock()),
            token=_token(),
            content_type=body.content_type,
            inline=inline,
            codec=codec,
        )
        keep_history = self.retention.versions > 0
        # An inline body keeps the one it supersedes as a delta against itself: the writer
        # reads the item first (half a read unit) and writes the history whole.
        history = None
        if self.delta_history and keep_history and inline is not None and body.data is not None:
            history = self._history_after(entry, body.data)
        # A body that cannot win (a duplicate or stale put of an id whose current entry this
        # store has seen) is not uploaded: the write can only be refused or change nothing.
        # Its read is then only for the result's version: one strongly consistent read.
        beaten = self.known.at_least(id, entry.order_key)
        upload = inline is None and not beaten
        for _ in range(_MAX_CONDEMNED_RETRIES):
            uploaded_after = None
            if upload:
                created = self.bodies.put(key, body, keys.body_metadata(id, stamp))
                if self.clock() - created > MAX_WRITE_WINDOW.total_seconds():
                    continue  # too slow for the collector's marker expiry: upload again
                uploaded_after = created - self.clock_skew
            try:
                result = self.index.write(
                    id,
                    entry,
                    keep_history=keep_history,
                    uploaded_after=uploaded_after,
                    history=history,
                    consistent_basis=beaten,
                    fallback=self._history_after(entry, None) if keep_history else None,
                )
                break
            except BodyCondemned as condemned:
                self._wait_out(id, condemned)
        else:
            raise WriteConflict(f"{id!r}: the garbage collector kept condemning its body")
        self.known.saw(result.item)
        self._trim_if_due(result.item)
        location = "inline" if inline is not None else self.bodies.location(key)
        return PutResult(id, result.outcome, result.version, body.sha256, location)

    def _wait_out(self, id: str, condemned: BodyCondemned) -> None:
        """The collector may delete a condemned object until its deadline: wait until the next
        upload is surely later (past the deadline and the clock-skew allowance), so that the
        upload after this wait makes an object the collector's deletes cannot touch."""
        wait = max(0.0, condemned.deadline + self.clock_skew - self.clock()) + 1
        budget = self.wait_budget() if self.wait_budget is not None else None
        if budget is not None and wait > budget:
            raise WriteConflict(
                f"{id!r}: the garbage collector condemned its body for {wait:.0f} s "
                f"more, longer than this caller may wait ({budget:.0f} s): retry later"
            ) from None
        self._sleep(wait)

    def _put_with_parts(
        self, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
    ) -> PutResult:
        """A put of a version with parts (docs/design.md, "Parts"). The item is read first
        (half a read unit), so that only the objects its current entry does not already
        reference in S3 are uploaded (a change to the JSON alone uploads nothing), and the
        write is made against that item as read: the objects it reuses are then surely
        still there (see index.write, `reuse`)."""
        entry, sources = self._entry_with_parts(id, body, stamp, parts)
        history = self._history_after(entry, body.data if entry.inline is not None else None)
        needed = entry.s3_objects()
        metadata = keys.body_metadata(id, stamp)
        uploaded: dict[str, float] = {}  # sha256 → when its upload began, less the skew
        beaten = self.known.at_least(id, entry.order_key)  # see put_validated
        basis = self.index.read_for_write(id, consistent=beaten)
        for _ in range(_MAX_CONDEMNED_RETRIES + 2):
            seen = item_from_dynamo(basis)
            now = self.clock()
            # An upload older than the write window is no longer one the collector respects.
            horizon = now - MAX_WRITE_WINDOW.total_seconds() - self.clock_skew
            uploaded = {h: since for h, since in uploaded.items() if since > horizon}
            if seen is None or classify(seen.current.order_key, entry.order_key) not in (
                Outcome.STALE,
                Outcome.UNCHANGED,
            ):
                held = seen.current.s3_objects() if seen is not None else {}
                for content_hash in needed:
                    if content_hash not in held and content_hash not in uploaded:
                        key = keys.body_key(self.prefix, id, content_hash)
                        created = self.bodies.put(key, sources[content_hash], metadata)
                        uploaded[content_hash] = created - self.clock_skew
            try:
                result = self.index.write(
                    id,
                    entry,
                    history=history,
                    guards=uploaded,
                    basis=basis,
                    reuse=frozenset(needed) - uploaded.keys(),
                    reuse_skew=self.clock_skew,
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
        self.known.saw(result.item)
        self._trim_if_due(result.item)
        location = (
            INLINE
            if entry.inline is not None
            else self.bodies.location(keys.body_key(self.prefix, id, body.sha256))
        )
        return PutResult(
            id,
            result.outcome,
            result.version,
            entry.content_hash,
            location,
            body_hash=body.sha256,
            parts=self._parts_info(id, entry),
        )

    def _entry_with_parts(
        self, id: str, body: Body, stamp: str, parts: Sequence[PartBody]
    ) -> tuple[Entry, dict[str, Body]]:
        """The entry of a version with parts, and the bodies of its S3 objects by sha256.
        Inline by the body's rule, out of one allowance: the body and the parts together
        store at most `inline_threshold` bytes in the entry (the body first, then the parts
        by name), so a held entry is no bigger than one without parts but for the parts'
        names and hashes."""
        inline, codec = self._inline_form(body)
        allowance = self.inline_threshold - (len(inline) if inline is not None else 0)
        sources: dict[str, Body] = {} if inline is not None else {body.sha256: body}
        stored: list[StoredPart] = []
        for part in parts:
            packed, part_codec = self._inline_form(part.body)
            if packed is not None and len(packed) <= allowance:
                allowance -= len(packed)
            else:
                packed, part_codec = None, None
                sources[part.body.sha256] = part.body
            stored.append(
                StoredPart(
                    part.name,
                    part.body.sha256,
                    part.body.size,
                    part.body.content_type,
                    inline=packed,
                    codec=part_codec,
                )
            )
        entry = Entry(
            updated_at=stamp,
            content_hash=manifest_hash(body.sha256, body.content_type, parts),
            size=body.size,
            written_at=int(self.clock()),
            token=_token(),
            content_type=body.content_type,
            inline=inline,
            codec=codec,
            body_hash=body.sha256,
            parts=tuple(stored),
        )
        # Within what one held entry may take of the item: inline parts move to S3, largest
        # first, until it fits; their names and hashes alone must fit (docs/design.md).
        bodies = {p.body.sha256: p.body for p in parts}
        while entry_size(entry) > self.entry_budget:
            inline_parts = [p for p in entry.parts if p.inline is not None]
            if not inline_parts:
                raise InvalidPart(
                    f"{len(parts)} parts take {entry_size(entry)} bytes of the item, "
                    f"more than this store's retention leaves each version "
                    f"({self.entry_budget} bytes): fewer parts, shorter names or content "
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

    def _parts_info(self, id: str, entry: Entry) -> dict[str, PartInfo]:
        return {
            p.name: PartInfo(
                p.name,
                p.content_hash,
                p.size,
                p.content_type,
                INLINE
                if p.inline is not None
                else self.bodies.location(keys.body_key(self.prefix, id, p.content_hash)),
            )
            for p in entry.parts
        }

    def delete(self, id: str, *, deleted_at: datetime | str, purge: bool = False) -> DeleteResult:
        """Delete `id` as of `deleted_at`, ordered like a put: puts that arrive later with
        `updated_at <= deleted_at` are stale. Bodies are left to the garbage collector.

        The earlier versions stay readable for `retention.after_delete`, then are dropped
        and their bodies collected. `purge=True` drops them at once: the tombstone carries a
        purge flag and the same UpdateItem removes the history. A purge of an id whose
        current entry is already a delete (at any time, so also the same `deleted_at`,
        which is otherwise "unchanged") still purges: the outcome is reported as ordering
        decides, and `purged` says the history is gone. The tombstone always stays."""
        id = keys.validate_id(id)
        stamp = parse_timestamp(deleted_at, field="deleted_at", max_future=self.max_future)
        return self.delete_validated(id, stamp, purge=purge)

    def delete_validated(self, id: str, stamp: str, *, purge: bool = False) -> DeleteResult:
        """`delete` of arguments already validated (see `put_validated`)."""
        entry = Entry(
            updated_at=stamp,
            content_hash=TOMBSTONE_HASH,
            size=0,
            written_at=int(self.clock()),
            token=_token(),
            purge=purge,
        )
        keep_history = self.retention.versions > 0 and not purge
        # A delete is never refused for its size (a tombstone is tiny): the item makes room.
        fallback = self._history_after(entry, None) if keep_history else None
        result = self.index.write(id, entry, keep_history=keep_history, fallback=fallback)
        self.known.saw(result.item)
        item = result.item
        if purge and item is not None and result.outcome is not Outcome.DELETED:
            item = self.index.purge(id) or item
        self._trim_if_due(item)
        purged = bool(purge and item is not None and item.current.deleted and not item.history)
        return DeleteResult(id, result.outcome, result.version, purged)

    def _inline_form(self, body: Body) -> tuple[bytes | None, str | None]:
        if body.data is None or body.size > self.inline_threshold * _COMPRESSIBLE_RATIO:
            return None, None
        packed, codec = compress(body.data)
        if len(packed) <= self.inline_threshold:
            return packed, codec
        return None, None

    def _history_after(self, new: Entry, new_body: bytes | None) -> Callable[[Item], list[Entry]]:
        """The history an item holds once `new` (inline, body `new_body`) supersedes its
        current entry: the current entry appended, as a delta against `new_body` where that
        is smaller, and whatever retention then no longer keeps dropped (so a write at
        steady state also trims, in the same request)."""

        def history(item: Item) -> list[Entry]:
            old = item.current
            old_body = None
            if old.inline is not None and new_body is not None and self.delta_history:
                try:
                    old_body = inline_body(item.versions(), item.version)
                except UndecodableBody as error:
                    # Kept as it is: `vhs verify` reports it; the new version does not
                    # depend on it.
                    logger.warning("%r version %d: %s", item.id, item.version, error)
            kept = old if new_body is None else supersede(old, old_body, new, new_body)
            kept = share_parts(kept, new)
            held = [*item.history, kept]
            after = Item(item.id, item.version + 1, new, tuple(held))
            return held[self.retention.expired_count(after, self.clock()) :]

        return history

    def _trim_if_due(self, item: Item | None) -> None:
        if item is None:
            return
        expired = self.retention.expired_count(item, self.clock())
        if expired < self.retention.trim_batch:
            return
        try:
            self.index.trim(item.id, item.version, len(item.history), expired)
        except (ClientError, BotoCoreError) as error:
            # The version is written; trimming is housekeeping that the next writer redoes
            # (expired entries are invisible to readers meanwhile), so it must not fail the put.
            logger.warning("could not trim the history of %r: %s", item.id, error)

    # --- reads -------------------------------------------------------------------------------

    def get(self, id: str, version: int | None = None) -> Record:
        """The current record, or a retained `version`. Raises RecordNotFound."""
        return self.read(self.locate(id, version))

    def locate(self, id: str, version: int | None = None) -> StoredVersion:
        """The current version of `id`, or a retained `version`, as one read of its item finds
        it: its number, content hash, size, type and time, without its body (`read` reads
        that). Raises RecordNotFound for an unknown id, a deleted record or a version not
        retained, and InvalidInput for a bad id or version."""
        id = keys.validate_id(id)
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or version < 1
        ):
            raise InvalidInput("version", "must be a whole number >= 1")
        item = self.index.read(id, current_only=version is None)
        if item is None:
            raise RecordNotFound(id, version)
        if version is None:
            if item.current.deleted:
                raise RecordNotFound(id, why=f"deleted at version {item.version}")
            return StoredVersion(item, item.version, item.current)
        for number, entry in self.retention.retained(item, self.clock()):
            if number == version:
                if entry.deleted:
                    raise RecordNotFound(id, version, "that version is a delete")
                return StoredVersion(item, number, entry, requested=version)
        raise RecordNotFound(id, version, "not retained")

    def read(self, found: StoredVersion) -> Record:
        """The record `found` (from `locate`) names, with its body."""
        try:
            return self._record(found)
        except DanglingPointer:
            # Between our read of the item and of the body, a newer write may have pushed the
            # version out of retention and the collector deleted its body. Read the item
            # again: the version is then no longer retained (or no longer current), and only
            # a pointer that still dangles is a fault.
            return self._record(self.locate(found.id, found.requested))

    def body_url(self, found: StoredVersion, expires_in: int) -> str | None:
        """A presigned GET URL of the body of `found`, valid for `expires_in` seconds, or None
        when the body is inline (it has no object of its own)."""
        if not found.in_s3:
            return None
        return self.bodies.presigned_url(
            self.body_key(found.id, found.entry.body_sha256), expires_in
        )

    def part_url(self, found: StoredVersion, name: str, expires_in: int) -> str | None:
        """A presigned GET URL of part `name` of `found`, or None when the part is inline.
        Raises PartNotFound."""
        part = self.stored_part(found, name)
        if not part.in_s3:
            return None
        return self.bodies.presigned_url(self.body_key(found.id, part.content_hash), expires_in)

    def read_part(self, found: StoredVersion, name: str) -> bytes:
        """The bytes of part `name` of `found` (from `locate`), checked against its sha256.
        Raises PartNotFound, BodyHashMismatch, and DanglingPointer only when the item read
        again still points at a missing object (as `read` does for bodies)."""
        try:
            return self._part_bytes(found, name)
        except DanglingPointer:
            return self._part_bytes(self.locate(found.id, found.requested), name)

    def stored_part(self, found: StoredVersion, name: str) -> StoredPart:
        """Part `name` of `found` as the item holds it (no bytes read). Raises PartNotFound."""
        part = found.entry.part(name)
        if part is None:
            raise PartNotFound(found.id, found.version, name)
        return part

    def _part_bytes(self, found: StoredVersion, name: str) -> bytes:
        part = self.stored_part(found, name)
        if part.in_s3:
            return self.bodies.get(self.body_key(found.id, part.content_hash), part.content_hash)
        try:
            return inline_part(found.item.versions(), found.version, part)
        except UndecodableBody as error:
            location = f"dynamodb://{self.table_name}/{found.id}#v{found.version}/{name}"
            raise BodyHashMismatch(
                location, part.content_hash, error.actual or "(undecodable)"
            ) from error

    def history(self, id: str) -> list[VersionInfo]:
        """The retained versions of `id`, oldest first, deletes included."""
        id = keys.validate_id(id)
        item = self.index.read(id)
        if item is None:
            raise RecordNotFound(id)
        return [
            self._info(id, number, entry)
            for number, entry in self.retention.retained(item, self.clock())
        ]

    def _record(self, found: StoredVersion) -> Record:
        id, entry = found.id, found.entry
        if entry.inline is not None:
            try:
                body = inline_body(found.item.versions(), found.version)
            except UndecodableBody as error:
                location = f"dynamodb://{self.table_name}/{id}"
                actual = error.actual if error.version == found.version else None
                raise BodyHashMismatch(
                    location, entry.content_hash, actual or "(undecodable)"
                ) from error
        else:
            body = self.bodies.get(
                keys.body_key(self.prefix, id, entry.body_sha256), entry.body_sha256
            )
        # Records with parts add what names and reads them; others stay as they always were.
        with_parts = (
            {
                "parts": self._parts_info(id, entry),
                "body_hash": entry.body_sha256,
                "read_part": lambda name: self.read_part(found, name),
            }
            if entry.parts
            else {}
        )
        return Record(
            id=id,
            version=found.version,
            updated_at=found.updated_at,
            content_type=found.content_type,
            body=body,
            content_hash=entry.content_hash,
            **with_parts,
        )

    def _info(self, id: str, version: int, entry: Entry) -> VersionInfo:
        if entry.deleted:
            location = None
        elif entry.inline is not None:
            location = "inline"
        else:
            location = self.bodies.location(keys.body_key(self.prefix, id, entry.body_sha256))
        return VersionInfo(
            version=version,
            updated_at=entry_time(entry),
            size=entry.size,
            content_hash=None if entry.deleted else entry.content_hash,
            deleted=entry.deleted,
            content_type=entry.content_type,
            location=location,
            parts=self._parts_info(id, entry),
        )

    def body_key(self, id: str, content_hash: str) -> str:
        return keys.body_key(self.prefix, id, content_hash)


def _token() -> str:
    return secrets.token_urlsafe(9)


def _largest_entry(inline_threshold: int, max_body_size: int) -> Entry:
    """The largest entry without parts a store so configured writes, by DynamoDB's rules: a
    put of the longest content type, the largest inline body and size, the longest codec name
    (a delete has neither body nor content type, and its flags are smaller)."""
    return Entry(
        updated_at=parse_timestamp("9999-12-31T23:59:59.999999Z", max_future=None),
        content_hash="f" * 64,
        size=max_body_size,
        written_at=10**10 - 1,
        token=_token(),
        content_type="x" * MAX_CONTENT_TYPE_LENGTH,
        inline=bytes(inline_threshold),
        codec=max(CODECS, key=len),
    )
