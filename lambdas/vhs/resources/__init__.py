"""The one definition of the shape of every AWS resource VHS uses.

The library, `vhs local up` and the CDK constructs in infra/ all read these constants, so the
local stack and the cloud cannot drift apart. Change a shape here and every consumer follows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# --- The index table -----------------------------------------------------------------------
# One item per record id: the current version, the retained earlier versions and, for small
# bodies, the body itself. See docs/design.md for the item layout.
TABLE_PARTITION_KEY = "id"
TABLE_PARTITION_KEY_TYPE = "S"
TABLE_BILLING_MODE = "PAY_PER_REQUEST"
# The change feed (a later issue) reads both images from the stream.
TABLE_STREAM_VIEW_TYPE = "NEW_AND_OLD_IMAGES"
# A sparse index of the items that hold a garbage-collector condemnation (item.py's `gcd`,
# its deadline): only those items are in it, so the collector finds and clears expired
# condemnations of ids that no longer have any object to list (a purged record, say) at the
# cost of the condemned items alone. Keys only: the collector needs the id and the deadline.
CONDEMNED_INDEX_NAME = "condemned"
CONDEMNED_INDEX_KEY = "gcd"
CONDEMNED_INDEX_KEY_TYPE = "N"


def _require(shape: str, checks: Iterable[tuple[bool, str]]) -> None:
    """Raise ValueError naming, in order, every one of a shape's `checks` (holds, what is
    wrong otherwise) that does not hold."""
    problems = [problem for holds, problem in checks if not holds]
    if problems:
        raise ValueError(f"invalid {shape} shape: " + "; ".join(problems))


@dataclass(frozen=True)
class TableShape:
    partition_key: str = TABLE_PARTITION_KEY
    partition_key_type: str = TABLE_PARTITION_KEY_TYPE
    billing_mode: str = TABLE_BILLING_MODE
    stream_view_type: str = TABLE_STREAM_VIEW_TYPE
    condemned_index: str = CONDEMNED_INDEX_NAME
    condemned_index_key: str = CONDEMNED_INDEX_KEY
    condemned_index_key_type: str = CONDEMNED_INDEX_KEY_TYPE

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for DynamoDB CreateTable (used by the local stack and the tests)."""
        return {
            "TableName": table_name,
            "KeySchema": [{"AttributeName": self.partition_key, "KeyType": "HASH"}],
            "AttributeDefinitions": [
                {"AttributeName": self.partition_key, "AttributeType": self.partition_key_type},
                {
                    "AttributeName": self.condemned_index_key,
                    "AttributeType": self.condemned_index_key_type,
                },
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": self.condemned_index,
                    "KeySchema": [{"AttributeName": self.condemned_index_key, "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": self.billing_mode,
            "StreamSpecification": {
                "StreamEnabled": True,
                "StreamViewType": self.stream_view_type,
            },
        }


TABLE = TableShape()

# --- The body bucket -----------------------------------------------------------------------
# Incomplete multipart uploads (a writer that crashed mid-upload) are aborted after this many
# days, so they cost nothing for long.
BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS = 1


def create_table(dynamodb: Any, table_name: str) -> None:
    """Create the index table with the shared shape and wait until it is active."""
    dynamodb.create_table(**TABLE.create_table_kwargs(table_name))
    dynamodb.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )


def create_bucket(s3: Any, bucket_name: str, region: str) -> None:
    """Create the body bucket with the shared settings."""
    kwargs: dict[str, Any] = {"Bucket": bucket_name}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    s3.create_bucket(**kwargs)
    s3.put_public_access_block(
        Bucket=bucket_name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket_name,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "abort-incomplete-multipart-uploads",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "AbortIncompleteMultipartUpload": {
                        "DaysAfterInitiation": BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS
                    },
                }
            ]
        },
    )


def create_store_resources(
    dynamodb: Any, s3: Any, *, table_name: str, bucket_name: str, region: str
) -> None:
    """Create the table and bucket a `VersionedHybridStore` needs."""
    create_table(dynamodb, table_name)
    create_bucket(s3, bucket_name, region)


