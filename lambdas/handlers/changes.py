"""The change feed Lambda: DynamoDB stream records in, one SNS notification per version out.

Wired with Powertools: Logger writes JSON, Metrics emits EMF counts, and Tracer traces where
tracing is on (observability.traced). A batch is published in stream order by
vhs.changes.batch (`Feed.publish`), which also answers Lambda from how far that got: the
records from the first unfinished one on as a partial batch response (the event source has
ReportBatchItemFailures and BisectBatchOnFunctionError), or, when the first record cannot be
finished, Powertools' BatchProcessingError, a function error on which Lambda bisects the
batch. This module only wires it: the feed, the invocation's time left, the logger and the
metrics.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.changes.batch import Feed, batch_response, report
from vhs.settings import CHANGES_FUNCTION

logger, metrics = logger_and_metrics(CHANGES_FUNCTION)


@per_environment
def feed() -> Feed:
    return Feed.from_env()


def _count(name: str, value: int) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    publishing = feed()
    records = event.get("Records") or []
    plan = publishing.publish(records, getattr(context, "get_remaining_time_in_millis", None))
    report(records, plan, log=logger, count=_count)
    return batch_response(records, plan)
