"""The ingest Lambda: SQS messages in, two-phase writes to the store out.

Wired with Powertools: `BatchProcessor` reports batch item failures (the event source has
ReportBatchItemFailures), Logger writes JSON with the message and record ids, Metrics emits
EMF counts, and Tracer traces where tracing is on (see observability.traced). A batch is
read, coalesced and written by vhs.ingest.batch; this module only wires it: the ingestor, the
invocation's time left, the logger and the metrics.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.ingest.batch import ingest_batch
from vhs.ingest.ingestor import Ingestor
from vhs.settings import INGEST_FUNCTION

logger, metrics = logger_and_metrics(INGEST_FUNCTION)
processor = BatchProcessor(event_type=EventType.SQS)

# Time a write needs after a wait: the upload again and the conditional write.
WAIT_MARGIN_SECONDS = 15.0


@per_environment
def ingestor() -> Ingestor:
    return Ingestor.from_env()


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker = ingestor()

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 - WAIT_MARGIN_SECONDS

    worker.bound_waits(time_left)
    records = event.get("Records") or []
    results = ingest_batch(
        worker,
        records,
        log=logger,
        coalesced=lambda n: metrics.add_metric(name="coalesced", unit=MetricUnit.Count, value=n),
    )
    by_message = {r.get("messageId"): result for r, result in zip(records, results, strict=True)}

    counts: Counter[str] = Counter()
    stored_bytes = 0
    for result in results:
        if isinstance(result, BaseException):
            counts["retried"] += 1
        else:
            counts[result.outcome] += 1
            stored_bytes += result.bytes if result.outcome == "stored" else 0
    for name in ("stored", "deleted", "stale", "unchanged", "invalid", "retried"):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=counts[name])
    metrics.add_metric(name="bytes_stored", unit=MetricUnit.Bytes, value=stored_bytes)

    def record_handler(record: SQSRecord) -> Any:
        outcome = by_message[record.message_id]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome.outcome

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
