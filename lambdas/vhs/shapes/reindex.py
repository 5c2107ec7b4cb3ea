"""Reindex: replays of every current record to the change feed (docs/changes.md)."""

from __future__ import annotations

from collections.abc import Iterator

from .shape import Check, FunctionShape


# The Reindex stack (infra/reindex.py) runs handlers.reindex from a Step Functions state
# machine: a Distributed Map over Scan segments, each looping the worker with its cursor.
# `vhs reindex` runs the same worker here, with the same defaults.
class ReindexShape(FunctionShape, shape="reindex", timeout_seconds=900, memory_mb=256):
    # The worker stops taking pages with this much of its timeout left and returns its cursor
    # (a page at the rate bound takes at most about a second, plus its publishes).
    stop_at_remaining_ms: int = 60_000
    # Records per second per segment, and segments, unless the run says otherwise. The total
    # rate is segments x rate: 400 records/s by default, a small share of an on-demand
    # table's capacity, so live ingest is never starved.
    default_rate: float = 50.0
    default_segments: int = 8
    # The highest rate a run may ask for, per segment (the worker, `vhs reindex --rate` and the
    # state machine's plan all refuse more): at most max_concurrency x max_rate records/s in
    # all, 16,000/s, which a provisioned table must be sized for before such a run.
    max_rate: float = 1000.0
    # Scan's TotalSegments: the worker's bound (and the state machine's, whose plan lists them).
    max_segments: int = 1000
    # The id list an execution may name, in bytes of JSON: the execution's input is at most
    # 256 KiB, and the plan's output (the ids, split into one share per segment) must fit too.
    max_ids_bytes: int = 200 * 1024
    # Scan's Limit: items a page. At most 1 s of the default rate, so a page never bursts.
    page_size: int = 50
    # Segments replayed at once by the state machine's Map (its MaxConcurrency): the total
    # rate bound is min(segments, max_concurrency) x rate.
    max_concurrency: int = 16
    # A whole run is given up (and alarms) after this long; redrive it to go on.
    execution_timeout_hours: int = 48

    def _checks(self) -> Iterator[Check]:
        yield (
            0 < self.stop_at_remaining_ms < self.function_timeout_seconds * 1000,
            "the cut-off must be shorter than the function timeout",
        )
        yield 0 < self.default_rate <= self.max_rate, "the rate must be 0 < rate <= max_rate"
        yield 1 <= self.max_segments <= 1000, "Scan takes at most 1,000 segments"
        yield 1 <= self.default_segments <= self.max_segments, "segments must be 1..max_segments"
        yield 0 < self.max_ids_bytes < 256 * 1024, "the id list must fit in 256 KiB"
        yield 1 <= self.page_size <= 1000, "the page size must be 1..1000"
        yield 1 <= self.max_concurrency <= 1000, "max concurrency must be 1..1000"
        yield 1 <= self.execution_timeout_hours <= 24 * 365, "execution timeout: 1 h..1 year"


REINDEX = ReindexShape()
