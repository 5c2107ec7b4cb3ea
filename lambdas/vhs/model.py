"""Plain values passed between the store, the index and callers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from .errors import PartNotFound
from .ordering import TOMBSTONE_HASH, OrderKey, Outcome
from .strict_json import parse_document
from .timestamps import stored_to_datetime


@dataclass(frozen=True)
class StoredPart:
    """One named binary part of a version, as the index holds it: content-addressed like a
    body (in S3 under keys.body_key(prefix, id, content_hash)), or inline when small."""

    name: str
    content_hash: str  # sha256 hex of the part's bytes
    size: int
    content_type: str
    inline: bytes | None = None  # the stored (maybe compressed) bytes when inline
    codec: str | None = None

    @property
    def in_s3(self) -> bool:
        return self.inline is None


@dataclass(frozen=True)
class Entry:
    """One version of a record as the index holds it.

    A version with parts (docs/design.md, "Parts") has a `content_hash` that names the whole
    version (the sha256 of its manifest: the body's hash and content type and every part's
    name, hash and content type), and keeps its body's own hash in `body_hash`. Without parts
    `body_hash` is None and `content_hash` is the body's hash, as it always was."""

    updated_at: str  # stored form, see timestamps.parse_timestamp
    content_hash: str  # sha256 hex, or TOMBSTONE_HASH for a delete
    size: int
    written_at: int  # epoch seconds when this version was written (retention clock)
    token: str  # the writer's token: recognises our own write after a lost response
    content_type: str | None = None
    inline: bytes | None = None  # the stored (maybe compressed) body when it is inline
    codec: str | None = None
    # The zstd dictionary an inline body packed with packing.ZSTD needs (its id).
    dictionary: str | None = None
    purge: bool = False  # a delete that keeps no earlier version (retention.py)
    # A delete whose earlier versions the collector found dropped (`after_delete` had passed)
    # when it condemned their bodies: they stay dropped whatever is written after it.
    dropped: bool = False
    body_hash: str | None = None  # the body's own sha256, when content_hash is a manifest's
    parts: tuple[StoredPart, ...] = ()  # sorted by name

    @property
    def body_sha256(self) -> str:
        """The sha256 of the body's bytes (its S3 key's name when it is in S3)."""
        return self.body_hash or self.content_hash

    def part(self, name: str) -> StoredPart | None:
        return next((p for p in self.parts if p.name == name), None)

    def s3_objects(self) -> dict[str, int]:
        """The S3 objects this version references, by sha256, with their sizes: its body when
        that is in S3, and each of its parts in S3. The one answer the collector (what is
        referenced), `vhs verify` (what to check) and writers (what need not be uploaded
        again) share."""
        objects = {p.content_hash: p.size for p in self.parts if p.in_s3}
        if self.in_s3:
            objects[self.body_sha256] = self.size
        return objects

    @property
    def deleted(self) -> bool:
        return self.content_hash == TOMBSTONE_HASH

    @cached_property
    def order_key(self) -> OrderKey:
        """Computed once an entry (a value: it never changes), however many of the write's
        collaborators read it."""
        return OrderKey.of(self.updated_at, self.content_hash, self.content_type)

    @property
    def in_s3(self) -> bool:
        return not self.deleted and self.inline is None


@dataclass(frozen=True)
class Item:
    """The index item of one id: the current entry and the earlier entries still held."""

    id: str
    version: int
    current: Entry
    history: tuple[Entry, ...] = ()

    def versions(self) -> list[tuple[int, Entry]]:
        """Every held entry with its version number, oldest first."""
        first = self.version - len(self.history)
        numbered = [(first + i, entry) for i, entry in enumerate(self.history)]
        return [*numbered, (self.version, self.current)]


@dataclass(frozen=True)
class PartInfo:
    """A part of a version as readers see it: where it lives ("inline" or s3://bucket/key)."""

    name: str
    content_hash: str
    size: int
    content_type: str
    location: str


@dataclass(frozen=True)
class PutResult:
    id: str
    outcome: Outcome
    version: int
    content_hash: str  # of the body (the version, with parts) put, whatever the outcome
    location: str | None  # "inline" or s3://...; None when stale: nothing was stored
    body_hash: str | None = None  # with parts: the body's own sha256 (content_hash: the version's)
    parts: Mapping[str, PartInfo] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.id}: {self.outcome} (version {self.version})"


@dataclass(frozen=True)
class DeleteResult:
    id: str
    outcome: Outcome
    version: int
    purged: bool = False  # the record's earlier versions are gone (a purge took effect)


@dataclass(frozen=True)
class VersionInfo:
    version: int
    updated_at: datetime
    size: int
    content_hash: str | None
    deleted: bool = False
    content_type: str | None = None
    location: str | None = None
    parts: Mapping[str, PartInfo] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    id: str
    version: int
    updated_at: datetime
    content_type: str
    body: bytes = field(repr=False)
    content_hash: str = ""
    parts: Mapping[str, PartInfo] = field(default_factory=dict)
    body_hash: str | None = None  # with parts: the body's own sha256
    # Reads one part's bytes, verified by its hash (VersionedHybridStore.read_part).
    read_part: Callable[[str], bytes] | None = field(default=None, repr=False, compare=False)

    def json(self) -> Any:
        """The body as JSON, read by the rules every door applies (strict_json). Raises
        InvalidRecord (field "body", saying why) for a body that is not JSON by them: one
        stored before the doors applied them, or staged in S3, where no door parses it."""
        return parse_document(self.body, "body")

    def part(self, name: str) -> bytes:
        """The bytes of part `name`, read now (lazily) and checked against its sha256. Raises
        PartNotFound for a name the version does not have, BodyHashMismatch for wrong bytes."""
        if self.read_part is None:
            raise PartNotFound(self.id, self.version, name)
        return self.read_part(name)


@dataclass(frozen=True)
class StoredVersion:
    """One version of a record as its item was read (`VersionedHybridStore.locate`): what is
    known of it without reading its body. `requested` is the version asked for (None: the
    latest), so that a read that must be redone asks for the same thing."""

    item: Item = field(repr=False)
    version: int
    entry: Entry
    requested: int | None = None

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def content_hash(self) -> str:
        return self.entry.content_hash

    @property
    def content_type(self) -> str:
        return self.entry.content_type or ""

    @property
    def size(self) -> int:
        return self.entry.size

    @property
    def updated_at(self) -> datetime:
        return entry_time(self.entry)

    @property
    def in_s3(self) -> bool:
        return self.entry.in_s3

    @property
    def part_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.entry.parts)


def entry_time(entry: Entry) -> datetime:
    return stored_to_datetime(entry.updated_at)
