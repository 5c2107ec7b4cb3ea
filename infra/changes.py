"""The change feed: the index table's stream, a function, and an SNS FIFO topic of notifications.

One notification per stored version and per delete (docs/changes.md). The function reads the
table's DynamoDB stream through an event source mapping with the settings of
`vhs.shapes.CHANGES` (the ones the local stream poller emulates): from TRIM_HORIZON,
ReportBatchItemFailures, bisection on a function error, bounded retries and record age, and an
on-failure destination of its own, an SQS queue, encrypted and TLS-only.

The topic is FIFO (the message group is the record id, so notifications of an id keep their
order, and deduplication ids drop a retried notification), encrypted with a customer managed
KMS key and TLS-only. The function is a `VhsFunction` (infra/function.py), packaged like the
ingest function, with a role of its own, written out statement by statement: read this one
stream (and ListStreams, which takes no resource), publish to this one topic (and use its
key), send to this one dead-letter queue, write its own logs.
"""

from __future__ import annotations

from typing import Unpack

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .feature import Feature, Wiring
from .function import allow
from .monitoring import TOPIC_KEY_ACTIONS, Alarms, topic_key
from .store import acknowledge_dictionary_reads, dictionary_arn

# Lambda's event source for a DynamoDB stream needs these three on the stream (the policy
# AWS documents for a function that processes a table's stream, scoped to the one stream)...
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
)
# ... and ListStreams, which lists an account's streams and has no resource type: IAM matches
# it against Resource "*" only, so a grant on the stream ARN matched no request. Lambda checks
# all four when it creates the mapping ("ensure the role can perform the GetRecords,
# GetShardIterator, DescribeStream, and ListStreams Actions on your stream").
STREAM_LIST_ACTIONS = ("dynamodb:ListStreams",)
STREAM_LIST_REASON = (
    "dynamodb:ListStreams has no resource-level permissions (AWS requires Resource '*'): "
    "Lambda's DynamoDB stream event source checks that the role may call it; it lists "
    "stream ARNs and labels only, and reads no record."
)


class ChangeFeed(Feature):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        table_stream_arn: str,
        shape: shapes.ChangeFeedShape = shapes.CHANGES,
        **wiring: Unpack[Wiring],
    ) -> None:
        super().__init__(scope, id, **wiring)
        self.dead_letters = self._dead_letter_queue(shape)
        self.topic_key = topic_key(self, f"Encrypts the VHS {self.config.stage} change feed topic")
        self.topic = self._topic()
        self._function(bucket, table_stream_arn, shape)
        self.event_source = self._stream_source(table_stream_arn, shape)
        self.add_alarms(self._alarms)

    def _dead_letter_queue(self, shape: shapes.ChangeFeedShape) -> sqs.Queue:
        """What the event source gives up on: Lambda's on-failure records (the shard and the
        range of sequence numbers; `vhs.changes.publish.replay` publishes them again)."""
        return sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.seconds(shape.dlq_retention_seconds),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )

    def _topic(self) -> sns.Topic:
        config = self.config
        return sns.Topic(
            self,
            "Topic",
            # A fixed name, so subscribers can rely on the ARN across redeployments.
            topic_name=config.physical_name("changes.fifo"),
            display_name=f"VHS {config.stage} changes",
            fifo=True,
            content_based_deduplication=False,  # the publisher sets deduplication ids
            # Deduplication and throughput per message group (record id): the ids are
            # digests of (id, version, ...), so nothing needs topic-wide deduplication.
            fifo_throughput_scope=sns.FifoThroughputScope.MESSAGE_GROUP,
            master_key=self.topic_key,
            enforce_ssl=True,
        )

    def _function(
        self, bucket: s3.IBucket, table_stream_arn: str, shape: shapes.ChangeFeedShape
    ) -> None:
        config = self.config
        dictionaries = dictionary_arn(bucket, config.body_prefix)
        self.add_function(
            settings.CHANGES_FUNCTION,
            does="publishes a notification per version and delete",
            role="change feed function: read the stream, publish",
            statements=[
                allow("ReadTheTableStream", STREAM_READ_ACTIONS, [table_stream_arn]),
                allow("ListTableStreams", STREAM_LIST_ACTIONS, ["*"]),
                # sns:Publish also authorizes PublishBatch.
                allow("PublishChanges", ["sns:Publish"], [self.topic.topic_arn]),
                allow("EncryptChanges", TOPIC_KEY_ACTIONS, [self.topic_key.key_arn]),
                allow(
                    "DeadLetterFailedBatches", ["sqs:SendMessage"], [self.dead_letters.queue_arn]
                ),
                # A patch of a body packed with a zstd dictionary needs that dictionary.
                allow("ReadDictionaries", ["s3:GetObject"], [dictionaries]),
            ],
            environment=settings.changes_environment(
                topic_arn=self.topic.topic_arn,
                bucket_name=bucket.bucket_name,
                prefix=config.body_prefix,
                stop_at_remaining_ms=shape.stop_publishing_at_remaining_ms,
            ),
            shape=shape,
            unscoped_reason=STREAM_LIST_REASON,
            no_dlq_reason=(
                "A function DLQ catches failed asynchronous invocations; this function is "
                "invoked synchronously by the stream's event source mapping, whose on-failure "
                "destination is the change feed's own dead-letter queue."
            ),
        )

        acknowledge_dictionary_reads(self.role, dictionaries)

    def _stream_source(
        self, table_stream_arn: str, shape: shapes.ChangeFeedShape
    ) -> lambda_.EventSourceMapping:
        """The mapping from the table's stream to the function, failing over to the
        dead-letter queue."""
        event_source = lambda_.EventSourceMapping(
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
        mapping = event_source.node.default_child
        if not isinstance(mapping, lambda_.CfnEventSourceMapping):
            raise TypeError(f"expected the event source mapping's L1 resource, got {mapping!r}")
        mapping.add_property_override(
            "DestinationConfig.OnFailure.Destination", self.dead_letters.queue_arn
        )
        # Lambda checks the role's permissions when the mapping is created.
        event_source.node.add_dependency(self.role)
        nag.acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the stream event source mapping's on-failure "
            "destination (DestinationConfig.OnFailure), which cdk-nag does not recognise "
            "(it knows only RedrivePolicy targets). Nothing consumes it with a redrive policy "
            "that could need a DLQ of its own.",
        )
        return event_source

    def _alarms(self, alarms: Alarms) -> list[cloudwatch.Alarm]:
        self.dead_letter_alarm = alarms.dead_letters(
            "ChangeDeadLetters",
            self.dead_letters,
            "The change feed gave up on a range of the table's stream: those versions "
            "were not notified. Fix the cause, then replay each message's range with "
            "vhs.changes.publish.replay within 24 hours of the writes (docs/changes.md).",
        )
        self.errors_alarm = alarms.function_errors(
            "ChangeFunctionErrors",
            self.function,
            "The change feed function failed whole batches: it could not publish the "
            "first change of a batch (SNS or KMS refused it after retries), or crashed.",
        )
        self.iterator_age_alarm = alarms.alarm(
            "ChangeIteratorAge",
            self.function.metric(
                "IteratorAge", period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
            f"The change feed is over {self.shape.iterator_age_alarm_seconds} s behind "
            "the table: it is failing or throttled, and stream records expire after 24 h.",
            threshold=self.shape.iterator_age_alarm_seconds * 1000,  # IteratorAge is in ms
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        return [self.dead_letter_alarm, self.errors_alarm, self.iterator_age_alarm]
