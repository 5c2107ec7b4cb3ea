"""VersionedHybridStore: a body store (S3) and an index (DynamoDB), composed; the public façade
(configuration, the validated writes, the reads).

Writes are two-phase. A body over the inline threshold goes to S3 first, under a key named by
its content; one conditional DynamoDB write then makes it current. A crash between the phases
leaves at worst an unreferenced object, which the garbage collector removes later; a reader
never sees a pointer to a body that is not yet in S3. Deletes write a tombstone to DynamoDB and
leave the bodies to the garbage collector: with content addressing another version may share
a key, so nothing on a write or failure path deletes a body. How a put is uploaded and written
(with parts or without), and a delete, is the store's writer's (write_path.Writer); the
index's three kinds of write (blind put, planned put, delete) are in index/table.py."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from . import keys
from .aws import aws_client
from .bodies.dictionaries import DictionaryStore
from .bodies.parts import PartBody, encode_parts
from .bodies.s3 import S3BodyStore
from .codec import Body, encode_record
from .errors import (
    BodyHashMismatch,
    ConfigurationError,
    DanglingPointer,
    PartNotFound,
    RecordNotFound,
    UndecodableBody,
    VersionNotRetained,
    never_or_no_longer,
)
from .history.diffs import Diff, diff_versions
from .history.stored_deltas import inline_body, inline_part
from .history.time_travel import When, locate_at
from .index.budget import entry_budget
from .index.table import DynamoIndex
from .model import (
    DeleteResult,
    Entry,
    PutResult,
    Record,
    StoredPart,
    StoredVersion,
    VersionInfo,
    entry_time,
)
from .settings import StoreSettings
from .store_config import StoreConfig
from .timestamps import parse_timestamp
from .write_path import MAX_WRITE_WINDOW as MAX_WRITE_WINDOW  # the collector's too (gc.py)
from .write_path import KnownCurrent, Writer, WriteSettings, parts_info

logger = logging.getLogger(__name__)


class VersionedHybridStore:
    """Versioned records of any size: bodies in S3, versions and small bodies in DynamoDB."""

    def __init__(
        self,
        table_name: str,
        bucket_name: str,
        config: StoreConfig | None = None,
        *,
        s3_client: Any = None,
        dynamodb_client: Any = None,
    ) -> None:
        """The store of the table `table_name` and the bucket `bucket_name`, reached by the
        clients given (default: aws.aws_client's), configured by `config` (default:
        StoreConfig(), the library's defaults)."""
        if not table_name or not bucket_name:
            raise ConfigurationError("table_name and bucket_name are required")
        config = StoreConfig() if config is None else config
        self.config = config
        self.retention = config.retention
        self.delta_history = config.delta_history
        # What one held entry may take of an item, so that the most entries retention holds
        # fit it (index.budget: refused here if entries without parts could outgrow it).
        self.entry_budget = entry_budget(
            self.retention, config.inline_threshold, config.max_body_size
        )
        self.prefix = config.prefix
        s3_client = s3_client or aws_client("s3")
        dynamodb_client = dynamodb_client or aws_client("dynamodb")
        self.table_name = table_name
        self.bucket_name = bucket_name
        self.inline_threshold = config.inline_threshold
        self.max_body_size = config.max_body_size
        self.max_future = config.max_future
        self.clock = config.clock
        # How far apart this writer's clock and the garbage collector's may be.
        self.clock_skew = config.clock_skew.total_seconds()
        self.bodies = S3BodyStore(
            s3_client,
            bucket_name,
            multipart_threshold=config.multipart_threshold,
            clock=config.clock,
        )
        self.index = DynamoIndex(
            dynamodb_client, table_name, consistent_reads=config.consistent_reads
        )
        # Every reader decodes what a dictionary packed; only a store told to writes with the
        # newest one (docs/design.md, "Dictionaries").
        self.dictionaries = DictionaryStore(s3_client, bucket_name, self.prefix)
        self.write_dictionaries = config.dictionaries
        self.writer = Writer(
            self.bodies,
            self.index,
            self.dictionaries,
            WriteSettings(
                prefix=self.prefix,
                inline_threshold=config.inline_threshold,
                retention=self.retention,
                delta_history=config.delta_history,
                write_dictionaries=config.dictionaries,
                entry_budget=self.entry_budget,
                clock=config.clock,
                clock_skew=self.clock_skew,
            ),
        )

    @classmethod
    def from_env(
        cls, *, s3_client: Any = None, dynamodb_client: Any = None
    ) -> VersionedHybridStore:
        """The store the environment names and configures (`settings.StoreSettings.from_env`:
        VHS_TABLE_NAME, VHS_BUCKET_NAME and the optional prefix, inline threshold, retention,
        delta history and dictionaries). The endpoint comes from the standard
        AWS_ENDPOINT_URL, so the same code runs against moto's server or AWS."""
        return cls.from_settings(
            StoreSettings.from_env(), s3_client=s3_client, dynamodb_client=dynamodb_client
        )

    @classmethod
    def from_settings(
        cls, settings: StoreSettings, *, s3_client: Any = None, dynamodb_client: Any = None
    ) -> VersionedHybridStore:
        """The store `settings` name, configured by them (`StoreConfig.from_settings`)."""
        return cls(
            settings.table_name,
            settings.bucket_name,
            StoreConfig.from_settings(settings),
            s3_client=s3_client,
            dynamodb_client=dynamodb_client,
        )

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
        of `timestamps.parse_timestamp` within `max_future`, and parts from
        `parts.encode_parts`. Ingest validates each message field once, naming the message's
        fields, and writes through this."""
        return self.writer.put(id, body, stamp, parts)

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
        return self.writer.delete(id, stamp, purge=purge)

    @property
    def known(self) -> KnownCurrent:
        """The highest current key this store's writes have seen of each id written lately."""
        return self.writer.known

    def bound_waits(self, time_left: Callable[[], float]) -> None:
        """Wait for the collector's condemnation of a body no longer than `time_left()`
        seconds (a function's remaining time): past it a write fails instead of waiting."""
        self.writer.wait_budget = time_left

    # --- reads -------------------------------------------------------------------------------

    def get(self, id: str, version: int | None = None, **at: When) -> Record:
        """The current record, a retained `version`, or the version current at a moment
        (`as_of=`, `source_as_of=`: see `locate`). Raises RecordNotFound."""
        return self.read(self.locate(id, version, **at))

    def locate(
        self, id: str, version: int | None = None, *, as_of: When = None, source_as_of: When = None
    ) -> StoredVersion:
        """The current version of `id`, a retained `version`, or the one current at `as_of`
        (store clock) or `source_as_of` (source clock; history/time_travel.py), as one read of
        its item finds it, without its body (`read` reads that). Raises InvalidInput for a bad id,
        version or time; RecordNotFound (VersionNotRetained, RecordDeleted) for none such."""
        if as_of is not None or source_as_of is not None:
            return locate_at(self, id, version, as_of, source_as_of)
        id = keys.validate_id(id)
        if version is not None:
            keys.validate_version(version)
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
        raise VersionNotRetained(id, version, never_or_no_longer(item.version, version))

    def diff(self, id: str, a: int, b: int) -> Diff:
        """From retained version `a` to `b`: a JSON Patch for JSON records (history/diffs.py)."""
        return diff_versions(self, id, a, b)

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
                body = inline_body(found.item.versions(), found.version, self.dictionaries.get)
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
                "parts": parts_info(id, entry, self.bodies, self.prefix),
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
            parts=parts_info(id, entry, self.bodies, self.prefix),
        )

    def body_key(self, id: str, content_hash: str) -> str:
        return keys.body_key(self.prefix, id, content_hash)
