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

Parts (docs/design.md, "Parts"): a put with parts is named by the sha256 of a manifest, the
canonical JSON of `{"format": "vhs-parts/1", "body": [body sha256, body content type],
"parts": [[name, sha256, content type], ...]}` with the parts sorted by name; that hash is the
ordering key's, and the key's content type is the body's.

Retention (README "Retention", docs/design.md): each version remembers when it was written (the
store's clock). `ModelStore.history(id, now)` keeps the current version and, walking back, at
most `retain` earlier ones, none whose successor was written more than `age` ago. A current
delete keeps none once `after_delete` has passed since it was written, and a purge none at all;
a later put does not bring back what the delete had dropped by the time that put was written.
A purge of an id whose current version is a delete (whatever its own outcome) flags that
tombstone as a purge; a purge that finds a put current purges nothing.
"""

from __future__ import annotations

import base64
import copy
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


def claimed(record: Any, content_type: str | None) -> Any:
    """`record` as a put may carry it under `content_type`: bytes that claim JSON must be JSON
    (every door parses them, docs/ingest.md), so bytes that are not become a JSON string of the
    same length (base64 of them, quoted), which stays incompressible enough to keep its size
    class (inline or S3)."""
    if not isinstance(record, bytes) or content_type != JSON:
        return record
    try:
        json.loads(record)
        return record
    except ValueError:
        pass
    if len(record) < 2:
        return b"0"
    return b'"' + base64.b64encode(record)[: len(record) - 2] + b'"'


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Part:
    """A named binary part of a put: its bytes and content type."""

    name: str
    data: bytes = field(repr=False)
    content_type: str = OCTETS

    @property
    def content_hash(self) -> str:
        return sha256(self.data)

    def argument(self) -> tuple[bytes, str]:
        """The value `put(parts=...)` takes for it."""
        return (self.data, self.content_type)

    def __repr__(self) -> str:
        return f"Part({self.name!r}, <{len(self.data)} B>, {self.content_type!r})"


def manifest_hash(body: bytes, body_type: str, parts: Iterable[Part]) -> str:
    """A version's hash with parts, from docs/design.md "Parts" (the version's identity)."""
    manifest = {
        "format": "vhs-parts/1",
        "body": [sha256(body), body_type],
        "parts": sorted([p.name, p.content_hash, p.content_type] for p in parts),
    }
    return sha256(canonical_body(manifest))


@dataclass(frozen=True)
class Put:
    id: str
    record: Any = field(compare=False)
    at: datetime
    content_type: str | None = None  # as passed to put(); see `type`
    parts: tuple[Part, ...] = ()  # in the order given to put(): the order must not matter
    body: bytes = field(init=False, repr=False)
    content_hash: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        body = canonical_body(self.record)
        object.__setattr__(self, "body", body)
        content_hash = manifest_hash(body, self.type, self.parts) if self.parts else sha256(body)
        object.__setattr__(self, "content_hash", content_hash)

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
        parts = f", parts={list(self.parts)!r}" if self.parts else ""
        return (
            f"Put({self.id!r}, {shown!r}, {self.at:%H:%M:%S}{typed}{parts}, "
            f"{self.content_hash[:8]})"
        )


@dataclass(frozen=True)
class Delete:
    id: str
    at: datetime
    content_hash: str = TOMBSTONE
    body: None = None
    type: str = JSON  # in the ordering key; a delete has no content type to report
    purge: bool = False
    parts: tuple[Part, ...] = ()

    @property
    def order_key(self) -> tuple[datetime, str, str]:
        return (self.at, TOMBSTONE, JSON)

    @property
    def key(self) -> tuple[datetime, str]:
        return (self.at, TOMBSTONE)

    def __repr__(self) -> str:
        purge = ", purge=True" if self.purge else ""
        return f"Delete({self.id!r}, {self.at:%H:%M:%S}{purge})"


Write = Put | Delete


@dataclass(frozen=True)
class Version:
    number: int
    at: datetime
    content_hash: str
    body: bytes | None  # None for a delete
    type: str  # JSON for a delete (see the module's docstring)
    written_at: float = 0.0  # the store's clock when this version was written
    parts: tuple[Part, ...] = ()
    purge: bool = False  # a delete that keeps no earlier version

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

    @property
    def size(self) -> int:
        """What history reports: the body's size (not its parts'), 0 for a delete."""
        return len(self.body) if self.body is not None else 0

    def part_infos(self) -> dict[str, tuple[str, int, str]]:
        """name → (sha256, size, content type), as `Record.parts` and `history` report."""
        return {p.name: (p.content_hash, len(p.data), p.content_type) for p in self.parts}


class ModelStore:
    """The sequential model: every version ever written per id, and the retention rules.

    `retain`, `age` and `after_delete` are Retention's (ages in seconds, None: no limit); the
    default keeps the last `retain` earlier versions with no limit in time."""

    def __init__(
        self, retain: int = 5, *, age: float | None = None, after_delete: float | None = None
    ) -> None:
        self.retain = retain
        self.age = age
        self.after_delete = after_delete
        self.versions: dict[str, list[Version]] = {}

    def copy(self) -> ModelStore:
        """The state as it is now (what an out-of-date read may still see later)."""
        return copy.deepcopy(self)

    def apply(self, write: Write, now: float = 0.0) -> tuple[str, int]:
        """Apply one write at the clock `now`; return the (outcome, current version) the
        store must report."""
        outcome, number = self._order(write, now)
        if isinstance(write, Delete) and write.purge:
            current = self.versions[write.id][-1]
            if current.deleted:  # a purge that finds a put current purges nothing
                self.versions[write.id][-1] = replace(current, purge=True)
        return outcome, number

    def _order(self, write: Write, now: float) -> tuple[str, int]:
        versions = self.versions.setdefault(write.id, [])
        made = "deleted" if isinstance(write, Delete) else "stored"
        if versions:
            current = versions[-1]
            if write.order_key < current.order_key:
                return "stale", current.number
            if write.order_key == current.order_key:
                return "unchanged", current.number
            if (write.content_hash, write.type) == (current.content_hash, current.type):
                # Only updated_at moves; the version keeps when it was written.
                versions[-1] = replace(current, at=write.at)
                return "unchanged", current.number
        number = versions[-1].number + 1 if versions else 1
        versions.append(
            Version(number, write.at, write.content_hash, write.body, write.type, now, write.parts)
        )
        return made, number

    def purged(self, id: str) -> bool:
        """Whether a purge has taken effect: the current version is a purging delete."""
        current = self.current(id)
        return current is not None and current.purge

    def current(self, id: str) -> Version | None:
        versions = self.versions.get(id)
        return versions[-1] if versions else None

    def history(self, id: str, now: float = 0.0) -> list[Version]:
        """The versions a reader can still see at the clock `now`, oldest first."""
        versions = self.versions.get(id, [])
        if not versions:
            return []
        kept = [versions[-1]]
        if self._dropped(versions[-1], now):
            return kept
        for earlier, successor in zip(versions[-2::-1], versions[:0:-1], strict=True):
            if len(kept) > self.retain:
                break
            if self.age is not None and now - successor.written_at > self.age:
                break
            kept.append(earlier)
            # What a delete had dropped when the next version came stays dropped.
            if self._dropped(earlier, successor.written_at):
                break
        return kept[::-1]

    def _dropped(self, version: Version, now: float) -> bool:
        """Whether a delete keeps no earlier version at `now`: a purge, or past after_delete."""
        if not version.deleted:
            return False
        return version.purge or (
            self.after_delete is not None and now - version.written_at >= self.after_delete
        )

    def retained(self, id: str, number: int, now: float = 0.0) -> Version | None:
        """Version `number` if a reader can still see it at `now` (deletes included)."""
        return next((v for v in self.history(id, now) if v.number == number), None)

    def as_of(self, id: str, moment: float | datetime, now: float = 0.0) -> tuple[str, int | None]:
        """What a read of `id` as of `moment` must answer at the clock `now` (docs/library.md,
        "As of a moment"): by the store's clock when `moment` is seconds, by the source's
        (updated_at) when it is a datetime. A version is current from its own time, or a
        predecessor's if that is later; the answer is the last version current by `moment`:
        ("found", n), ("deleted", n) for a delete, ("not retained", None) when that version,
        or any before `moment` if there is none, is no longer visible, ("not yet", None)
        before version 1, ("unknown", None) for an id never written."""
        versions = self.versions.get(id, [])
        if not versions:
            return "unknown", None
        found, latest = None, None
        for version in versions:
            own = version.at if isinstance(moment, datetime) else version.written_at
            latest = own if latest is None else max(latest, own)
            if latest > moment:
                break
            found = version
        visible = {v.number: v for v in self.history(id, now)}
        if found is None:
            return ("not yet" if 1 in visible else "not retained"), None
        if found.number not in visible:
            return "not retained", None
        return ("deleted" if found.deleted else "found"), found.number


def winner(writes: Iterable[Write]) -> Write | None:
    """The write an id's state must end at: the one with the highest ordering key."""
    return max(writes, key=lambda w: w.order_key, default=None)
