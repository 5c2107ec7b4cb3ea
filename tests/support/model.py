"""An in-memory model of the store's ordering rules, written from the spec, not from vhs code.

Every write carries an ordering key (updated_at, content hash, content type), where a
delete's hash is "~" and so sorts above every hex digest, and a delete's content type is
"application/json" (the store keeps none for a delete, and reads none as that). A put's content
type is the one it was given, else "application/json" for a JSON record and
"application/octet-stream" for bytes. Strings compare by code point. Per id:

* a key below the current one is stale; an equal key is unchanged;
* a higher key with the same content (hash and content type) only moves updated_at forward
  (unchanged, no version);
* a higher key with other content (another hash, or another content type) is the next version
  (stored, or deleted for a delete).

So the current state of an id is always the write with the highest key, whatever the order of
arrival. `ModelStore` applies writes one by one (to predict each outcome and version), and
`winner` states the order-independent claim directly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

TOMBSTONE = "~"
JSON = "application/json"
OCTETS = "application/octet-stream"


def canonical_body(record: Any) -> bytes:
    """The bytes the store keeps for a record: bytes as given, JSON canonically."""
    if isinstance(record, bytes):
        return record
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


@dataclass(frozen=True)
class Put:
    id: str
    record: Any = field(compare=False)
    at: datetime
    content_type: str | None = None  # as passed to put(); see `type`
    body: bytes = field(init=False, repr=False)
    content_hash: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        body = canonical_body(self.record)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "content_hash", hashlib.sha256(body).hexdigest())

    @property
    def type(self) -> str:
        """The content type the store reports for this put."""
        if self.content_type is not None:
            return self.content_type
        return OCTETS if isinstance(self.record, bytes) else JSON

    @property
    def order_key(self) -> tuple[datetime, str, str]:
        return (self.at, self.content_hash, self.type)

    @property
    def key(self) -> tuple[datetime, str]:
        """(updated_at, hash): the ordering key without its content type, the tie-break that
        decides only between the same bytes at the same time."""
        return (self.at, self.content_hash)

    def __repr__(self) -> str:
        shown = self.record if not isinstance(self.record, bytes) else f"<{len(self.record)} B>"
        typed = f", {self.content_type!r}" if self.content_type is not None else ""
        return f"Put({self.id!r}, {shown!r}, {self.at:%H:%M:%S}{typed}, {self.content_hash[:8]})"


@dataclass(frozen=True)
class Delete:
    id: str
    at: datetime
    content_hash: str = TOMBSTONE
    body: None = None
    type: str = JSON  # in the ordering key; a delete has no content type to report

    @property
    def order_key(self) -> tuple[datetime, str, str]:
        return (self.at, TOMBSTONE, JSON)

    @property
    def key(self) -> tuple[datetime, str]:
        return (self.at, TOMBSTONE)

    def __repr__(self) -> str:
        return f"Delete({self.id!r}, {self.at:%H:%M:%S})"


Write = Put | Delete


@dataclass(frozen=True)
class Version:
    number: int
    at: datetime
    content_hash: str
    body: bytes | None  # None for a delete
    type: str  # JSON for a delete (see the module's docstring)

    @property
    def deleted(self) -> bool:
        return self.content_hash == TOMBSTONE

    @property
    def order_key(self) -> tuple[datetime, str, str]:
        return (self.at, self.content_hash, self.type)

    @property
    def content_type(self) -> str | None:
        """What the store reports: None for a delete."""
        return None if self.deleted else self.type


class ModelStore:
    """The sequential model: every version ever written per id, and the retention window."""

    def __init__(self, retain: int = 5) -> None:
        self.retain = retain
        self.versions: dict[str, list[Version]] = {}

    def apply(self, write: Write) -> tuple[str, int]:
        """Apply one write; return the (outcome, current version) the store must report."""
        versions = self.versions.setdefault(write.id, [])
        made = "deleted" if isinstance(write, Delete) else "stored"
        if not versions:
            versions.append(Version(1, write.at, write.content_hash, write.body, write.type))
            return made, 1
        current = versions[-1]
        if write.order_key < current.order_key:
            return "stale", current.number
        if write.order_key == current.order_key:
            return "unchanged", current.number
        if (write.content_hash, write.type) == (current.content_hash, current.type):
            versions[-1] = replace(current, at=write.at)
            return "unchanged", current.number
        number = current.number + 1
        versions.append(Version(number, write.at, write.content_hash, write.body, write.type))
        return made, number

    def current(self, id: str) -> Version | None:
        versions = self.versions.get(id)
        return versions[-1] if versions else None

    def history(self, id: str) -> list[Version]:
        """The versions a reader can still see: the current one and `retain` before it."""
        return self.versions.get(id, [])[-(self.retain + 1) :]


def winner(writes: Iterable[Write]) -> Write | None:
    """The write an id's state must end at: the one with the highest ordering key."""
    return max(writes, key=lambda w: w.order_key, default=None)
