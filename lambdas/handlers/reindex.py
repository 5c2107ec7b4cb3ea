"""The reindex worker Lambda: replays one Scan segment to the change feed, from a cursor.

The Reindex stack's state machine (infra/reindex.py) invokes it in a loop per segment, its
output the next invocation's input, until it says `done`. Event (and result) fields:

    segment     this segment, 0..run.total_segments-1
    run         the run, the same for every segment:
                  run_id          the execution's name: part of every replay's deduplication id
                  total_segments  the Scan's TotalSegments
                  rate            records per second for this segment (resources.REINDEX)
                  page_size       Scan's Limit (resources.REINDEX)
                  since, until    optional: the selection's time range (RFC 3339)
                  ids             optional: only these ids (vhs.changes.reindex.Selection)
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

import functools
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics
from vhs import keys, settings
from vhs.aws import aws_client
from vhs.changes.feed import ChangePublisher
from vhs.changes.reindex import (
    FOREIGN_EXAMPLES,
    Counts,
    Selection,
    Target,
    TokenBucket,
    reindex_segment,
    validate_page_size,
    validate_rate,
)
from vhs.errors import InvalidInput
from vhs.resources import REINDEX
from vhs.settings import REINDEX_FUNCTION

logger, metrics = logger_and_metrics(REINDEX_FUNCTION)


@dataclass(frozen=True)
class Worker:
    target: Target
    stop_at_remaining_ms: int

    @classmethod
    def from_env(cls) -> Worker:
        """VHS_TABLE_NAME, VHS_BUCKET_NAME and VHS_CHANGE_TOPIC_ARN are required; VHS_PREFIX
        as the store's."""
        table, bucket, topic = settings.require(
            settings.TABLE_NAME, settings.BUCKET_NAME, settings.CHANGE_TOPIC_ARN
        )
        target = Target(
            dynamodb=aws_client("dynamodb"),
            table=table,
            publisher=ChangePublisher(aws_client("sns"), topic),
            bucket=bucket,
            prefix=keys.validate_prefix(settings.get(settings.PREFIX)),
        )
        stop = settings.whole_number(
            settings.REINDEX_STOP_AT_REMAINING_MS, REINDEX.stop_at_remaining_ms
        )
        return cls(target, stop)


@functools.cache
def worker() -> Worker:
    return Worker.from_env()


def reset() -> None:
    """Forget the configured worker (tests point the handler at a fresh stack)."""
    worker.cache_clear()


def _whole(event: dict[str, Any], name: str, default: int | None = None) -> int:
    value = event.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(name, "must be a whole number")
    return value


@instrumented(logger, metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
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
    selection = Selection.of(run.get("ids"), run.get("since"), run.get("until"))
    config = worker()
    remaining = getattr(context, "get_remaining_time_in_millis", None)

    def keep_going() -> bool:
        return remaining is None or remaining() > config.stop_at_remaining_ms

    result = reindex_segment(
        config.target,
        run_id=run_id,
        segment=segment,
        total_segments=total,
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
        "run": run,
        "cursor": result.cursor,
        "done": result.done,
        "totals": totals.as_dict(),
        "last": result.counts.as_dict(),
        "foreign_ids": foreign,
    }
