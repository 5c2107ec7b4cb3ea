"""The change feed: the table's stream -> function -> SNS FIFO topic (docs/changes.md;
infra/changes.py deploys it, the local stream poller and the tests read the same)."""

from __future__ import annotations

from collections.abc import Iterator

from .shape import MAX_SQS_RETENTION_SECONDS, Check, FunctionShape

# One notification per stored version and per delete (docs/changes.md). The CDK constructs
# (infra/changes.py), the local stream poller (stream_source.py) and the tests read these.
# DynamoDB keeps stream records for 24 hours; SNS FIFO drops a repeated deduplication id for
# 5 minutes. The exactly-once argument in docs/changes.md rests on both.
STREAM_RETENTION_SECONDS = 24 * 3600
SNS_FIFO_DEDUPLICATION_WINDOW_SECONDS = 300
SNS_PUBLISH_BATCH_ENTRIES = 10
SNS_MAX_MESSAGE_BYTES = 256 * 1024
SNS_MAX_MESSAGE_GROUP_ID = 128
SNS_MAX_DEDUPLICATION_ID = 128


class ChangeFeedShape(FunctionShape, shape="change feed", timeout_seconds=60, memory_mb=256):
    # Records per invocation. Each becomes at most one PublishBatch entry (10 per call).
    batch_size: int = 100
    max_batching_window_seconds: int = 1
    # A failing batch is retried from its first failed record (ReportBatchItemFailures) and
    # bisected on a function error; after `retry_attempts` retries or once its records are
    # `max_record_age_seconds` old, Lambda sends the batch's position in the stream (not the
    # records) to the change feed's DLQ and moves on. The age bound leaves 18 of the stream's
    # 24 hours to replay a dead-lettered range from the stream (vhs.changes.publish.replay).
    retry_attempts: int = 100
    max_record_age_seconds: int = 6 * 3600
    # Concurrent batches per shard. Lambda keeps records of one item key in order at any
    # factor; 1 keeps the feed simple to reason about.
    parallelization_factor: int = 1
    # The handler stops publishing when less than this is left of its timeout and reports
    # the rest of the batch as failed (retried), rather than be killed mid-batch.
    stop_publishing_at_remaining_ms: int = 10_000
    dlq_retention_seconds: int = MAX_SQS_RETENTION_SECONDS
    # The most a notification's JSON Patch (changes/notification_patch.py) may take, as compact
    # UTF-8 JSON; a larger one is left out ("patch_omitted": "too_large"). The rest of a
    # notification is under 8 KiB, so ten of the largest still fit one PublishBatch's 256 KiB.
    max_patch_bytes: int = 16 * 1024
    # A stream consumer falling this far behind is an alarm: records expire after 24 hours.
    iterator_age_alarm_seconds: int = 900

    def _checks(self) -> Iterator[Check]:
        yield 1 <= self.batch_size <= 10_000, "batch size must be 1..10000"
        yield (
            0 <= self.max_batching_window_seconds <= 300,
            "maximum batching window must be 0..300 s",
        )
        yield 0 <= self.retry_attempts <= 10_000, "retry attempts must be bounded: 0..10000"
        yield (
            60 <= self.max_record_age_seconds < STREAM_RETENTION_SECONDS,
            "maximum record age must be 60 s..24 h (the stream's retention)",
        )
        yield 1 <= self.parallelization_factor <= 10, "parallelization factor must be 1..10"
        yield (
            0 <= self.stop_publishing_at_remaining_ms < self.function_timeout_seconds * 1000,
            "the publishing cut-off must be shorter than the function timeout",
        )
        yield (
            0 <= self.max_patch_bytes <= SNS_MAX_MESSAGE_BYTES // SNS_PUBLISH_BATCH_ENTRIES,
            "a notification's patch may take at most a tenth of one PublishBatch's 256 KiB",
        )
        yield (
            60 <= self.dlq_retention_seconds <= MAX_SQS_RETENTION_SECONDS,
            "the DLQ can keep messages for 60 s..14 days",
        )


CHANGES = ChangeFeedShape()
