"""The ingest pipeline: its queue, dead-letter queue, function and event source, and the
dead-letter alarm (infra/ingest.py and infra/monitoring.py deploy them; the local stack's queues,
SQS event-source emulator and alarm evaluator use the same)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .shape import MAX_SQS_MESSAGE_BYTES, MAX_SQS_RETENTION_SECONDS, Check, FunctionShape
from .staging import STAGING_EXPIRATION_DAYS

# The CDK constructs (infra/) and the local stack's queues and SQS event-source emulator read
# these, so the retry and dead-letter behaviour seen locally is the behaviour deployed. AWS
# guidance for SQS-triggered functions: visibility timeout at least 6x the function timeout,
# and a maxReceiveCount of 5 or more so that throttling alone never dead-letters a message.
QUEUE_VISIBILITY_TO_TIMEOUT_RATIO = 6
MIN_MAX_RECEIVE_COUNT = 5


class IngestShape(FunctionShape, shape="ingest", timeout_seconds=60, memory_mb=1024):
    visibility_timeout_seconds: int = 360
    max_receive_count: int = 5
    # Standard queues expire a message by its first enqueue time, even after it moves to the
    # DLQ, so the DLQ keeps the maximum and the source queue keeps less: a dead letter then
    # stays at least (dlq - queue) = 10 days in the DLQ.
    queue_retention_seconds: int = 4 * 24 * 3600
    dlq_retention_seconds: int = MAX_SQS_RETENTION_SECONDS
    max_message_bytes: int = MAX_SQS_MESSAGE_BYTES
    batch_size: int = 10
    max_batching_window_seconds: int = 5
    # The event source's maximum concurrency (2..1000), not reserved concurrency: throttled
    # invocations would count as receives and dead-letter healthy messages.
    max_concurrency: int = 10
    # /tmp: staged bodies over 64 MiB are spooled to disk while they are stored, several
    # messages of a batch at once.
    function_ephemeral_storage_mb: int = 2048

    def _checks(self) -> Iterator[Check]:
        yield (
            self.visibility_timeout_seconds
            >= QUEUE_VISIBILITY_TO_TIMEOUT_RATIO * self.function_timeout_seconds,
            f"visibility timeout {self.visibility_timeout_seconds}s is under "
            f"{QUEUE_VISIBILITY_TO_TIMEOUT_RATIO}x the function timeout "
            f"{self.function_timeout_seconds}s",
        )
        yield (
            self.visibility_timeout_seconds <= 12 * 3600,
            "visibility timeout must be at most 12 hours",
        )
        yield (
            self.max_receive_count >= MIN_MAX_RECEIVE_COUNT,
            f"max receive count must be at least {MIN_MAX_RECEIVE_COUNT}",
        )
        yield (
            60 <= self.queue_retention_seconds < self.dlq_retention_seconds,
            "the queue must keep messages for less time than the DLQ",
        )
        yield (
            self.dlq_retention_seconds <= MAX_SQS_RETENTION_SECONDS,
            "the DLQ can keep messages for at most 14 days",
        )
        yield (
            1024 <= self.max_message_bytes <= MAX_SQS_MESSAGE_BYTES,
            f"maximum message size must be 1024..{MAX_SQS_MESSAGE_BYTES} bytes",
        )
        yield 1 <= self.batch_size <= 10_000, "batch size must be 1..10000"
        yield (
            self.batch_size <= 10 or self.max_batching_window_seconds >= 1,
            "a batch size over 10 needs a batching window",
        )
        yield (
            0 <= self.max_batching_window_seconds <= 300,
            "maximum batching window must be 0..300 s",
        )
        yield 2 <= self.max_concurrency <= 1000, "maximum concurrency must be 2..1000"
        yield (
            512 <= self.function_ephemeral_storage_mb <= 10240,
            "ephemeral storage must be 512..10240 MB",
        )

    @property
    def staging_expiry_days(self) -> int:
        return STAGING_EXPIRATION_DAYS

    def redrive_policy(self, dlq_arn: str) -> str:
        import json

        return json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": self.max_receive_count}
        )

    def queue_attributes(
        self, dlq_arn: str, *, visibility_timeout: int | None = None
    ) -> dict[str, str]:
        """SQS CreateQueue attributes of the ingest queue, redriving to `dlq_arn`.

        `visibility_timeout` overrides the shape's for tests only, so that a retried message
        comes back in seconds rather than minutes."""
        return {
            "VisibilityTimeout": str(visibility_timeout or self.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(self.queue_retention_seconds),
            "MaximumMessageSize": str(self.max_message_bytes),
            "RedrivePolicy": self.redrive_policy(dlq_arn),
            "SqsManagedSseEnabled": "true",
        }

    def dlq_attributes(self) -> dict[str, str]:
        """SQS CreateQueue attributes of the dead-letter queue."""
        return {
            "MessageRetentionPeriod": str(self.dlq_retention_seconds),
            "MaximumMessageSize": str(self.max_message_bytes),
            "SqsManagedSseEnabled": "true",
        }


INGEST = IngestShape()


@dataclass(frozen=True)
class DlqAlarmShape:
    """The dead-letter alarm as CloudWatch defines it: ALARM as soon as one message is
    visible in the DLQ. The CDK alarm and the local stack's evaluator both use it."""

    metric_name: str = "ApproximateNumberOfMessagesVisible"
    namespace: str = "AWS/SQS"
    statistic: str = "Maximum"
    # Any dead letter is a record that was not stored: alarm on the first one, at once.
    period_seconds: int = 60
    evaluation_periods: int = 1
    threshold: float = 1
    comparison_operator: str = "GreaterThanOrEqualToThreshold"


DLQ_ALARM = DlqAlarmShape()
