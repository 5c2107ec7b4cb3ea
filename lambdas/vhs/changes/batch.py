"""One batch of the table's stream: its notifications published in stream order, and the
batch's answer to Lambda read off how far that got.

Order is what matters here, so a batch is handled in stream order and stops at the first
record it cannot finish. Its notifications (feed.py derives them from the images) go out
through PublishBatch, which never carries two changes of one id in one call; publishing stops
at the first entry SNS does not confirm, and at the invocation's time cut-off. Every record
from the first unfinished one on is reported as failed (`batch_response`, a partial batch
response: the event source has ReportBatchItemFailures): Lambda checkpoints at the lowest
reported sequence number and delivers everything from it again, so a later version of an id
is never published before an earlier one. When the first record of a batch cannot be
finished, every record fails and `batch_response` raises Powertools' BatchProcessingError, as
its BatchProcessor does: a function error, on which Lambda bisects the batch, so that a
record which keeps failing is given up on (to the DLQ) alone, not with its batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from .. import keys, settings
from ..aws import aws_client
from ..bodies.dictionaries import DictionaryStore
from ..errors import NotPublished
from ..shapes import CHANGES
from .feed import Derived, changes_from_record
from .publish import ChangePublisher


class Log(Protocol):
    """What a batch logs to: a logging.Logger, or the handler's Powertools Logger."""

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...

    def info(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...

    def error(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...


@dataclass
class Plan:
    derived: list[Derived]
    finished: int  # the records [0, finished) are done; every later one is retried
    reason: str | None
    published: int


@dataclass
class Feed:
    publisher: ChangePublisher
    bucket: str
    prefix: str
    stop_at_remaining_ms: int
    dictionaries: DictionaryStore

    @classmethod
    def from_env(cls) -> Feed:
        """From the environment: VHS_CHANGE_TOPIC_ARN and VHS_BUCKET_NAME (for the bodies'
        locations) are required; VHS_PREFIX as the store's. The endpoint is the standard
        AWS_ENDPOINT_URL."""
        topic, bucket = settings.require(settings.CHANGE_TOPIC_ARN, settings.BUCKET_NAME)
        prefix = keys.validate_prefix(settings.get(settings.PREFIX))
        return cls(
            publisher=ChangePublisher(aws_client("sns"), topic),
            bucket=bucket,
            prefix=prefix,
            # Its S3 client is made only when a patch needs a dictionary.
            dictionaries=DictionaryStore(lambda: aws_client("s3"), bucket, prefix),
            stop_at_remaining_ms=settings.whole_number(
                settings.CHANGES_STOP_AT_REMAINING_MS, CHANGES.stop_publishing_at_remaining_ms
            ),
        )

    def publish(
        self, records: list[dict[str, Any]], remaining_ms: Callable[[], int] | None = None
    ) -> Plan:
        """Publish the notifications of `records`, in order, while `remaining_ms()` (the
        invocation's time left; None: no limit) is above the cut-off; how far that got."""
        derived: list[Derived] = []
        finished, reason = len(records), None
        for index, record in enumerate(records):
            try:
                derived.append(
                    changes_from_record(
                        record,
                        bucket=self.bucket,
                        prefix=self.prefix,
                        dictionaries=self.dictionaries.get,
                    )
                )
            except Exception as error:  # a malformed image: retried, then given up on alone
                finished = index
                reason = f"cannot read the record: {type(error).__name__}: {error}"
                break
        owners = [n for n, d in enumerate(derived) for _ in d.changes]
        changes = [change for d in derived for change in d.changes]

        def keep_going() -> bool:
            return remaining_ms is None or remaining_ms() > self.stop_at_remaining_ms

        result = self.publisher.publish(changes, keep_going=keep_going)
        if not result.complete:
            finished, reason = min(finished, owners[result.published]), result.error
        return Plan(derived, finished, reason, result.published)


def _sequence_number(record: dict[str, Any]) -> str | None:
    return record.get("dynamodb", {}).get("SequenceNumber")


def batch_response(records: list[dict[str, Any]], plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Lambda's partial batch response: the sequence number of every record from the first
    unfinished one on, in stream order; none when all are finished. When none is finished
    (and the batch has records), Powertools' BatchProcessingError instead, with each record's
    NotPublished: the invocation fails, and Lambda bisects the batch."""
    unfinished = records[plan.finished :]
    if records and not plan.finished:
        reason = plan.reason or "an earlier record of the batch was not finished"
        errors = [NotPublished(reason) for _ in records]
        raise BatchProcessingError(
            msg=f"All records failed processing. {len(errors)} individual errors logged "
            "separately below.",
            child_exceptions=[(NotPublished, error, None) for error in errors],
        )
    return {"batchItemFailures": [{"itemIdentifier": _sequence_number(r)} for r in unfinished]}


def report(
    records: list[dict[str, Any]], plan: Plan, log: Log, count: Callable[[str, int], None]
) -> None:
    """Log what the batch published, skipped and leaves to retry, and `count(name, n)` each."""
    skipped = 0
    for record, derived in zip(records[: plan.finished], plan.derived, strict=False):
        sequence_number = _sequence_number(record)
        for change in derived.changes:
            log.debug(
                "published",
                extra={
                    "record_id": change.id,
                    "version": change.version,
                    "change": change.change,
                    "sequence_number": sequence_number,
                },
            )
        if not derived.changes:
            skipped += 1
        if derived.reason == "removed":
            log.info(
                "item removed from the table (TTL or by hand): no notification",
                extra={
                    "record_id": derived.id,
                    "sequence_number": sequence_number,
                    "user_identity": record.get("userIdentity"),
                },
            )
        if derived.unknown_versions:
            log.error(
                "versions made by this record are no longer in its image: not notified",
                extra={"record_id": derived.id, "versions": list(derived.unknown_versions)},
            )
            count("unknown_versions", len(derived.unknown_versions))
    retried = len(records) - plan.finished
    if retried:
        log.warning(
            "will retry",
            extra={
                "retry_from": _sequence_number(records[plan.finished]),
                "records": retried,
                "reason": plan.reason,
            },
        )
    published = plan.published  # confirmed by SNS, from the start of the batch
    log.info(
        "batch",
        extra={
            "records": len(records),
            "published": published,
            "skipped": skipped,
            "retried": retried,
        },
    )
    count("published", published)
    count("skipped", skipped)
    count("retried", retried)
