"""What changed between two retained versions of a record.

Both versions come from one read of the item, so they are the versions as they stood together.
For a JSON record (both versions `application/json`) the answer carries an RFC 6902 JSON
Patch from the first to the second (vhs.json_patch); the bodies are read only when their hashes
differ (0 requests for an inline body, one S3 GET for each body in S3). For any other content
type it says whether the bodies differ, with their sizes and hashes, from the item alone.
Parts (docs/design.md, "Parts") are compared by name and hash, never read.

A diff is bounded, whatever the records: a body over MAX_BODY_BYTES is not read, and a patch
over MAX_PATCH_BYTES is given up as it is made; either way the answer says `too_large`
instead of carrying a patch. So a diff holds at most two parsed bodies of MAX_BODY_BYTES and
a patch of MAX_PATCH_BYTES (MEMORY_BOUND_BYTES, measured by tests/core/test_diff_limits.py),
and its JSON form always fits a Lambda response. A body that claims JSON and is not JSON by
the rules of a record (strict_json: stored before a door applied them, or staged in S3,
where no door parses it) makes the diff `opaque`, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from .. import keys
from ..codec import JSON_CONTENT_TYPE
from ..errors import InvalidInput, RecordNotFound, VersionNotRetained, never_or_no_longer
from ..json_patch import TOO_LARGE, UNREADABLE, Operation, make_patch
from ..model import Entry, Item, Record, StoredPart, StoredVersion, entry_time
from ..retention import Retention
from ..strict_json import parse_document

JSON = "json"
OPAQUE = "opaque"
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"
# The largest body a diff reads. Parsed, a body of JSON takes up to about 20 times its bytes
# (an array of empty objects: 3 bytes each in the text, 64 as a dict).
MAX_BODY_BYTES = 2 * 1024 * 1024
# The largest patch a diff carries, as compact UTF-8 JSON. Its JSON form as a Lambda response
# carries it (escaped again, non-ASCII as \u escapes) is at most about 3.5 times this: within
# the 6 MB of a response.
MAX_PATCH_BYTES = 1024 * 1024
# What one diff may hold at its peak, by the measure of tests/core/test_diff_limits.py (two
# bodies of MAX_BODY_BYTES in the costliest shapes, a patch up to its bound): well within the
# read API's memory (shapes.READ_API.function_memory_mb).
MEMORY_BOUND_BYTES = 192 * 1024 * 1024


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
    "opaque". Where both claim JSON and there is no patch, `patch_omitted` says why
    ("too_large" or "unreadable") and `reason` says it in words."""

    id: str
    old: Side
    new: Side
    kind: str
    body_changed: bool
    patch: list[Operation] | None
    parts: Mapping[str, PartChange] = field(default_factory=dict)
    patch_omitted: str | None = None
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON form (`vhs diff --json`, docs/library.md)."""
        return {
            "id": self.id,
            "from": self.old.as_json(),
            "to": self.new.as_json(),
            "kind": self.kind,
            "body_changed": self.body_changed,
            "patch": self.patch,
            "patch_omitted": self.patch_omitted,
            "reason": self.reason,
            "parts": {name: change.as_json() for name, change in self.parts.items()},
        }

    def without_patch(self, reason: str) -> Diff:
        """This diff with its patch left out as too large (`reason`: for whom)."""
        return replace(self, patch=None, patch_omitted=TOO_LARGE, reason=reason)


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
    diff = Diff(id, _side(old), _side(new), OPAQUE, body_changed, None, _parts(old, new))
    if not old.content_type == new.content_type == JSON_CONTENT_TYPE:
        return diff
    if not body_changed:  # the bodies are read only when they differ
        return replace(diff, kind=JSON, patch=[])
    large = [v.version for v in (old, new) if v.entry.size > MAX_BODY_BYTES]
    if large:
        return replace(diff, kind=JSON).without_patch(
            f"version {large[0]}'s body is over the {MAX_BODY_BYTES:,} bytes a diff reads"
        )
    records = []
    for version in (old, new):
        try:
            records.append(parse_document(store.read(version).body, "body"))
        except InvalidInput as error:
            reason = f"version {version.version}'s body is not JSON: {error.reason}"
            return replace(diff, patch_omitted=UNREADABLE, reason=reason)
    patch = make_patch(*records, limit=MAX_PATCH_BYTES)
    if patch is None:
        return replace(diff, kind=JSON).without_patch(
            f"the patch is over the {MAX_PATCH_BYTES:,} bytes a diff carries"
        )
    return replace(diff, kind=JSON, patch=patch)


def _version(item: Item, retained: Mapping[int, Entry], number: int) -> StoredVersion:
    entry = retained.get(number)
    if entry is None:
        kept = f"versions {min(retained)} to {max(retained)}"
        why = never_or_no_longer(item.version, number)
        raise VersionNotRetained(item.id, number, f"{why} (the store keeps {kept})")
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
