"""The change feed: one notification per stored version and per delete, from the table's stream.

A notification is derived from one DynamoDB stream record by comparing its old and new images
(see docs/changes.md for why this is exactly once):

* the record made new versions iff the new image's `v` is greater than the old image's (or
  there is no old image): every version number in (old v, new v] gets one notification,
  described by its entry in the new image (the current entry or the history). Every write adds
  exactly 1 to `v`, so this is one version per record; a larger step is handled the same way;
* everything else makes none: a touch (the same content with a later timestamp moves
  `c[0].t` and leaves `v`), a history trim (`REMOVE p[...]`), the garbage collector's `gc:*`
  markers, and REMOVE events (a whole item deleted by TTL or by hand, never by the store,
  whose deletes are versions).

A notification is JSON: ``{"id", "version", "updated_at", "change": "stored"|"deleted",
"location", "content_hash", "size", "content_type", "path"}``. `updated_at` is the version's
own timestamp in the store's fixed-width RFC 3339 form (UTC, microseconds, "Z"); `location` is
"inline" for a body held in the item, ``s3://bucket/key`` for a body in S3 and null for a
delete; `path` is where the read API serves the version's body, relative to its URL
(``/records/<id, percent-encoded as one segment>/versions/<n>``; null for a delete), so a
consumer fetches it over HTTP, with the content hash as its ETag, without reading the table.
A replay (`vhs reindex`, reindex.py) adds ``"replay": true`` and ``"replay_run": <run id>``
and is otherwise exactly the live notification of the same version (less a patch). An update
of a JSON record adds ``"patch"`` (its JSON Patch from the previous version) or
``"patch_omitted"`` (why not): notification_patch.py. A purging delete adds
``"purge": true``: every earlier version of the id is gone, so subscribers purge their copies
too. A purge of an id already deleted keeps its version (the
stream shows the same `v`, the tombstone newly flagged): it is notified again, with
``"purge": true`` and a deduplication id of its own.

Notifications are published (to the SNS FIFO topic, in order, and again for a dead-lettered
stream range) by publish.py.

This module has no Lambda or Powertools dependency; handlers/changes.py wires it to Lambda.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..history.stored_deltas import Dictionaries
from ..index.codec import (
    CURRENT,
    MalformedItem,
    body_location,
    id_of,
    item_from_dynamo,
    part_location,
    version_of,
)
from ..model import Entry
from ..ordering import TOMBSTONE_HASH
from ..shapes import SNS_MAX_MESSAGE_GROUP_ID
from .notification_patch import patch_fields

log = logging.getLogger(__name__)

STORED = "stored"
DELETED = "deleted"

# SNS FIFO message group ids: 1-128 ASCII letters, digits and punctuation.
_GROUP_ID_SAFE = re.compile(f"^[\\x21-\\x7e]{{1,{SNS_MAX_MESSAGE_GROUP_ID}}}$")
# The prefix of a digested group id. An id that happens to look like a digested one shares
# its group: harmless, the two are then only ordered together.
_DIGEST_GROUP_PREFIX = "~"


@dataclass(frozen=True)
class Change:
    """One notification: a stored version or a delete of one record id."""

    id: str
    version: int
    updated_at: str  # RFC 3339, UTC
    change: str  # STORED or DELETED
    location: str | None  # "inline", "s3://bucket/key", or None for a delete
    content_hash: str | None = None
    size: int | None = None
    content_type: str | None = None
    purge: bool = False  # a delete that drops every earlier version: purge them downstream
    # A version with parts (docs/design.md, "Parts"): name → {content_hash, size,
    # content_type, location}. None (and absent from the message) for a record without parts.
    parts: Mapping[str, Mapping[str, Any]] | None = field(default=None, hash=False)
    # Set on a replay (`vhs reindex`): the run that published it. None on a live notification.
    replay_run: str | None = None
    # An update of a JSON record: the JSON Patch from the previous version, or why there is
    # none (notification_patch.py). Both None (and absent from the message) for other changes.
    patch: Sequence[Mapping[str, Any]] | None = field(default=None, hash=False)
    patch_omitted: str | None = None

    @property
    def path(self) -> str | None:
        """The read API's path of this version's body (None for a delete)."""
        return None if self.change == DELETED else version_path(self.id, self.version)

    @property
    def replay(self) -> bool:
        return self.replay_run is not None

    def message(self) -> dict[str, Any]:
        message = {
            "id": self.id,
            "version": self.version,
            "updated_at": self.updated_at,
            "change": self.change,
            "location": self.location,
            "content_hash": self.content_hash,
            "size": self.size,
            "content_type": self.content_type,
        }
        if self.purge:
            message["purge"] = True
        message["path"] = self.path
        if self.parts:
            # Each part's own path in the read API beside its hash (its ETag), so a consumer
            # fetches exactly the parts that changed. Part names are path-safe as they are.
            message["parts"] = {
                name: {**part, "path": f"{self.path}/parts/{name}"}
                for name, part in self.parts.items()
            }
        if self.patch is not None:
            message["patch"] = list(self.patch)
        if self.patch_omitted is not None:
            message["patch_omitted"] = self.patch_omitted
        if self.replay_run is not None:
            message["replay"] = True
            message["replay_run"] = self.replay_run
        return message

    def body(self) -> str:
        return json.dumps(self.message(), ensure_ascii=False, separators=(",", ":"))

    @property
    def group_id(self) -> str:
        return message_group_id(self.id)

    @property
    def deduplication_id(self) -> str:
        return deduplication_id(self)

    @classmethod
    def from_message(cls, message: Mapping[str, Any] | str) -> Change:
        data = json.loads(message) if isinstance(message, str) else message
        fields = {name: data.get(name) for name in cls.__dataclass_fields__}
        fields["purge"] = data.get("purge") is True
        fields["replay_run"] = data.get("replay_run") if data.get("replay") is True else None
        return cls(**fields)

    def replayed(self, run_id: str) -> Change:
        """This notification as run `run_id` of a reindex publishes it again."""
        return replace(self, replay_run=run_id)


def version_path(id: str, version: int) -> str:
    """Where the read API serves version `version` of `id`, relative to its URL (the
    ReadApiUrl stack output): the id is percent-encoded as one path segment, so an id holding
    "/", "?", "%" or non-ASCII characters is still one segment."""
    return f"/records/{urllib.parse.quote(id, safe='')}/versions/{version}"


def message_group_id(id: str) -> str:
    """The SNS FIFO message group of a record id: the id itself when SNS accepts it (printable
    ASCII, at most 128 characters), else a digest of it. Ids are up to 256 Unicode
    characters, so some must be digested."""
    if _GROUP_ID_SAFE.match(id):
        return id
    return _DIGEST_GROUP_PREFIX + hashlib.sha256(id.encode()).hexdigest()


def deduplication_id(change: Change) -> str:
    """The SNS FIFO deduplication id of a notification: a digest (64 hex characters, within
    SNS's 128) of the id, the version and what the version is, and for a replay its run.
    Retries of one stream record (or of one replayed page) derive the same one. Including the
    content hash and timestamp keeps a version of an item that was removed and written again
    (versions restart at 1) from being taken for a duplicate of the old one."""
    parts = [change.id, str(change.version), change.content_hash or TOMBSTONE_HASH]
    parts.append(change.updated_at)
    if change.purge:  # a purge of an already deleted id: not a duplicate of the delete
        parts.append("purge")
    if change.replay_run is not None:
        # A replay must not be dropped as a duplicate of the live notification published
        # within the last 5 minutes, but a retried page of the same run must be.
        parts += ["replay", change.replay_run]
    key = "\x00".join(parts)
    return hashlib.sha256(key.encode()).hexdigest()


# --- deriving changes from stream images ---------------------------------------------------


# A stream image is an item as index/codec.py lays it out; one that is not raises this.
MalformedImage = MalformedItem


@dataclass(frozen=True)
class Derived:
    """What one stream record means for the feed."""

    id: str | None
    changes: tuple[Change, ...] = ()
    # Why there is no notification, when there is none: "removed" (a REMOVE event), "same
    # version" (touch, trim, GC marker), "no versions" (an item with no entry, such as only a
    # GC marker).
    reason: str | None = None
    # Version numbers the record made but whose entries its new image no longer holds (only
    # possible if `v` stepped by more than 1 with retention trimming in between).
    unknown_versions: tuple[int, ...] = ()


def _version(image: Mapping[str, Any] | None) -> int:
    if not image or CURRENT not in image:
        return 0
    return version_of(image) or 0


def change_of(id: str, version: int, entry: Entry, *, bucket: str, prefix: str) -> Change:
    deleted = entry.deleted
    return Change(
        id=id,
        version=version,
        updated_at=entry.updated_at,
        change=DELETED if deleted else STORED,
        location=body_location(entry, id, bucket=bucket, prefix=prefix),
        content_hash=None if deleted else entry.content_hash,
        size=None if deleted else entry.size,
        content_type=None if deleted else entry.content_type,
        purge=deleted and entry.purge,
        parts={
            part.name: {
                "content_hash": part.content_hash,
                "size": part.size,
                "content_type": part.content_type,
                "location": part_location(part, id, bucket=bucket, prefix=prefix),
            }
            for part in entry.parts
        }
        or None,
    )


def changes_from_images(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    *,
    bucket: str,
    prefix: str = "",
    dictionaries: Dictionaries | None = None,
) -> Derived:
    """The notifications one stream record stands for, from its two images (DynamoDB JSON, as
    in a Lambda event or a GetRecords response; binary values are decoded only for a patch,
    with `dictionaries` for a body packed with one)."""
    image = new if new is not None else old
    id = id_of(image)
    if new is None:
        return Derived(id, reason="removed")
    new_version = _version(new)
    if new_version == 0:
        return Derived(id, reason="no versions")
    old_version = _version(old)
    purged_in_place = new_version == old_version and _purged_in_place(old, new)
    if new_version <= old_version and not purged_in_place:
        return Derived(id, reason="same version")
    # Binary values (inline bodies) are never decoded: only where a body lives is needed.
    item = item_from_dynamo(new, with_bodies=False)
    if item is None:
        raise MalformedImage("the new image has no current entry")
    if purged_in_place:
        # A purge of an id already deleted: the same version, now a purge.
        return Derived(
            id, (change_of(id, item.version, item.current, bucket=bucket, prefix=prefix),)
        )
    held = dict(item.versions())
    changes = []
    unknown = []
    for version in range(old_version + 1, new_version + 1):
        entry = held.get(version)
        if entry is None:
            unknown.append(version)
            continue
        changes.append(change_of(id, version, entry, bucket=bucket, prefix=prefix))
    if new_version == old_version + 1 and changes and changes[0].change == STORED:
        changes[0] = replace(changes[0], **patch_fields(old, new, dictionaries=dictionaries))
    return Derived(id, tuple(changes), unknown_versions=tuple(unknown))


def _purged_in_place(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    old_item = item_from_dynamo(old, with_bodies=False) if old else None
    new_item = item_from_dynamo(new, with_bodies=False)
    return (
        old_item is not None
        and new_item is not None
        and new_item.current.deleted
        and new_item.current.purge
        and not old_item.current.purge
    )


def changes_from_record(
    record: Mapping[str, Any],
    *,
    bucket: str,
    prefix: str = "",
    dictionaries: Dictionaries | None = None,
) -> Derived:
    """The notifications of one record of a Lambda DynamoDB stream event."""
    stream = record.get("dynamodb") or {}
    derived = changes_from_images(
        stream.get("OldImage"),
        stream.get("NewImage"),
        bucket=bucket,
        prefix=prefix,
        dictionaries=dictionaries,
    )
    if derived.id is None and stream.get("Keys"):
        derived = Derived(
            id_of(stream["Keys"]),
            derived.changes,
            derived.reason,
            derived.unknown_versions,
        )
    return derived
