"""Garbage collection: delete the S3 bodies that no retained version references.

The collector works one shard (`{prefix}/{shard}/`) at a time, a listing page (up to 1,000
objects) at a time, so its memory does not grow with the bucket and shards can be collected
in parallel. For each page it reads the items of the ids in it (BatchGetItem, strongly
consistent) and works out which bodies their retained versions reference (retention.py, the
same rule readers use). An object is an orphan when nothing references it and it is older
than the grace period.

Deleting an orphan races with a writer that is about to point at the same content-addressed
key again: condemn.py holds the protocol that makes it safe (docs/gc.md).

One id's failure is counted (`failed`) and the rest of its page and shard go on; a shard that
cannot be listed is reported in `failed_shards`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .. import keys
from ..aws import is_forbidden, is_object_missing
from ..index.codec import (
    item_from_dynamo,
)
from ..model import Item
from ..store import MAX_WRITE_WINDOW, VersionedHybridStore
from .condemn import Condemner, ListedBody
from .report import GcReport

log = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(hours=1)
DEFAULT_LEASE = timedelta(minutes=5)
LIST_PAGE_SIZE = 1000
# The scheduled function (handlers.gc) stops taking work with this much of its timeout left
# (checked after every listing page): time for a page's deletes and to hand the rest on.
RESERVE_MS = 120_000


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
        self.condemner = Condemner(
            store, lease=self.lease, clock=self.clock, marker_expiry=self.marker_expiry
        )

    def run(
        self,
        shards: Iterable[str] | None = None,
        progress: Callable[[str, GcReport], None] | None = None,
    ) -> GcReport:
        """Collect `shards` (every shard by default). A shard that fails is reported in
        `failed_shards` and the others are still collected."""
        todo = list(shards) if shards is not None else keys.all_shards()
        return self.run_until(todo, progress=progress)[0]

    def run_until(
        self,
        shards: Sequence[str],
        *,
        start_after: str | None = None,
        should_stop: Callable[[], bool] | None = None,
        progress: Callable[[str, GcReport], None] | None = None,
    ) -> tuple[GcReport, list[str], str | None]:
        """Collect `shards` in order, the first from the key after `start_after`, until
        `should_stop()` says time is short (checked after every listing page). Returns the
        report, the shards not finished, and the key to resume the first of them after (None
        to start it from the beginning). At least one page is collected per call."""
        total = GcReport(dry_run=self.dry_run)
        remaining = list(shards)
        finished: set[str] = set()
        worked = False
        while remaining:
            short_of_time = should_stop is not None and should_stop()
            if short_of_time and worked:
                break
            shard = remaining[0]
            try:
                report, start_after = self.collect(
                    shard, start_after=start_after, should_stop=should_stop
                )
            except (ClientError, BotoCoreError) as error:
                log.warning("could not collect shard %s: %s", shard, error)
                report, start_after = GcReport(dry_run=self.dry_run, failed_shards=[shard]), None
            worked = True
            total.add(report)
            if progress:
                progress(shard, report)
            if start_after is not None:
                break  # stopped inside the shard
            finished.add(remaining.pop(0))
        if finished and not self.dry_run:
            self.clear_expired_condemnations(finished, total, should_stop=should_stop)
        return total, remaining, start_after

    def clear_expired_condemnations(
        self,
        shards: set[str],
        report: GcReport,
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Clear the expired condemnations of the ids in `shards`, found through the table's
        sparse index of condemned items rather than through their objects: an id whose
        condemned bodies were its last ones (a purged record, say) has no object left to be
        listed by, and its condemnation would otherwise stay for ever. Stops early, leaving
        the rest for the next run, when `should_stop()` says time is short."""
        expired_before = self.clock() - self.marker_expiry
        try:
            for page in self.index.condemnations_before(expired_before):
                for record_id, deadline in page:
                    if keys.shard_of(record_id) not in shards:
                        continue
                    try:
                        if self.index.clear_condemnation(record_id, deadline):
                            report.markers_cleared += 1
                    except (ClientError, BotoCoreError) as error:
                        log.warning("could not clear the condemnation of %r: %s", record_id, error)
                        report.failed += 1
                if should_stop is not None and should_stop():
                    return
        except (ClientError, BotoCoreError) as error:
            # The next run tries again; until then the collection itself is unaffected.
            log.warning("could not read the condemned items: %s", error)
            report.failed += 1

    def collect_shard(self, shard: str) -> GcReport:
        return self.collect(shard)[0]

    def collect(
        self,
        shard: str,
        *,
        start_after: str | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> tuple[GcReport, str | None]:
        """Collect one shard from the key after `start_after`, a listing page at a time.
        Between pages `should_stop()` may end the work early: the second value is then the
        last key collected, to resume after; None once the shard is done. At least one page
        is always collected, so a chain of short invocations still gets through a shard."""
        report = GcReport(shards=1, dry_run=self.dry_run)
        paginator = self.s3.get_paginator("list_objects_v2")
        listing: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": keys.shard_prefix(self.store.prefix, shard),
            "PaginationConfig": {"PageSize": self.page_size},
        }
        if start_after:
            listing["StartAfter"] = start_after
        for page in paginator.paginate(**listing):
            objects = page.get("Contents", [])
            self._collect_page(objects, report, should_stop)
            if objects and page.get("IsTruncated") and should_stop and should_stop():
                report.shards = 0  # not finished: the invocation that resumes it counts it
                return report, objects[-1]["Key"]
        return report, None

    def _collect_page(
        self,
        objects: list[dict[str, Any]],
        report: GcReport,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        now = self.clock()
        by_id: dict[str, list[ListedBody]] = {}
        for listed in objects:
            report.listed += 1
            # Only keys this store's body_key makes are ours: a shard's listing also holds
            # other stores' keys (prefix "de" beside "") and whatever else the bucket holds.
            body = keys.parse_body_key(self.store.prefix, listed["Key"])
            if body is None:
                report.unrecognised += 1
                continue
            if listed["LastModified"].timestamp() > now - self.grace:
                report.young += 1
                continue
            record_id = body.id or self._id_of_cut_key(listed["Key"], body)
            if record_id is None:
                report.unrecognised += 1
                continue
            by_id.setdefault(record_id, []).append(
                ListedBody(listed["Key"], body.content_hash, listed["Size"])
            )
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
            try:
                self._judge(record_id, raw, item, found, now, report, should_stop)
            except (ClientError, BotoCoreError) as error:
                # One id's failure (throttling on a hot item, say) stops neither the others
                # nor the rest of the shard; its bodies wait for the next run.
                log.warning("could not collect the bodies of %r: %s", record_id, error)
                report.failed += 1

    def _judge(
        self,
        record_id: str,
        raw: dict[str, Any],
        item: Item | None,
        found: list[ListedBody],
        now: float,
        report: GcReport,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Collect the orphans among `found`, condemnation after condemnation, while they
        last and `should_stop()` does not say time is short."""
        orphans = self._orphans(item, found, now, report)
        if self.dry_run:
            report.bytes_reclaimed += sum(body.size for body in orphans)
            return
        self.condemner.collect(record_id, raw, item, orphans, now, report, should_stop)

    def _orphans(
        self, item: Item | None, found: list[ListedBody], now: float, report: GcReport
    ) -> list[ListedBody]:
        """The bodies among `found` that no version `item` retains references."""
        referenced = set()
        if item is not None:
            # Retention by age is read off clocks: a reader whose clock is behind ours (by up
            # to the skew allowance) still retains what has just expired by ours.
            for _, entry in self.store.retention.retained(item, now - self.store.clock_skew):
                referenced.update(entry.s3_objects())
        orphans = []
        for body in found:
            if body.content_hash in referenced:
                report.referenced += 1
            else:
                orphans.append(body)
        report.orphaned += len(orphans)
        return orphans

    def _id_from_metadata(self, key: str) -> str | None:
        """Long ids are cut in keys (keys.encode_id); their objects carry the whole id."""
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if is_object_missing(error) or (is_forbidden(error) and not self._listed(key)):
                return None  # gone since the listing: nothing to collect
            raise
        encoded = keys.id_in_metadata(head.get("Metadata"))
        return keys.decode_metadata_id(encoded) if encoded else None

    def _listed(self, key: str) -> bool:
        """Whether `key` is still in the bucket. S3 answers a HEAD of a missing key with 403,
        not 404, unless the caller may list the whole bucket, and the collector's role may
        list only under the body prefix: a listing tells a vanished body from a denial."""
        found = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        return any(item["Key"] == key for item in found.get("Contents", []))

    def _id_of_cut_key(self, key: str, body: keys.BodyKey) -> str | None:
        """The id of a key whose id is cut, or None unless that id's body_key is exactly `key`
        (no metadata, or metadata naming another id: not the collector's object)."""
        record_id = self._id_from_metadata(key)
        confirmed = body.with_cut_id(record_id) if record_id is not None else None
        return confirmed.id if confirmed is not None else None


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
