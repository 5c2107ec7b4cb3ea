"""What changed between two retained versions of a record.

Both versions come from one read of the item, so they are the versions as they stood together.
For a JSON record (both versions `application/json`) the answer carries an RFC 6902 JSON
Patch from the first to the second (patches.py); the bodies are read only when their hashes
differ (0 requests for an inline body, one S3 GET for each body in S3). For any other content
type it says whether the bodies differ, with their sizes and hashes, from the item alone.
Parts (docs/design.md, "Parts") are compared by name and hash, never read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from . import keys
from .codec import JSON_CONTENT_TYPE
from .errors import RecordNotFound, VersionNotRetained
from .model import Entry, Item, Record, StoredPart, StoredVersion, entry_time
from .patches import Operation, make_patch
from .retention import Retention

JSON = "json"
OPAQUE = "opaque"
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"


class Reader(Protocol):
    """What of a store a diff uses (VersionedHybridStore has it)."""

    index: Any
    retention: Retention
    clock: Callable[[], float]

    def read(self, found: StoredVersion) -> Record: ...


@dataclass(frozen=True)
class Side:
    """One of the two versions compared, as its entry describes it."""

    version: int
    updated_at: datetime
    content_type: str
    size: int  # the body's bytes
    content_hash: str  # the version's (with parts: its manifest's)
    body_hash: str  # the body's own sha256

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "updated_at": self.updated_at.isoformat(),
            "content_type": self.content_type,
            "size": self.size,
            "content_hash": self.content_hash,
            "body_hash": self.body_hash,
        }


@dataclass(frozen=True)
class PartChange:
    """A part by name: `change` is added, removed, changed (another hash or content type) or
    same; `old` and `new` are {content_hash, size, content_type}, None where it is absent."""

    change: str
    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        return {"change": self.change, "from": self.old, "to": self.new}


@dataclass(frozen=True)
class Diff:
    """`diff(id, a, b)`: from version `old` (a) to `new` (b). `patch` is the JSON Patch that
    turns a's record into b's (kind "json"; [] when the bodies are the same), None for kind
    "opaque"."""

    id: str
    old: Side
    new: Side
    kind: str
    body_changed: bool
    patch: list[Operation] | None
    parts: Mapping[str, PartChange] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The JSON form (`vhs diff --json`, docs/library.md)."""
        return {
            "id": self.id,
            "from": self.old.as_json(),
            "to": self.new.as_json(),
            "kind": self.kind,
            "body_changed": self.body_changed,
            "patch": self.patch,
            "parts": {name: change.as_json() for name, change in self.parts.items()},
        }


def diff_versions(store: Reader, id: str, a: int, b: int) -> Diff:
    """The difference from version `a` of `id` to version `b` (either order; equal gives no
    change). Raises InvalidInput for a bad id or number, RecordNotFound for an unknown id or a
    version that is a delete, VersionNotRetained for a version not retained."""
    id = keys.validate_id(id)
    keys.validate_version(a, "a")
    keys.validate_version(b, "b")
    item = store.index.read(id)
    if item is None:
        raise RecordNotFound(id)
    retained = dict(store.retention.retained(item, store.clock()))
    old, new = (_version(item, retained, number) for number in (a, b))
    body_changed = old.entry.body_sha256 != new.entry.body_sha256
    kind = JSON if old.content_type == new.content_type == JSON_CONTENT_TYPE else OPAQUE
    patch = None
    if kind == JSON:  # the bodies are read only when they differ
        bodies = [json.loads(store.read(v).body) for v in (old, new)] if body_changed else []
        patch = make_patch(*bodies) if bodies else []
    return Diff(id, _side(old), _side(new), kind, body_changed, patch, _parts(old, new))


def _version(item: Item, retained: Mapping[int, Entry], number: int) -> StoredVersion:
    entry = retained.get(number)
    if entry is None:
        kept = f"versions {min(retained)} to {max(retained)}"
        raise VersionNotRetained(item.id, number, f"not retained (the store keeps {kept})")
    if entry.deleted:
        raise RecordNotFound(item.id, number, "that version is a delete")
    return StoredVersion(item, number, entry, requested=number)


def _side(found: StoredVersion) -> Side:
    entry = found.entry
    return Side(
        found.version,
        entry_time(entry),
        found.content_type,
        entry.size,
        entry.content_hash,
        entry.body_sha256,
    )


def _part(part: StoredPart | None) -> dict[str, Any] | None:
    if part is None:
        return None
    return {"content_hash": part.content_hash, "size": part.size, "content_type": part.content_type}


def _parts(old: StoredVersion, new: StoredVersion) -> dict[str, PartChange]:
    changes = {}
    for name in sorted({*old.part_names, *new.part_names}):
        before, after = _part(old.entry.part(name)), _part(new.entry.part(name))
        if before is None or after is None:
            change = ADDED if before is None else REMOVED
        else:
            change = SAME if before == after else CHANGED
        changes[name] = PartChange(change, before, after)
    return changes
