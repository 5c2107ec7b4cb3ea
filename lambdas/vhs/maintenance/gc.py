"""Garbage collection: delete the S3 bodies that no retained version references.

The collector works one shard (`{prefix}/{shard}/`) at a time, a listing page (up to 1,000
objects) at a time, so its memory does not grow with the bucket and shards can be collected
in parallel. For each page it reads the items of the ids in it (BatchGetItem, strongly
consistent) and works out which bodies their retained versions reference (retention.py, the
same rule readers use). An object is an orphan when nothing references it and it is older
than the grace period.

Deleting an orphan races with a writer that is about to point at the same content-addressed
key again (a re-upload of an old body, or a crash-and-retry). The protocol (docs/gc.md):

1. **Condemn.** One conditional write sets `gc:<sha256> = deadline` on the id's item, on
   condition that the item has not changed since the collector read it. If it changed, the
   body may be referenced now: skip it.
2. **Delete** the object, but only well before the deadline (half the lease is kept in hand
   for a slow request); otherwise leave it for the next run.
3. Writers that point at an S3 body require `gc:<sha256>` absent or older than the moment
   their object was created (index.py). A writer whose object may have been deleted waits out
   the deadline, uploads again and retries, so a pointer never outlives its body.
4. **Clear** markers whose deadline is older than the clock-skew allowance plus the writers'
   maximum write window: no writer can still rely on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from .. import keys
from ..aws import is_object_missing
from ..item import condemnations, item_from_dynamo, version_of
from ..model import Item
from ..store import MAX_WRITE_WINDOW, VersionedHybridStore

DEFAULT_GRACE = timedelta(hours=1)
DEFAULT_LEASE = timedelta(minutes=5)
LIST_PAGE_SIZE = 1000


@dataclass
class GcReport:
    shards: int = 0
    listed: int = 0  # objects seen
    young: int = 0  # within the grace period: not judged
    referenced: int = 0
    orphaned: int = 0  # unreferenced and past the grace period
    deleted: int = 0
    bytes_reclaimed: int = 0  # deleted bytes (in a dry run: what would be reclaimed)
    skipped: int = 0  # orphans left for a later run: the item changed, or time ran short
    markers_cleared: int = 0
    unrecognised: int = 0  # not judged: keys outside VHS's layout, or of a damaged item
    dry_run: bool = False

    def add(self, other: GcReport) -> None:
        for field in fields(self):
            if field.type == "int":
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Object:
    key: str
    content_hash: str
    size: int


class GarbageCollector:
    def __init__(
        self,
        store: VersionedHybridStore,
        *,
        grace: timedelta = DEFAULT_GRACE,
        lease: timedelta = DEFAULT_LEASE,
        dry_run: bool = False,
        clock: Callable[[], float] | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        if grace < timedelta(0) or lease <= timedelta(0):
            raise ValueError("grace must be >= 0 and lease > 0")
        self.store = store
        self.s3 = store.bodies.s3
        self.bucket = store.bucket_name
        self.index = store.index
        self.grace = grace.total_seconds()
        self.lease = lease.total_seconds()
        self.dry_run = dry_run
        self.clock = clock or store.clock
        self.page_size = page_size
        # A marker may go once no writer can still act on the belief that predates it.
        self.marker_expiry = store.clock_skew + MAX_WRITE_WINDOW.total_seconds()

    def run(
        self,
        shards: Iterable[str] | None = None,
        progress: Callable[[str, GcReport], None] | None = None,
    ) -> GcReport:
        total = GcReport(dry_run=self.dry_run)
        for shard in shards if shards is not None else keys.all_shards():
            report = self.collect_shard(shard)
            total.add(report)
            if progress:
                progress(shard, report)
        return total

    def collect_shard(self, shard: str) -> GcReport:
        report = GcReport(shards=1, dry_run=self.dry_run)
        paginator = self.s3.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket,
            Prefix=keys.shard_prefix(self.store.prefix, shard),
            PaginationConfig={"PageSize": self.page_size},
        )
        for page in pages:
            self._collect_page(page.get("Contents", []), report)
        return report

    def _collect_page(self, objects: list[dict[str, Any]], report: GcReport) -> None:
        now = self.clock()
        by_id: dict[str, list[_Object]] = {}
        for listed in objects:
            report.listed += 1
            parts = listed["Key"].rsplit("/", 2)
            if len(parts) != 3 or len(parts[2]) != 64:
                report.unrecognised += 1
                continue
            if listed["LastModified"].timestamp() > now - self.grace:
                report.young += 1
                continue
            record_id = keys.decode_id(parts[1]) or self._id_from_metadata(listed["Key"])
            if record_id is None:
                report.unrecognised += 1
                continue
            by_id.setdefault(record_id, []).append(_Object(listed["Key"], parts[2], listed["Size"]))
        raw_items = self.index.read_raw_many(by_id) if by_id else {}
        for record_id, found in by_id.items():
            raw = raw_items.get(record_id, {})
            try:
                item = item_from_dynamo(raw)
            except (KeyError, IndexError, TypeError, ValueError):
                # A damaged item (vhs verify reports it): its references are unknown, so
                # none of its objects may go.
                report.unrecognised += len(found)
                continue
            self._judge(record_id, raw, item, found, now, report)
            self._clear_expired_markers(record_id, raw, now, report)

    def _judge(
        self,
        record_id: str,
        raw: dict[str, Any],
        item: Item | None,
        found: list[_Object],
        now: float,
        report: GcReport,
    ) -> None:
        referenced = set()
        if item is not None:
            # Retention by age is read off clocks: a reader whose clock is behind ours (by up
            # to the skew allowance) still retains what has just expired by ours.
            for _, entry in self.store.retention.retained(item, now - self.store.clock_skew):
                if entry.in_s3:
                    referenced.add(entry.content_hash)
        seen_version = version_of(raw)
        standing = {
            content_hash: deadline
            for content_hash, deadline in condemnations(raw).items()
            if deadline >= now - self.marker_expiry
        }
        for body in found:
            if body.content_hash in referenced:
                report.referenced += 1
                continue
            report.orphaned += 1
            if self.dry_run:
                report.bytes_reclaimed += body.size
            elif self._delete(record_id, body, seen_version, standing.get(body.content_hash)):
                report.deleted += 1
                report.bytes_reclaimed += body.size
            else:
                report.skipped += 1

    def _delete(
        self, record_id: str, body: _Object, seen_version: int | None, condemned: float | None
    ) -> bool:
        if condemned is None:
            deadline = self.clock() + self.lease
            if not self.index.condemn(record_id, body.content_hash, deadline, seen_version):
                return False  # the item changed since we read it: judge it again next run
        else:
            # An earlier pass condemned it and did not delete it. Until that deadline no writer
            # can point at the body again, so it may go under the same condemnation. Once the
            # deadline is near, a writer may be waiting it out to upload again: condemning the
            # body afresh would send that writer back to wait, perhaps for ever, so it stays
            # until its marker expires and a later run judges it anew.
            deadline = condemned
        if self.clock() > deadline - self.lease / 2:
            return False  # too close to the deadline for a safe delete
        self.s3.delete_object(Bucket=self.bucket, Key=body.key)
        return True

    def _clear_expired_markers(
        self, record_id: str, raw: dict[str, Any], now: float, report: GcReport
    ) -> None:
        if self.dry_run:
            return
        for content_hash, deadline in condemnations(raw).items():
            if deadline < now - self.marker_expiry and self.index.clear_condemnation(
                record_id, content_hash, deadline
            ):
                report.markers_cleared += 1

    def _id_from_metadata(self, key: str) -> str | None:
        """Long ids are cut in keys (keys.encode_id); their objects carry the whole id."""
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if is_object_missing(error):
                return None  # gone since the listing: nothing to collect
            raise
        encoded = keys.id_in_metadata(head.get("Metadata"))
        return keys.decode_metadata_id(encoded) if encoded else None


def parse_duration(text: str) -> timedelta:
    """'90s', '30m', '1h', '2d' (or plain seconds)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    try:
        if text and text[-1] in units:
            return timedelta(seconds=float(text[:-1]) * units[text[-1]])
        return timedelta(seconds=float(text))
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 1h, 2d)") from None