# --- The ingest pipeline: queue, dead-letter queue, function and event source ---------------
# The CDK constructs (infra/) and the local stack's queues and SQS event-source emulator read
# these, so the retry and dead-letter behaviour seen locally is the behaviour deployed. AWS
# guidance for SQS-triggered functions: visibility timeout at least 6x the function timeout,
# and a maxReceiveCount of 5 or more so that throttling alone never dead-letters a message.
QUEUE_VISIBILITY_TO_TIMEOUT_RATIO = 6
MIN_MAX_RECEIVE_COUNT = 5
MAX_SQS_RETENTION_SECONDS = 14 * 24 * 3600
MAX_SQS_MESSAGE_BYTES = 1024 * 1024  # raised from 256 KB in 2025


@dataclass(frozen=True)
class IngestShape:
    function_timeout_seconds: int = 60
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
    function_memory_mb: int = 1024
    # /tmp: staged bodies over 64 MiB are spooled to disk while they are stored, several
    # messages of a batch at once.
    function_ephemeral_storage_mb: int = 2048

    def __post_init__(self) -> None:
        _require("ingest", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
        yield (
            self.visibility_timeout_seconds
            >= QUEUE_VISIBILITY_TO_TIMEOUT_RATIO * self.function_timeout_seconds,
            f"visibility timeout {self.visibility_timeout_seconds}s is under "
            f"{QUEUE_VISIBILITY_TO_TIMEOUT_RATIO}x the function timeout "
            f"{self.function_timeout_seconds}s",
        )
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
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


def create_ingest_queues(
    sqs: Any, *, queue_name: str, dlq_name: str, visibility_timeout: int | None = None
) -> tuple[str, str]:
    """Create the DLQ and the ingest queue with the shared shape; returns (queue, DLQ) URLs."""
    dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes=INGEST.dlq_attributes())["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = INGEST.queue_attributes(dlq_arn, visibility_timeout=visibility_timeout)
    queue_url = sqs.create_queue(QueueName=queue_name, Attributes=attributes)["QueueUrl"]
    return queue_url, dlq_url


# --- Alarms -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlarmThresholds:
    # Any dead letter is a record that was not stored: alarm on the first one, at once.
    dlq_visible_messages: int = 1
    dlq_period_seconds: int = 60
    dlq_evaluation_periods: int = 1
    # The oldest message waiting longer than this means ingest is falling behind.
    oldest_message_age_seconds: int = 900
    oldest_message_period_seconds: int = 60
    # Function errors (a failed invocation, not a partial batch failure), throttles and
    # DynamoDB throttled requests: the sum over one period.
    function_errors: int = 1
    function_throttles: int = 1
    dynamodb_throttled_requests: int = 1
    period_seconds: int = 300


ALARMS = AlarmThresholds()


@dataclass(frozen=True)
class DlqAlarmShape:
    """The dead-letter alarm as CloudWatch defines it: ALARM as soon as one message is
    visible in the DLQ. The CDK alarm and the local stack's evaluator both use it."""

    metric_name: str = "ApproximateNumberOfMessagesVisible"
    namespace: str = "AWS/SQS"
    statistic: str = "Maximum"
    period_seconds: int = ALARMS.dlq_period_seconds
    evaluation_periods: int = ALARMS.dlq_evaluation_periods
    threshold: float = ALARMS.dlq_visible_messages
    comparison_operator: str = "GreaterThanOrEqualToThreshold"

    def breached(self, visible: float) -> bool:
        return visible >= self.threshold


DLQ_ALARM = DlqAlarmShape()

# --- Staging: claim-check payloads and staged bodies -------------------------------------------
# Producers put large payloads in a staging bucket and send a pointer (the SQS Extended Client
# format). The bucket is the pipeline's own. Producers write under STAGING_PREFIX only (each
# may be given a prefix of its own below it), and ingest reads only there; the handler's own
# objects live beside it under DEAD_LETTER_STAGING_PREFIX, where producers may neither write
# nor point. (The Java Extended Client writes under a prefix with withS3KeyPrefix.) Staged
# objects outlive every message that can point at them: a message lives at most the DLQ
# retention (14 days from its first enqueue).
STAGING_PREFIX = "incoming/"
# Where the handler stages a dead letter too large to resend with its reason attached (at the
# staging bucket's root, outside STAGING_PREFIX).
DEAD_LETTER_STAGING_PREFIX = "dead-letters/"
# Where the handler keeps a receipt of every dead letter it sends (keyed by the dead letter's
# message id): the only thing that makes a dead letter's reason trusted (ingest/deadletter.py).
# Under DEAD_LETTER_STAGING_PREFIX, which producers may not write.
DEAD_LETTER_RECEIPT_PREFIX = DEAD_LETTER_STAGING_PREFIX + "receipts/"
STAGING_EXPIRATION_DAYS = MAX_SQS_RETENTION_SECONDS // (24 * 3600) + 1
# The deployed body bucket keeps bodies under this prefix (VHS_PREFIX), so the ingest role's
# object permissions name it.
DEPLOYED_BODY_PREFIX = "bodies"
# Deployed buckets are versioned; a body the garbage collector deletes stays recoverable
# for this many days (a safety net against a collector that runs too early).
BUCKET_NONCURRENT_VERSION_DAYS = 30
ACCESS_LOG_EXPIRATION_DAYS = 365
STAGING_EXPIRY_RULE_ID = "expire-staged-payloads"


def staging_expiry_rule() -> dict[str, Any]:
    """The S3 lifecycle rule that expires staged objects after INGEST.staging_expiry_days
    (infra/store.py's staging bucket declares the same rule)."""
    return {
        "ID": STAGING_EXPIRY_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},  # the whole bucket: staged payloads and dead letters
        "Expiration": {"Days": INGEST.staging_expiry_days},
    }


