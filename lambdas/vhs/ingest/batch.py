"""One batch of the ingest queue: every record read once, coalesced, written concurrently.

Each record is read first, without I/O (contract.first_read: parsed, and an inline message
validated and its body encoded); the batch is coalesced from those readings (coalesce.py), and
each writer is written from its own (Ingestor.handle), so no message is parsed or validated
twice. A claim check's payload is fetched and read only when it is written. The writers of a
round are stored concurrently, CONCURRENCY at a time: their order cannot matter, because the
store orders writes by (updated_at, content hash).

The batch's answer to Lambda is read off those results, in the one pass that made them:
`batch_response` lists the messages to retry as a partial batch response (the event source
has ReportBatchItemFailures), and `tally` counts the outcomes for the handler's metrics.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from .. import settings
from ..errors import InvalidMessage
from .coalesce import in_rounds, read_candidate
from .contract import FirstRead
from .ingestor import Ingestor, IngestResult

CONCURRENCY = settings.whole_number(settings.INGEST_CONCURRENCY, 16)
# A record's outcomes, as counted: IngestResult's, and "retried" for one that failed.
OUTCOMES = ("stored", "deleted", "stale", "unchanged", "invalid", "retried")


class Log(Protocol):
    """What the batch logs to: a logging.Logger, or the handler's Powertools Logger (whose
    JSON records carry `extra`'s fields)."""

    def info(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...


def _ingest_one(
    worker: Ingestor, record: dict[str, Any], first: FirstRead | None = None, log: Log | None = None
) -> IngestResult | BaseException:
    """Store one record (from its `first` reading, if given), dead-letter it if invalid, or
    return the exception that makes SQS retry it."""
    log = log or logging.getLogger(__name__)
    message_id = record.get("messageId", "")
    try:
        try:
            result = worker.handle(record, first)
        except InvalidMessage as error:
            worker.dead_letter(record, error)
            log.warning(
                "dead-lettered an invalid message",
                extra={
                    "message_id": message_id,
                    "error_type": type(error).__name__,
                    "field": error.field,
                    "reason": error.reason,
                },
            )
            return IngestResult(message_id, None, "invalid")
        log.info(
            result.outcome,
            extra={
                "message_id": message_id,
                "record_id": result.record_id,
                "version": result.version,
            },
        )
        return result
    except Exception as error:  # retried by SQS; dead-lettered by redrive if it persists
        log.warning(
            "will retry",
            extra={"message_id": message_id, "error": f"{type(error).__name__}: {error}"},
        )
        return error


def ingest_batch(
    worker: Ingestor,
    records: list[dict[str, Any]],
    *,
    log: Log | None = None,
    coalesced: Callable[[int], None] | None = None,
) -> list[IngestResult | BaseException]:
    """Every record's result, in order: messages for one id coalesced to their winner
    (vhs.ingest.coalesce), the writers stored concurrently, and the others' outcomes read
    off their winner's. Losers whose winner was not written (dead-lettered, or failed and to
    be retried) are coalesced again among themselves, as if it had never been sent. Each
    outcome is logged to `log`, and `coalesced(count)` is told how many were coalesced."""
    log = log or logging.getLogger(__name__)
    reads = [worker.first_read(record) for record in records]
    candidates = {
        n: c
        for n, (record, first) in enumerate(zip(records, reads, strict=True))
        if (c := read_candidate(n, record, first)) is not None
    }
    results: list[IngestResult | BaseException | None] = [None] * len(records)

    def write(writers: list[int]) -> None:
        with ThreadPoolExecutor(max(1, min(CONCURRENCY, len(writers)))) as pool:
            written = pool.map(lambda n: _ingest_one(worker, records[n], reads[n], log), writers)
            for n, result in zip(writers, written, strict=True):
                results[n] = result

    def outcome(winner: int) -> str | None:
        # Not written (it is retried, or dead-lettered): None.
        won = results[winner]
        if isinstance(won, BaseException) or won is None or won.outcome == "invalid":
            return None
        return won.outcome

    count = 0
    for n, winner, after in in_rounds(range(len(records)), candidates, write, outcome):
        won = cast(IngestResult, results[winner])  # in_rounds yields written winners only
        loser, message_id = candidates[n], records[n]["messageId"]
        results[n] = IngestResult(message_id, loser.record_id, after, won.version)
        count += 1
        log.info(
            after,
            extra={
                "message_id": message_id,
                "record_id": loser.record_id,
                "coalesced_into": records[winner]["messageId"],
            },
        )
    if coalesced is not None:
        coalesced(count)
    return [r for r in results if r is not None]


def batch_response(
    records: list[dict[str, Any]], results: list[IngestResult | BaseException]
) -> dict[str, list[dict[str, str]]]:
    """Lambda's partial batch response: `{"batchItemFailures": [{"itemIdentifier": id}]}`
    for every message whose result is an error (SQS delivers it again), in order; none when
    every message is done. When every message of a batch failed this raises instead, as
    Powertools' BatchProcessor does (BatchProcessingError, holding each record's error), so
    that the invocation fails and Lambda backs off; the messages return to the queue either
    way."""
    failed = [
        (record.get("messageId", ""), result)
        for record, result in zip(records, results, strict=True)
        if isinstance(result, BaseException)
    ]
    if failed and len(failed) == len(records):
        raise BatchProcessingError(
            msg=f"All records failed processing. {len(failed)} individual errors logged "
            "separately below.",
            child_exceptions=[(type(error), error, error.__traceback__) for _, error in failed],
        )
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id, _ in failed]}


def tally(results: list[IngestResult | BaseException]) -> tuple[dict[str, int], int]:
    """How many records had each of OUTCOMES, and the bytes of the bodies stored."""
    counts: Counter[str] = Counter()
    stored_bytes = 0
    for result in results:
        if isinstance(result, BaseException):
            counts["retried"] += 1
        else:
            counts[result.outcome] += 1
            stored_bytes += result.bytes if result.outcome == "stored" else 0
    return {name: counts[name] for name in OUTCOMES}, stored_bytes
