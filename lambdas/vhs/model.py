"""Plain values passed between the store, the index and callers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .ordering import TOMBSTONE_HASH, OrderKey, Outcome, stored_to_datetime


@dataclass(frozen=True)
class Entry:
    """One version of a record as the index holds it."""

    updated_at: str  # stored form, see ordering.parse_timestamp
    content_hash: str  # sha256 hex, or TOMBSTONE_HASH for a delete
    size: int
    written_at: int  # epoch seconds when this version was written (retention clock)
    token: str  # the writer's token: recognises our own write after a lost response
    content_type: str | None = None
    inline: bytes | None = None  # the stored (maybe compressed) body when it is inline
    codec: str | None = None
    purge: bool = False  # a delete that keeps no earlier version (retention.py)

    @property
    def deleted(self) -> bool:
        return self.content_hash == TOMBSTONE_HASH

    @property
    def order_key(self) -> OrderKey:
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
class PutResult:
    id: str
    outcome: Outcome
    version: int
    content_hash: str
    location: str

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


@dataclass(frozen=True)
class Record:
    id: str
    version: int
    updated_at: datetime
    content_type: str
    body: bytes = field(repr=False)
    content_hash: str = ""

    def json(self) -> Any:
        return json.loads(self.body)


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


def entry_time(entry: Entry) -> datetime:
    return stored_to_datetime(entry.updated_at)
