"""Reindex: publish every current record (or a selection of them) to the change feed again.

A consumer that lost its copy, or starts one, rebuilds it from replays: one notification per
current record, the live notification of its current version (`feed.change_of`) with
``"replay": true`` and the run's id (`Change.replayed`). A current tombstone is replayed as
"deleted" (with its purge flag as stored), so a copy made before the delete drops the record.
Nothing else is published: earlier versions are history, not state.

`reindex_segment` is the worker, the same code in the Lambda (handlers/reindex.py, looped by a
Step Functions state machine, infra/reindex.py) and in `vhs reindex` (segments in threads):
it reads one segment of a parallel Scan (or one share of an id list) a page at a time, at a
bounded rate (`TokenBucket`, records per second), publishes each page's replays through
`ChangePublisher` (in order, stopping at the first one SNS does not confirm) and returns a
cursor: the id of the last record whose replay is confirmed (or that was skipped). Started
again from that cursor, it re-publishes nothing already confirmed and misses nothing.

The deduplication id of a replay includes the run id: a replay is not dropped as a duplicate
of a live notification published in the last 5 minutes, and a retried page of the same run is
(docs/changes.md, "Reindex").

Items that are not the store's (a shared table: another application's items, damaged items)
are skipped and counted (`foreign`, with the first few ids), never published and never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any

from .. import keys, settings
from ..errors import InvalidInput
from ..index.codec import ID, MalformedItem, item_from_dynamo, layout_problem
from ..index.scan import ScanPage, scan_pages
from ..model import Entry
from ..shapes import REINDEX
from ..timestamps import parse_timestamp
from .feed import Change, change_of
from .publish import ChangePublisher

log = logging.getLogger(__name__)

DEFAULT_SEGMENTS = REINDEX.default_segments
DEFAULT_PAGE_SIZE = REINDEX.page_size
MAX_SEGMENTS = REINDEX.max_segments
MAX_PAGE_SIZE = 1000
BATCH_GET_KEYS = 100  # BatchGetItem's limit
# Foreign items named in a result (all are counted).
FOREIGN_EXAMPLES = 10


# --- what to replay ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Which current records a run replays: every one, those of `ids`, and/or those whose
    current version the store wrote in [since, until) (epoch seconds; the entry's written-at
    time, so a window of the feed's own history is replayed however old the versions'
    `updated_at` are)."""

    ids: tuple[str, ...] | None = None
    since: str | None = None  # RFC 3339, stored form
    until: str | None = None

    @classmethod
    def of(
        cls,
        ids: Sequence[str] | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
    ) -> Selection:
        """Validated: each id as the store takes it (`field` "ids"), the times as RFC 3339
        ("since", "until"), since before until."""
        chosen = None
        if ids is not None:
            if isinstance(ids, str) or not isinstance(ids, Sequence):
                raise InvalidInput("ids", "must be a list of record ids")
            chosen = tuple(dict.fromkeys(keys.validate_id(id, "ids") for id in ids))
        start = parse_timestamp(since, field="since") if since is not None else None
        end = parse_timestamp(until, field="until") if until is not None else None
        if start is not None and end is not None and start >= end:
            raise InvalidInput("until", f"must be later than since ({start})")
        return cls(chosen, start, end)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Selection:
        return cls.of(data.get("ids"), data.get("since"), data.get("until"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "ids": list(self.ids) if self.ids is not None else None,
            "since": self.since,
            "until": self.until,
        }

    def admits(self, entry: Entry) -> bool:
        written = entry.written_at
        if self.since is not None and written < _epoch(self.since):
            return False
        return self.until is None or written < _epoch(self.until)


def _epoch(stored: str) -> float:
    return datetime.fromisoformat(stored.replace("Z", "+00:00")).timestamp()


def _count(value: int, field: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, "must be a whole number")
    if not 1 <= value <= most:
        raise InvalidInput(field, f"must be 1..{most}")
    return value


def validate_segments(segments: int, field: str = "segments") -> int:
    return _count(segments, field, MAX_SEGMENTS)


def validate_rate(rate: float, field: str = "rate") -> float:
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise InvalidInput(field, "must be a number of records per second")
    if not 0 < rate <= REINDEX.max_rate:
        raise InvalidInput(field, f"must be above 0 and at most {REINDEX.max_rate:g} records/s")
    return float(rate)


def validate_page_size(page_size: int, field: str = "page_size") -> int:
    return _count(page_size, field, MAX_PAGE_SIZE)


def run_options(
    total_segments: int, rate: float, page_size: int, *, segments_field: str = "segments"
) -> dict[str, Any]:
    """A run's segments, rate and page size, each checked (in that order): the same options
    whether the run is planned by the state machine or run here by `vhs reindex`."""
    return {
        "total_segments": validate_segments(total_segments, segments_field),
        "rate": validate_rate(rate),
        "page_size": validate_page_size(page_size),
    }


# --- the rate bound ---------------------------------------------------------------------------


class TokenBucket:
    """At most `rate` records a second on average, in bursts of at most `burst` (default one
    second's worth): `take(n)` after reading n records sleeps until the reads are paid for.
    Over any interval of t seconds, at most burst + rate x t records are taken. Thread-safe;
    `clock` and `sleep` are injectable so the bound is tested without waiting."""

    def __init__(
        self,
        rate: float,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = validate_rate(rate)
        self.burst = burst if burst is not None else max(1.0, self.rate)
        self.clock = clock
        self.sleep = sleep
        self._tokens = self.burst
        self._at = clock()
        self._lock = threading.Lock()

    def take(self, n: int) -> float:
        """Pay for `n` records; returns the seconds slept."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= n
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self.sleep(wait)
        return wait


# --- one segment ------------------------------------------------------------------------------


@dataclass
class Counts:
    scanned: int = 0  # items read (what the rate bounds)
    replayed: int = 0  # notifications confirmed published
    deleted: int = 0  # of which "deleted" (current tombstones)
    filtered: int = 0  # outside the time range
    unversioned: int = 0  # items with no version (only garbage-collector markers)
    foreign: int = 0  # not the store's layout: skipped
    missing: int = 0  # ids asked for that have no item

    def add(self, other: Counts) -> None:
        for each in fields(self):
            setattr(self, each.name, getattr(self, each.name) + getattr(other, each.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Counts:
        names = {each.name for each in fields(cls)}
        return cls(**{k: int(v) for k, v in (data or {}).items() if k in names})


@dataclass
class SegmentResult:
    """Where one segment stands. `cursor`: the id of the last record handled (its replay
    confirmed, or skipped); the segment resumes after it (None: from its start). `done`: the
    whole segment is handled. `error`: why it stopped early (a publish SNS did not confirm);
    resume from `cursor`. `counts`: of this call."""

    segment: int
    cursor: str | None
    done: bool = False
    counts: Counts = field(default_factory=Counts)
    foreign_ids: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "cursor": self.cursor,
            "done": self.done,
            "counts": self.counts.as_dict(),
            "foreign_ids": list(self.foreign_ids),
            "error": self.error,
        }


@dataclass(frozen=True)
class Target:
    """Where a run reads and publishes: the table, the topic's publisher, and where bodies
    live (to name their locations, as the live feed does)."""

    dynamodb: Any
    table: str
    publisher: ChangePublisher
    bucket: str
    prefix: str = ""

    @classmethod
    def from_env(cls, hint: str = "") -> Target:
        """The store's table, bucket and prefix and the change topic, from the environment
        (settings.TABLE_NAME, BUCKET_NAME and CHANGE_TOPIC_ARN are required; `hint` says where
        to find them); the deployed worker and `vhs reindex` both run on this."""
        from ..aws import aws_client

        table, bucket, topic = settings.require(
            settings.TABLE_NAME, settings.BUCKET_NAME, settings.CHANGE_TOPIC_ARN, hint=hint
        )
        return cls(
            dynamodb=aws_client("dynamodb"),
            table=table,
            publisher=ChangePublisher(aws_client("sns"), topic),
            bucket=bucket,
            prefix=keys.validate_prefix(settings.get(settings.PREFIX)),
        )


def _raw_id(raw: Mapping[str, Any]) -> str | None:
    value = raw.get(ID)
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        return value["S"]
    return None


def _judge(
    raw: Mapping[str, Any], target: Target, selection: Selection, run_id: str
) -> tuple[str, Change | None]:
    """What one raw item is for this run: ("replay", change), or why not ("foreign",
    "unversioned", "filtered")."""
    id = _raw_id(raw)
    if id is None:
        return "foreign", None
    try:
        item = item_from_dynamo(raw, with_bodies=False)
        problem = layout_problem(raw, item)
    except (MalformedItem, KeyError, IndexError, TypeError, ValueError, AttributeError):
        return "foreign", None
    if problem is not None:
        return "foreign", None
    if item is None:
        return "unversioned", None
    if not selection.admits(item.current):
        return "filtered", None
    change = change_of(id, item.version, item.current, bucket=target.bucket, prefix=target.prefix)
    return "replay", change.replayed(run_id)


def _id_pages(
    target: Target, ids: Sequence[str], after: str | None, page_size: int
) -> Iterator[tuple[list[str], list[dict[str, Any]], str | None]]:
    """(the page's ids, their raw items in id order, None) for a share of an id list."""
    start = ids.index(after) + 1 if after is not None and after in ids else 0
    size = min(page_size, BATCH_GET_KEYS)
    for first in range(start, len(ids), size):
        page = list(ids[first : first + size])
        found = _read_many(target, page)
        yield page, [found[id] for id in page if id in found], None


def _read_many(target: Target, ids: list[str]) -> dict[str, dict[str, Any]]:
    from ..index.table import DynamoIndex

    # Eventually consistent, as the Scan is: a replay races live writes either way.
    return DynamoIndex(target.dynamodb, target.table, consistent_reads=False).read_raw_many(ids)


def reindex_segment(
    target: Target,
    *,
    run_id: str,
    segment: int,
    total_segments: int,
    cursor: str | None = None,
    selection: Selection = Selection(),
    limiter: TokenBucket | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    keep_going: Callable[[], bool] | None = None,
    on_page: Callable[[SegmentResult], None] | None = None,
) -> SegmentResult:
    """Replay one segment from after `cursor` until it is done, a publish fails, or
    `keep_going()` (asked between pages) says to stop. At
    least one page is handled per call. `on_page` is told of the segment's position after
    every page (a checkpoint). With `selection.ids`, the segment is the share
    ids[segment::total_segments] of them, read with BatchGetItem, not a Scan."""
    validate_segments(total_segments, "total_segments")
    if not 0 <= segment < total_segments:
        raise InvalidInput("segment", f"must be 0..{total_segments - 1}")
    validate_page_size(page_size)
    result = SegmentResult(segment, cursor)

    pages: Iterator[tuple[list[str] | None, list[dict[str, Any]], str | None]]
    if selection.ids is not None:
        pages = _id_pages(target, selection.ids[segment::total_segments], cursor, page_size)
    else:
        start_key = {ID: {"S": cursor}} if cursor is not None else None
        scanned = scan_pages(
            target.dynamodb,
            target.table,
            segment=segment,
            total_segments=total_segments,
            page_size=page_size,
            start_key=start_key,
        )
        pages = ((None, page.items, _last_id(page)) for page in scanned)

    first = True
    for asked, raws, last_key_id in pages:
        if not first and keep_going is not None and not keep_going():
            return result
        first = False
        if limiter is not None:
            limiter.take(max(1, len(raws)))
        if not _replay_page(target, result, run_id, selection, asked, raws):
            return result
        if last_key_id is not None:
            result.cursor = last_key_id
        if on_page is not None:
            on_page(result)
    result.done = True
    if on_page is not None:
        on_page(result)
    return result


def _last_id(page: ScanPage) -> str | None:
    return _raw_id(page.last_key) if page.last_key else None


def _replay_page(
    target: Target,
    result: SegmentResult,
    run_id: str,
    selection: Selection,
    asked: list[str] | None,
    raws: list[dict[str, Any]],
) -> bool:
    """Publish one page's replays; move the result's cursor and counts over every record
    handled. False if the page was not finished (result.error says why)."""
    judged = [(_raw_id(raw), *_judge(raw, target, selection, run_id)) for raw in raws]
    changes = [change for _, _, change in judged if change is not None]
    # Not cut short for time: `keep_going` is asked between pages, and a page's publishes
    # (at most page_size / 10 calls) fit in the worker's reserve.
    published = target.publisher.publish(changes)
    # Records are handled in page order up to the first replay not confirmed.
    counts, confirmed = result.counts, 0
    for id, verdict, change in judged:
        if change is not None:
            if confirmed == published.published:
                result.error = published.error
                return False
            confirmed += 1
            counts.replayed += 1
            counts.deleted += change.change == "deleted"
        elif verdict == "foreign":
            counts.foreign += 1
            shown = id if id is not None else "(no string id)"
            if len(result.foreign_ids) < FOREIGN_EXAMPLES:
                result.foreign_ids.append(shown)
            log.warning("skipped an item that is not the store's", extra={"record_id": shown})
        else:
            setattr(counts, verdict, getattr(counts, verdict) + 1)
        counts.scanned += 1
        if id is not None:
            result.cursor = id
    if asked is not None:
        found = {_raw_id(raw) for raw in raws}
        counts.missing += sum(1 for id in asked if id not in found)
        result.cursor = asked[-1] if asked else result.cursor
    return True
