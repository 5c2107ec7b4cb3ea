"""The change feed Lambda: DynamoDB stream records in, one SNS notification per version out.

Wired with Powertools like the ingest handler: `BatchProcessor(EventType.DynamoDBStreams)`
reports batch item failures (the event source has ReportBatchItemFailures and
BisectBatchOnFunctionError), Logger writes JSON, Metrics emits EMF counts, and Tracer traces
where tracing is on (observability.traced).

Order is what matters here, so a batch is handled in stream order and stops at the first
record it cannot finish. Its notifications (vhs.changes.feed derives them from the images) go out
through PublishBatch, which never carries two changes of one id in one call; publishing stops
at the first entry SNS does not confirm, and at the invocation's time cut-off. Every record
from the first unfinished one on is reported as failed: Lambda checkpoints at the lowest
reported sequence number and delivers everything from it again, so a later version of an id
is never published before an earlier one. A retried notification that SNS already has is
dropped by its deduplication id. When the first record of a batch cannot be finished, every
record fails and Powertools raises: a function error, on which Lambda bisects the batch, so
that a record which keeps failing is given up on (to the DLQ) alone, not with its batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs import keys, settings
from vhs.aws import aws_client
from vhs.changes.feed import Derived, changes_from_record
from vhs.changes.publish import ChangePublisher
from vhs.dictionaries import DictionaryStore
from vhs.settings import CHANGES_FUNCTION
from vhs.shapes import CHANGES

logger, metrics = logger_and_metrics(CHANGES_FUNCTION)
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


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


@per_environment
def feed() -> Feed:
    return Feed.from_env()


class NotPublished(Exception):
    """This record's notifications are not (all) confirmed published; it comes again."""


@dataclass
class Plan:
    derived: list[Derived]
    finished: int  # the records [0, finished) are done; every later one is retried
    reason: str | None
    published: int


def _plan(records: list[dict[str, Any]], config: Feed, context: Any) -> Plan:
    derived: list[Derived] = []
    finished, reason = len(records), None
    for index, record in enumerate(records):
        try:
            derived.append(
                changes_from_record(
                    record,
                    bucket=config.bucket,
                    prefix=config.prefix,
                    dictionaries=config.dictionaries.get,
                )
            )
        except Exception as error:  # a malformed image: retried, then given up on alone
            finished, reason = index, f"cannot read the record: {type(error).__name__}: {error}"
            break
    owners = [n for n, d in enumerate(derived) for _ in d.changes]
    changes = [change for d in derived for change in d.changes]

    remaining = getattr(context, "get_remaining_time_in_millis", None)

    def keep_going() -> bool:
        return remaining is None or remaining() > config.stop_at_remaining_ms

    result = config.publisher.publish(changes, keep_going=keep_going)
    if not result.complete:
        finished, reason = min(finished, owners[result.published]), result.error
    return Plan(derived, finished, reason, result.published)


def _log(records: list[dict[str, Any]], plan: Plan) -> None:
    skipped = 0
    for record, derived in zip(records[: plan.finished], plan.derived, strict=False):
        sequence_number = record.get("dynamodb", {}).get("SequenceNumber")
        for change in derived.changes:
            logger.debug(
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
            logger.info(
                "item removed from the table (TTL or by hand): no notification",
                extra={
                    "record_id": derived.id,
                    "sequence_number": sequence_number,
                    "user_identity": record.get("userIdentity"),
                },
            )
        if derived.unknown_versions:
            logger.error(
                "versions made by this record are no longer in its image: not notified",
                extra={"record_id": derived.id, "versions": list(derived.unknown_versions)},
            )
            metrics.add_metric(
                name="unknown_versions",
                unit=MetricUnit.Count,
                value=len(derived.unknown_versions),
            )
    retried = len(records) - plan.finished
    if retried:
        logger.warning(
            "will retry",
            extra={
                "retry_from": records[plan.finished].get("dynamodb", {}).get("SequenceNumber"),
                "records": retried,
                "reason": plan.reason,
            },
        )
    published = plan.published  # confirmed by SNS, from the start of the batch
    logger.info(
        "batch",
        extra={
            "records": len(records),
            "published": published,
            "skipped": skipped,
            "retried": retried,
        },
    )
    metrics.add_metric(name="published", unit=MetricUnit.Count, value=published)
    metrics.add_metric(name="skipped", unit=MetricUnit.Count, value=skipped)
    metrics.add_metric(name="retried", unit=MetricUnit.Count, value=retried)


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config = feed()
    records = event.get("Records") or []
    plan = _plan(records, config, context)
    _log(records, plan)
    position = {r.get("dynamodb", {}).get("SequenceNumber"): n for n, r in enumerate(records)}

    def record_handler(record: DynamoDBRecord) -> Any:
        index = position[record.dynamodb.sequence_number if record.dynamodb else None]
        if index >= plan.finished:
            raise NotPublished(plan.reason or "an earlier record of the batch was not finished")
        return len(plan.derived[index].changes)

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
