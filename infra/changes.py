"""The change feed: the index table's stream, a function, and an SNS FIFO topic of notifications.

One notification per stored version and per delete (docs/changes.md). The function reads the
table's DynamoDB stream through an event source mapping with the settings of
`vhs.resources.CHANGES` (the ones the local stream poller emulates): from TRIM_HORIZON,
ReportBatchItemFailures, bisection on a function error, bounded retries and record age, and an
on-failure destination of its own, an SQS queue, encrypted and TLS-only.

The topic is FIFO (the message group is the record id, so notifications of an id keep their
order, and deduplication ids drop a retried notification), encrypted with a customer managed
KMS key and TLS-only. The function is the ingest function's twin in packaging (same asset,
runtime, architecture and Powertools layer, from infra/ingest.py) with a role of its own,
written out statement by statement: read this one stream, publish to this one topic (and use
its key), send to this one dead-letter queue, write its own logs.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vhs import resources

from . import nag
from .config import VhsConfig
from .ingest import (
    _RETENTION,
    metrics_namespace,
    vhs_function,
)
from .monitoring import TOPIC_KEY_ACTIONS, dead_letter_metric, notifying_alarm

CHANGES_HANDLER = "handlers.changes.handler"
SERVICE_NAME = "vhs-changes"
# Lambda's event source for a DynamoDB stream needs these four on the stream (the policy
# AWS documents for a function that processes a table's stream, scoped to the one stream).
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)


def change_topic_name(config: VhsConfig) -> str:
    """A fixed name, so subscribers can rely on the ARN across redeployments."""
    return f"vhs-{config.stage}-changes.fifo"


class ChangeFeed(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        bucket: s3.IBucket,
        table_stream_arn: str,
        alarm_topic: sns.ITopic | None = None,
        shape: resources.ChangeFeedShape = resources.CHANGES,
    ) -> None:
        super().__init__(scope, id)
        self.shape = shape

        # What the event source gives up on: Lambda's on-failure records (the shard and the
        # range of sequence numbers; `vhs.changes.feed.replay` publishes them again).
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.seconds(shape.dlq_retention_seconds),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )

        self.topic_key = kms.Key(
            self,
            "TopicKey",
            description=f"Encrypts the VHS {config.stage} change feed topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            topic_name=change_topic_name(config),
            display_name=f"VHS {config.stage} changes",
            fifo=True,
            content_based_deduplication=False,  # the publisher sets deduplication ids
            # Deduplication and throughput per message group (record id): the ids are
            # digests of (id, version, ...), so nothing needs topic-wide deduplication.
            fifo_throughput_scope=sns.FifoThroughputScope.MESSAGE_GROUP,
            master_key=self.topic_key,
            enforce_ssl=True,
        )

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=_RETENTION[config.log_retention_days],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"VHS {config.stage} change feed function: read the stream, publish",
        )
        for statement in (
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
            iam.PolicyStatement(
                sid="ReadTheTableStream",
                actions=list(STREAM_READ_ACTIONS),
                resources=[table_stream_arn],
            ),
            iam.PolicyStatement(
                sid="PublishChanges",
                actions=["sns:Publish"],  # also authorizes PublishBatch
                resources=[self.topic.topic_arn],
            ),
            iam.PolicyStatement(
                sid="EncryptChanges",
                actions=list(TOPIC_KEY_ACTIONS),
                resources=[self.topic_key.key_arn],
            ),
            iam.PolicyStatement(
                sid="DeadLetterFailedBatches",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue_arn],
            ),
        ):
            self.role.add_to_principal_policy(statement)

        environment = {
            "VHS_CHANGE_TOPIC_ARN": self.topic.topic_arn,
            "VHS_BUCKET_NAME": bucket.bucket_name,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace(config),
            "LOG_LEVEL": config.log_level,
            "VHS_CHANGES_STOP_AT_REMAINING_MS": str(shape.stop_publishing_at_remaining_ms),
        }
        if config.body_prefix:
            environment["VHS_PREFIX"] = config.body_prefix

        self.function = vhs_function(
            self,
            config,
            handler=CHANGES_HANDLER,
            description=f"VHS {config.stage}: publishes a notification per version and delete",
            timeout_seconds=shape.function_timeout_seconds,
            memory_mb=shape.function_memory_mb,
            log_group=self.log_group,
            role=self.role,
            environment=environment,
        )

        self.event_source = lambda_.EventSourceMapping(
            self,
            "StreamSource",
            target=self.function,
            event_source_arn=table_stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=shape.batch_size,
            max_batching_window=cdk.Duration.seconds(shape.max_batching_window_seconds),
            report_batch_item_failures=True,
            bisect_batch_on_error=True,
            retry_attempts=shape.retry_attempts,
            max_record_age=cdk.Duration.seconds(shape.max_record_age_seconds),
            parallelization_factor=shape.parallelization_factor,
        )
        # The on-failure destination, written as CloudFormation has it: `on_failure=SqsDlq(...)`
        # would also grant sqs:GetQueueAttributes and sqs:GetQueueUrl, which Lambda does not
        # need to send an on-failure record.
        mapping = self.event_source.node.default_child
        if not isinstance(mapping, lambda_.CfnEventSourceMapping):
            raise TypeError(f"expected the event source mapping's L1 resource, got {mapping!r}")
        mapping.add_property_override(
            "DestinationConfig.OnFailure.Destination", self.dead_letters.queue_arn
        )
        # Lambda checks the role's permissions when the mapping is created.
        self.event_source.node.add_dependency(self.role)
        nag.skip_checkov(
            self.function,
            "CKV_AWS_116",
            "A function DLQ catches failed asynchronous invocations; this function is invoked "
            "synchronously by the stream's event source mapping, whose on-failure destination "
            "is the change feed's own dead-letter queue.",
        )

        nag.acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the stream event source mapping's on-failure "
            "destination (DestinationConfig.OnFailure), which cdk-nag does not recognise "
            "(it knows only RedrivePolicy targets). Nothing consumes it with a redrive policy "
            "that could need a DLQ of its own.",
        )
        nag.acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Tracing.ACTIVE adds xray:PutTraceSegments and xray:PutTelemetryRecords, which "
            "support no resource-level permissions: AWS requires Resource '*' for them.",
            finding="Resource::*",
        )

        self.alarms: list[cloudwatch.Alarm] = []
        if alarm_topic is not None:
            self.alarms = self._alarms(config, actions.SnsAction(alarm_topic))

    def _alarms(self, config: VhsConfig, action: cloudwatch.IAlarmAction) -> list[cloudwatch.Alarm]:
        thresholds = config.alarms
        period = cdk.Duration.seconds(thresholds.period_seconds)
        dlq = resources.DLQ_ALARM
        self.dead_letter_alarm = notifying_alarm(
            self,
            "ChangeDeadLetters",
            name=config.prefix,
            action=action,
            metric=dead_letter_metric(self.dead_letters),
            description=(
                "The change feed gave up on a range of the table's stream: those versions "
                "were not notified. Fix the cause, then replay each message's range with "
                "vhs.changes.feed.replay within 24 hours of the writes (docs/changes.md)."
            ),
            threshold=dlq.threshold,
            evaluation_periods=dlq.evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        self.errors_alarm = notifying_alarm(
            self,
            "ChangeFunctionErrors",
            name=config.prefix,
            action=action,
            metric=self.function.metric_errors(period=period, statistic="Sum"),
            description=(
                "The change feed function failed whole batches: it could not publish the "
                "first change of a batch (SNS or KMS refused it after retries), or crashed."
            ),
            threshold=thresholds.function_errors,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        self.iterator_age_alarm = notifying_alarm(
            self,
            "ChangeIteratorAge",
            name=config.prefix,
            action=action,
            metric=self.function.metric(
                "IteratorAge", period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
            description=(
                f"The change feed is over {self.shape.iterator_age_alarm_seconds} s behind "
                "the table: it is failing or throttled, and stream records expire after 24 h."
            ),
            threshold=self.shape.iterator_age_alarm_seconds * 1000,  # IteratorAge is in ms
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        return [self.dead_letter_alarm, self.errors_alarm, self.iterator_age_alarm]
