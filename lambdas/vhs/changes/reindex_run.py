"""A reindex run as its Lambda is asked for it (handlers/reindex.py; the Reindex stack's state
machine, infra/reindex.py): the run an execution's input plans, checked before any work, and
one segment's event, read and checked, replayed from its cursor, and answered with the event
the next invocation of the segment is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import settings
from ..errors import InvalidInput
from ..shapes import REINDEX
from .reindex import (
    FOREIGN_EXAMPLES,
    Counts,
    Selection,
    Target,
    TokenBucket,
    reindex_segment,
    run_options,
    validate_page_size,
    validate_rate,
)

if TYPE_CHECKING:
    from .reindex import SegmentResult


@dataclass(frozen=True)
class Worker:
    target: Target
    stop_at_remaining_ms: int

    @classmethod
    def from_env(cls) -> Worker:
        target = Target.from_env()
        stop = settings.whole_number(
            settings.REINDEX_STOP_AT_REMAINING_MS, REINDEX.stop_at_remaining_ms
        )
        return cls(target, stop)


def _whole(event: dict[str, Any], name: str, default: int | None = None) -> int:
    value = event.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(name, "must be a whole number")
    return value


# What an execution's input may name; everything else is refused (a typo such as "segments"
# would otherwise run with the default, silently).
PLAN_FIELDS = ("total_segments", "rate", "page_size", "since", "until", "ids")


def plan_run(request: Any, execution: Any) -> dict[str, Any]:
    """The run an execution's input asks for, checked before any work: the run (defaults of
    resources.REINDEX for what it leaves out, `run_id` the execution's name) and the Map's
    items, one per segment, each with its share of the id list (null: the whole segment)."""
    if not isinstance(execution, str) or not execution:
        raise InvalidInput("execution", "must be the execution's name")
    if request is None:
        request = {}
    if not isinstance(request, dict):
        raise InvalidInput("input", "must be a JSON object")
    if "run_id" in request:
        raise InvalidInput(
            "run_id", "is the execution's name: name the execution instead of setting run_id"
        )
    unknown = sorted(set(request) - set(PLAN_FIELDS))
    if unknown:
        raise InvalidInput(
            unknown[0], f"is not a reindex option (those are {', '.join(PLAN_FIELDS)})"
        )
    run = {
        "run_id": execution,
        **run_options(
            request.get("total_segments", REINDEX.default_segments),
            request.get("rate", REINDEX.default_rate),
            request.get("page_size", REINDEX.page_size),
            segments_field="total_segments",
        ),
    }
    total = run["total_segments"]
    selection = Selection.of(request.get("ids"), request.get("since"), request.get("until"))
    run.update((k, v) for k, v in selection.as_dict().items() if k != "ids" and v is not None)
    ids = selection.ids
    if ids is not None and len(json.dumps(list(ids))) > REINDEX.max_ids_bytes:
        raise InvalidInput(
            "ids",
            f"at most {REINDEX.max_ids_bytes} bytes of JSON in one execution: start several, "
            "or replay a time range (since, until)",
        )
    # Each segment is handed only its own share: no child's input holds the whole list.
    items = [
        {"segment": n, "share": list(ids[n::total]) if ids is not None else None}
        for n in range(total)
    ]
    return {"run": run, "segments": items}


@dataclass(frozen=True)
class SegmentEvent:
    """One segment's event (handlers/reindex.py's docstring lists its fields), checked."""

    event: dict[str, Any]
    run: dict[str, Any]
    run_id: str
    total: int
    segment: int
    cursor: str | None
    rate: float
    page_size: int
    share: list[str] | None
    selection: Selection

    @classmethod
    def read(cls, event: Any) -> SegmentEvent:
        if not isinstance(event, dict):
            raise InvalidInput("event", "must be a JSON object")
        run = event.get("run")
        if not isinstance(run, dict):
            raise InvalidInput("run", "must be a JSON object")
        run_id = run.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise InvalidInput("run.run_id", "must be a non-empty string")
        total = _whole(run, "total_segments")
        segment = _whole(event, "segment")
        cursor = event.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidInput("cursor", "must be null or a record id")
        rate = validate_rate(run.get("rate", REINDEX.default_rate), "run.rate")
        page_size = validate_page_size(_whole(run, "page_size", REINDEX.page_size), "run.page_size")
        share = event.get("share")
        if share is not None and run.get("ids") is not None:
            raise InvalidInput("share", "a segment's share of the ids, or run.ids, not both")
        selection = Selection.of(
            share if share is not None else run.get("ids"), run.get("since"), run.get("until")
        )
        if share is not None and not 0 <= segment < total:
            raise InvalidInput("segment", f"must be 0..{total - 1}")
        return cls(event, run, run_id, total, segment, cursor, rate, page_size, share, selection)

    def replay(self, target: Target, keep_going: Callable[[], bool]) -> SegmentResult:
        """Replay this segment from its cursor while `keep_going()`."""
        # A share is the segment's whole work: replayed as segment 0 of 1.
        return reindex_segment(
            target,
            run_id=self.run_id,
            segment=self.segment if self.share is None else 0,
            total_segments=self.total if self.share is None else 1,
            cursor=self.cursor,
            selection=self.selection,
            limiter=TokenBucket(self.rate),
            page_size=self.page_size,
            keep_going=keep_going,
        )

    def next_event(self, result: SegmentResult) -> dict[str, Any]:
        """The answer: this segment's event for its next invocation, with the totals so far,
        this invocation's counts and the first ids of items that are not the store's."""
        totals = Counts.from_dict(self.event.get("totals"))
        totals.add(result.counts)
        known = [*(self.event.get("foreign_ids") or []), *result.foreign_ids]
        foreign = list(dict.fromkeys(known))[:FOREIGN_EXAMPLES]
        return {
            "segment": self.segment,
            **({"share": self.share} if self.share is not None else {}),
            "run": self.run,
            "cursor": result.cursor,
            "done": result.done,
            "totals": totals.as_dict(),
            "last": result.counts.as_dict(),
            "foreign_ids": foreign,
        }
