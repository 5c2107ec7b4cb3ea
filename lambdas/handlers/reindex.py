"""The reindex worker Lambda: plans a run, and replays one Scan segment to the change feed,
from a cursor. The run's plan and a segment's event are vhs.changes.reindex_run's; this module
wires them to Lambda: the worker, the invocation's time left, the logger and the metrics.

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

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.changes.reindex_run import SegmentEvent, Worker, plan_run
from vhs.settings import REINDEX_FUNCTION

logger, metrics = logger_and_metrics(REINDEX_FUNCTION)


@per_environment
def worker() -> Worker:
    return Worker.from_env()


@instrumented(logger, metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if isinstance(event, dict) and "plan" in event:
        return plan_run(event["plan"], event.get("execution"))
    asked = SegmentEvent.read(event)
    config = worker()
    remaining = getattr(context, "get_remaining_time_in_millis", None)

    def keep_going() -> bool:
        return remaining is None or remaining() > config.stop_at_remaining_ms

    result = asked.replay(config.target, keep_going)
    for name, value in result.counts.as_dict().items():
        metrics.add_metric(name=f"reindex_{name}", unit=MetricUnit.Count, value=value)
    extra = {"run_id": asked.run_id, **result.as_dict()}
    if result.error:
        logger.warning("stopped early: the next invocation retries from the cursor", extra=extra)
    elif result.counts.foreign:
        logger.warning("skipped items that are not the store's", extra=extra)
    else:
        logger.info("replayed", extra=extra)
    return asked.next_event(result)