def create_staging_bucket(s3: Any, bucket_name: str, region: str) -> None:
    """Create the staging bucket: the body bucket's settings plus the expiry of staged
    objects. Never apply the expiry rule to the body bucket: it would expire bodies."""
    create_bucket(s3, bucket_name, region)
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket_name)["Rules"]
    rules = [rule for rule in rules if rule.get("ID") != STAGING_EXPIRY_RULE_ID]
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket_name, LifecycleConfiguration={"Rules": [*rules, staging_expiry_rule()]}
    )


# --- The change feed: the table's stream -> function -> SNS FIFO topic -------------------------
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


@dataclass(frozen=True)
class ChangeFeedShape:
    # Records per invocation. Each becomes at most one PublishBatch entry (10 per call).
    batch_size: int = 100
    max_batching_window_seconds: int = 1
    # A failing batch is retried from its first failed record (ReportBatchItemFailures) and
    # bisected on a function error; after `retry_attempts` retries or once its records are
    # `max_record_age_seconds` old, Lambda sends the batch's position in the stream (not the
    # records) to the change feed's DLQ and moves on. The age bound leaves 18 of the stream's
    # 24 hours to replay a dead-lettered range from the stream (vhs.changes.feed.replay).
    retry_attempts: int = 100
    max_record_age_seconds: int = 6 * 3600
    # Concurrent batches per shard. Lambda keeps records of one item key in order at any
    # factor; 1 keeps the feed simple to reason about.
    parallelization_factor: int = 1
    function_timeout_seconds: int = 60
    function_memory_mb: int = 256
    # The handler stops publishing when less than this is left of its timeout and reports
    # the rest of the batch as failed (retried), rather than be killed mid-batch.
    stop_publishing_at_remaining_ms: int = 10_000
    dlq_retention_seconds: int = MAX_SQS_RETENTION_SECONDS
    # A stream consumer falling this far behind is an alarm: records expire after 24 hours.
    iterator_age_alarm_seconds: int = 900

    def __post_init__(self) -> None:
        _require("change feed", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
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
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield (
            0 <= self.stop_publishing_at_remaining_ms < self.function_timeout_seconds * 1000,
            "the publishing cut-off must be shorter than the function timeout",
        )
        yield (
            60 <= self.dlq_retention_seconds <= MAX_SQS_RETENTION_SECONDS,
            "the DLQ can keep messages for 60 s..14 days",
        )


CHANGES = ChangeFeedShape()


def create_change_topic(sns: Any, topic_name: str) -> str:
    """Create the change feed's SNS FIFO topic (local stack and tests); returns its ARN. The
    deployed topic is also KMS-encrypted and TLS-only (infra/changes.py)."""
    if not topic_name.endswith(".fifo"):
        raise ValueError("an SNS FIFO topic's name ends in .fifo")
    return sns.create_topic(
        Name=topic_name,
        Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"},
    )["TopicArn"]


def subscribe_fifo_queue(sns: Any, sqs: Any, topic_arn: str, queue_name: str) -> str:
    """An SQS FIFO queue subscribed to the change topic with raw delivery (the message body
    is the notification itself); returns the queue URL. How a consumer listens, locally."""
    if not queue_name.endswith(".fifo"):
        raise ValueError("an SQS FIFO queue's name ends in .fifo")
    queue_url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return queue_url


# --- Reindex: replays of every current record to the change feed (docs/changes.md) ---------
# The Reindex stack (infra/reindex.py) runs handlers.reindex from a Step Functions state
# machine: a Distributed Map over Scan segments, each looping the worker with its cursor.
# `vhs reindex` runs the same worker here, with the same defaults.
@dataclass(frozen=True)
class ReindexShape:
    function_timeout_seconds: int = 900
    function_memory_mb: int = 256
    # The worker stops taking pages with this much of its timeout left and returns its cursor
    # (a page at the rate bound takes at most about a second, plus its publishes).
    stop_at_remaining_ms: int = 60_000
    # Records per second per segment, and segments, unless the run says otherwise. The total
    # rate is segments x rate: 400 records/s by default, a small share of an on-demand
    # table's capacity, so live ingest is never starved.
    default_rate: float = 50.0
    default_segments: int = 8
    # The highest rate a run may ask for, per segment (the worker, `vhs reindex --rate` and the
    # state machine's plan all refuse more): at most max_concurrency x max_rate records/s in
    # all, 16,000/s, which a provisioned table must be sized for before such a run.
    max_rate: float = 1000.0
    # Scan's TotalSegments: the worker's bound (and the state machine's, whose plan lists them).
    max_segments: int = 1000
    # The id list an execution may name, in bytes of JSON: the execution's input is at most
    # 256 KiB, and the plan's output (the ids, split into one share per segment) must fit too.
    max_ids_bytes: int = 200 * 1024
    # Scan's Limit: items a page. At most 1 s of the default rate, so a page never bursts.
    page_size: int = 50
    # Segments replayed at once by the state machine's Map (its MaxConcurrency): the total
    # rate bound is min(segments, max_concurrency) x rate.
    max_concurrency: int = 16
    # A whole run is given up (and alarms) after this long; redrive it to go on.
    execution_timeout_hours: int = 48

    def __post_init__(self) -> None:
        _require("reindex", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield 128 <= self.function_memory_mb <= 10_240, "function memory must be 128..10240 MB"
        yield (
            0 < self.stop_at_remaining_ms < self.function_timeout_seconds * 1000,
            "the cut-off must be shorter than the function timeout",
        )
        yield 0 < self.default_rate <= self.max_rate, "the rate must be 0 < rate <= max_rate"
        yield 1 <= self.max_segments <= 1000, "Scan takes at most 1,000 segments"
        yield 1 <= self.default_segments <= self.max_segments, "segments must be 1..max_segments"
        yield 0 < self.max_ids_bytes < 256 * 1024, "the id list must fit in 256 KiB"
        yield 1 <= self.page_size <= 1000, "the page size must be 1..1000"
        yield 1 <= self.max_concurrency <= 1000, "max concurrency must be 1..1000"
        yield 1 <= self.execution_timeout_hours <= 24 * 365, "execution timeout: 1 h..1 year"


REINDEX = ReindexShape()


# --- Garbage collection: a scheduled Lambda (docs/gc.md) ----------------------------------------
# The Maintenance stack (infra/gc.py) runs handlers.gc on an EventBridge schedule. The handler
# stops taking shards with 120 s left and hands the rest on to a fresh invocation of itself, so
# the timeout bounds one invocation, not a collection.
def _is_duration(text: str) -> bool:
    """What handlers.gc (vhs.maintenance.gc.parse_duration) reads from VHS_GC_GRACE: seconds, or
    90s / 30m / 1h / 2d; not negative."""
    number = text[:-1] if text[-1:] in ("s", "m", "h", "d") else text
    digits = number.replace(".", "", 1)
    return digits.isascii() and digits.isdigit()


@dataclass(frozen=True)
class GcShape:
    function_timeout_seconds: int = 900
    function_memory_mb: int = 512
    # EventBridge schedule expression of the collection run.
    schedule_expression: str = "rate(1 day)"
    # The scheduled event is {"parallel": N}: the 256 shards are split over N invocations.
    parallel: int = 8
    # VHS_GC_GRACE: objects younger than this are not judged (docs/gc.md).
    grace: str = "1h"

    def __post_init__(self) -> None:
        _require("GC", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield 128 <= self.function_memory_mb <= 10_240, "function memory must be 128..10240 MB"
        yield (
            self.schedule_expression.startswith(("rate(", "cron("))
            and self.schedule_expression.endswith(")"),
            "schedule must be an EventBridge rate(...) or cron(...) expression",
        )
        yield 1 <= self.parallel <= 256, "parallel must be 1..256 (there are 256 shards)"
        yield _is_duration(self.grace), "grace must be a duration such as 90s, 30m, 1h or 2d"


GC = GcShape()


# --- The read API: a Lambda function URL with IAM auth (docs/read-api.md) ------------------------
# Lambda's response payload limit for a function URL (buffered responses): 6 MB, counted on the
# JSON response the function returns, in which a binary body travels base64-encoded.
LAMBDA_RESPONSE_PAYLOAD_BYTES = 6 * 1024 * 1024


@dataclass(frozen=True)
class ReadApiShape:
    # A read is one GetItem and at most one S3 GET of a body under the response limit: seconds,
    # not minutes. 512 MB holds a 4.5 MB body with its base64 copy, with CPU to spare for
    # routing (benchmarks/read_api.py prices reads at this size).
    function_timeout_seconds: int = 10
    function_memory_mb: int = 512
    # How long a presigned URL for a body too large for the response stays valid.
    presign_seconds: int = 60
    # Alarms: the share of requests answered 5xx over one period, and the p99 latency over
    # `latency_evaluation_periods` periods in a row (one slow minute is not an incident).
    error_rate_percent: float = 1.0
    latency_p99_ms: int = 1000
    latency_evaluation_periods: int = 3
    period_seconds: int = 300

    def __post_init__(self) -> None:
        _require("read API", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield 128 <= self.function_memory_mb <= 10_240, "function memory must be 128..10240 MB"
        # SigV4 presigned URLs may live up to 7 days; a redirect needs seconds.
        yield 1 <= self.presign_seconds <= 3600, "presign_seconds must be 1..3600"
        yield 0 < self.error_rate_percent <= 100, "error_rate_percent must be in (0, 100]"
        yield self.latency_p99_ms >= 1, "latency_p99_ms must be positive"
        yield self.latency_evaluation_periods >= 1, "latency_evaluation_periods must be >= 1"
        yield self.period_seconds % 60 == 0, "period_seconds must be a multiple of 60"


READ_API = ReadApiShape()


# --- Bulk import: a Step Functions Distributed Map over chunks of files (docs/import.md) ------
# Where import files and results live when no bucket of their own is given: prefixes of the
# staging bucket beside the producers' (incoming/), which ingest never reads. The staging
# bucket's lifecycle expires them too (STAGING_EXPIRATION_DAYS): see docs/import.md.
IMPORT_PREFIX = "imports/"
IMPORT_RESULTS_PREFIX = "import-results/"


@dataclass(frozen=True)
class BulkImportShape:
    # One function plans (reads every file once, to cut it into chunks of whole lines) and
    # imports chunks: the plan of a large export needs the longest timeout.
    function_timeout_seconds: int = 900
    # 1,769 MB is one full vCPU: JSON parsing and hashing are CPU, the writes are waits.
    function_memory_mb: int = 1769
    # Lines a chunk holds: the unit of coalescing, of a worker's report and of a redrive.
    chunk_lines: int = 2000
    # Chunks one invocation imports (the Distributed Map's ItemBatcher).
    max_items_per_batch: int = 1
    # Invocations at once (the Distributed Map's MaxConcurrency): each writes `write_workers`
    # lines at a time, so the table sees up to their product in flight.
    max_concurrency: int = 40
    write_workers: int = 16
    # Chunks that may fail (after their retries) before the Map Run fails; 0: any.
    tolerated_failure_percentage: float = 0
    # The state machine's own timeout.
    execution_timeout_hours: int = 24

    def __post_init__(self) -> None:
        _require("bulk import", self._checks())

    def _checks(self) -> Iterator[tuple[bool, str]]:
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield 128 <= self.function_memory_mb <= 10_240, "function memory must be 128..10240 MB"
        yield 1 <= self.chunk_lines <= 100_000, "chunk_lines must be 1..100000"
        yield 1 <= self.max_items_per_batch <= 100, "max_items_per_batch must be 1..100"
        # Distributed Map runs at most 10,000 child executions at once.
        yield 1 <= self.max_concurrency <= 10_000, "max_concurrency must be 1..10000"
        yield 1 <= self.write_workers <= 256, "write_workers must be 1..256"
        yield 0 <= self.tolerated_failure_percentage <= 100, "tolerated failure must be 0..100 %"
        yield 1 <= self.execution_timeout_hours <= 24 * 365, "execution timeout must be 1 h..1 y"


BULK_IMPORT = BulkImportShape()
