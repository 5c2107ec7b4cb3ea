"""The ingest Lambda: SQS messages in, two-phase writes to the store out.

Wired with Powertools: `BatchProcessor` reports batch item failures (the event source has
ReportBatchItemFailures), Logger writes JSON with the message and record ids, Metrics emits
EMF counts, and Tracer traces where tracing is on (see observability.traced). The messages
of one batch are stored concurrently; their order in the batch cannot matter, because the
store orders writes by (updated_at, content hash).
"""

from __future__ import annotations

import functools
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from handlers.observability import instrumented, logger_and_metrics
from vhs import settings
from vhs.errors import InvalidMessage
from vhs.ingest.ingestor import Ingestor, IngestResult
from vhs.settings import INGEST_FUNCTION

logger, metrics = logger_and_metrics(INGEST_FUNCTION)
processor = BatchProcessor(event_type=EventType.SQS)

CONCURRENCY = settings.whole_number(settings.INGEST_CONCURRENCY, 16)
# Time a write needs after a wait: the upload again and the conditional write.
WAIT_MARGIN_SECONDS = 15.0


@functools.cache
def ingestor() -> Ingestor:
    # Built on first use, not at import, so the import stays cheap and tests can set the env.
    return Ingestor.from_env()


def reset() -> None:
    """Forget the configured ingestor, and read the metrics namespace again (tests point the
    handler at a fresh stack, with an environment of its own; the namespace was read when the
    module was first imported, under whichever test's environment that was)."""
    ingestor.cache_clear()
    metrics.namespace = settings.metrics_namespace()


def _ingest_one(worker: Ingestor, record: dict[str, Any]) -> IngestResult | BaseException:
    message_id = record.get("messageId", "")
    try:
        try:
            result = worker.handle(record)
        except InvalidMessage as error:
            worker.dead_letter(record, error)
            logger.warning(
                "dead-lettered an invalid message",
                extra={
                    "message_id": message_id,
                    "error_type": type(error).__name__,
                    "field": error.field,
                    "reason": error.reason,
                },
            )
            return IngestResult(message_id, None, "invalid")
        logger.info(
            result.outcome,
            extra={
                "message_id": message_id,
                "record_id": result.record_id,
                "version": result.version,
            },
        )
        return result
    except Exception as error:  # retried by SQS; dead-lettered by redrive if it persists
        logger.warning(
            "will retry",
            extra={"message_id": message_id, "error": f"{type(error).__name__}: {error}"},
        )
        return error


def ingest_batch(
    worker: Ingestor, records: list[dict[str, Any]]
) -> list[IngestResult | BaseException]:
    """Every record's result, in order: messages for one id coalesced to their winner
    (vhs.ingest.coalesce), the writers stored concurrently, and the others' outcomes read
    off their winner's. Losers whose winner was not written (dead-lettered, or failed and to
    be retried) are coalesced again among themselves, as if it had never been sent."""
    from vhs.ingest.coalesce import in_rounds, read_candidate

    candidates = {
        n: c
        for n, record in enumerate(records)
        if (c := read_candidate(n, record, worker.limits)) is not None
    }
    results: list[IngestResult | BaseException | None] = [None] * len(records)

    def write(writers: list[int]) -> None:
        with ThreadPoolExecutor(max(1, min(CONCURRENCY, len(writers)))) as pool:
            written = pool.map(lambda n: _ingest_one(worker, records[n]), writers)
            for n, result in zip(writers, written, strict=True):
                results[n] = result

    def outcome(winner: int) -> str | None:
        # Not written (it is retried, or dead-lettered): None.
        won = results[winner]
        if isinstance(won, BaseException) or won is None or won.outcome == "invalid":
            return None
        return won.outcome

    coalesced = 0
    for n, winner, after in in_rounds(range(len(records)), candidates, write, outcome):
        won = cast(IngestResult, results[winner])  # in_rounds yields written winners only
        loser, message_id = candidates[n], records[n]["messageId"]
        results[n] = IngestResult(message_id, loser.record_id, after, won.version)
        coalesced += 1
        logger.info(
            after,
            extra={
                "message_id": message_id,
                "record_id": loser.record_id,
                "coalesced_into": records[winner]["messageId"],
            },
        )
    metrics.add_metric(name="coalesced", unit=MetricUnit.Count, value=coalesced)
    return [r for r in results if r is not None]


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker = ingestor()

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 - WAIT_MARGIN_SECONDS

    # A write whose body the garbage collector condemned waits the condemnation out, and a
    # message waits for the memory or /tmp the batch's others hold, but never past this
    # invocation's time: it fails instead, and SQS delivers it again.
    worker.store.wait_budget = time_left
    worker.budgets.remaining = time_left
    records = event.get("Records") or []
    results = ingest_batch(worker, records)
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
