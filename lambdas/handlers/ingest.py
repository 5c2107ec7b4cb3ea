"""The ingest Lambda: SQS messages in, two-phase writes to the store out.

Wired with Powertools: Logger writes JSON with the message and record ids, Metrics emits EMF
counts, and Tracer traces where tracing is on (see observability.traced). A batch is read,
coalesced and written by vhs.ingest.batch, which also answers Lambda from what it computed:
the partial batch response, read off each record's result in the same pass (the event source
has ReportBatchItemFailures), or Powertools' BatchProcessingError when every record failed.
This module only wires it: the ingestor, the invocation's time left, the logger and the
metrics.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.ingest.batch import batch_response, ingest_batch, tally
from vhs.ingest.ingestor import Ingestor
from vhs.settings import INGEST_FUNCTION

logger, metrics = logger_and_metrics(INGEST_FUNCTION)

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
    counts, stored_bytes = tally(results)
    for name, count in counts.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="bytes_stored", unit=MetricUnit.Bytes, value=stored_bytes)
    return batch_response(records, results)
