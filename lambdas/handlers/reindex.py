"""The reindex worker Lambda: plans a run, and replays one Scan segment to the change feed,
from a cursor.

The Reindex stack's state machine (infra/reindex.py) invokes it first with
``{"plan": <the execution's input>, "execution": <its name>}``: the input is checked before any
work (`plan_run`: every field's type and range, unknown fields refused, `run_id` refused: the
run id is always the execution's name), and the answer is the run and the Map's items, one per
segment (with an id list, each carries its own share of the ids). Then, per segment, in a loop,
its output the next invocation's input, until it says `done`. Event (and result) fields:

    segment     this segment, 0..run.total_segments-1
    share       optional: this segment's share of the run's id list (the plan's split); the
                segment replays only these ids
    run         the run, the same for every segment:
                  run_id          the execution's name: part of every replay's deduplication id
                  total_segments  the Scan's TotalSegments
                  rate            records per second for this segment (resources.REINDEX)
                  page_size       Scan's Limit (resources.REINDEX)
                  since, until    optional: the selection's time range (RFC 3339)
                  ids             optional: only these ids (vhs.changes.reindex.Selection;
                                  `vhs invoke`; the state machine hands out shares instead)
    cursor      absent or null at the start, then the id of the last record handled
    done        (result) the segment is finished
    totals      (result) counts over every invocation of this segment so far
    last        (result) counts of this invocation
    foreign_ids (result) the first ids of items that are not the store's

It stops taking pages with VHS_REINDEX_STOP_AT_REMAINING_MS of its timeout left. A publish
that SNS does not confirm ends the invocation early with the cursor before it (logged as a
warning): the next invocation retries from there, and a replay SNS already has within 5
minutes is dropped as a duplicate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs import settings
from vhs.changes.reindex import (
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
from vhs.errors import InvalidInput
from vhs.settings import REINDEX_FUNCTION
from vhs.shapes import REINDEX

logger, metrics = logger_and_metrics(REINDEX_FUNCTION)


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


@per_environment
def worker() -> Worker:
    return Worker.from_env()


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


@instrumented(logger, metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise InvalidInput("event", "must be a JSON object")
    if "plan" in event:
        return plan_run(event["plan"], event.get("execution"))
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
    config = worker()
    remaining = getattr(context, "get_remaining_time_in_millis", None)

    def keep_going() -> bool:
        return remaining is None or remaining() > config.stop_at_remaining_ms

    # A share is the segment's whole work: replayed as segment 0 of 1.
    result = reindex_segment(
        config.target,
        run_id=run_id,
        segment=segment if share is None else 0,
        total_segments=total if share is None else 1,
        cursor=cursor,
        selection=selection,
        limiter=TokenBucket(rate),
        page_size=page_size,
        keep_going=keep_going,
    )
    totals = Counts.from_dict(event.get("totals"))
    totals.add(result.counts)
    for name, value in result.counts.as_dict().items():
        metrics.add_metric(name=f"reindex_{name}", unit=MetricUnit.Count, value=value)
    known = [*(event.get("foreign_ids") or []), *result.foreign_ids]
    foreign = list(dict.fromkeys(known))[:FOREIGN_EXAMPLES]
    extra = {"run_id": run_id, **result.as_dict()}
    if result.error:
        logger.warning("stopped early: the next invocation retries from the cursor", extra=extra)
    elif result.counts.foreign:
        logger.warning("skipped items that are not the store's", extra=extra)
    else:
        logger.info("replayed", extra=extra)
    return {
        "segment": segment,
        **({"share": share} if share is not None else {}),
        "run": run,
        "cursor": result.cursor,
        "done": result.done,
        "totals": totals.as_dict(),
        "last": result.counts.as_dict(),
        "foreign_ids": foreign,
    }
