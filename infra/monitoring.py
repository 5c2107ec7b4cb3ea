"""Monitoring: the alarm topic, the alarms and the pipeline dashboard.

Every alarm sends both its ALARM and its OK notification to one SNS topic, so whoever is
paged also hears when it is over. Thresholds come from `infra.shapes.ALARMS` (overridable
through VhsConfig); the dead-letter alarm is `vhs.shapes.DLQ_ALARM`, the definition the
local stack's alarm evaluator uses. The first dead letter alarms at once: a message in the
DLQ is a record that was not stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vhs import settings, shapes

from .config import VhsConfig
from .function import metrics_namespace

# The DynamoDB operations the store calls (vhs/index/table.py); their throttles are alarmed.
STORE_OPERATIONS = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
)
# Counts the ingest handler emits with Powertools Metrics (handlers/ingest.py).
INGEST_OUTCOMES = ("stored", "unchanged", "stale", "deleted", "invalid", "retried")
# What publishing to a topic encrypted with a customer managed key takes: SNS asks KMS for a
# data key on the publisher's behalf. GenerateDataKey exactly: no wildcard on KMS actions.
TOPIC_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


def comparison(api_name: str) -> cloudwatch.ComparisonOperator:
    """The CDK operator for a CloudWatch API name such as GreaterThanOrEqualToThreshold."""
    return getattr(cloudwatch.ComparisonOperator, re.sub(r"(?<!^)(?=[A-Z])", "_", api_name).upper())


def topic_key(scope: Construct, description: str) -> kms.Key:
    """The customer managed key of a VHS topic ("TopicKey"): rotated, and deleted with its
    stateless stack after the shortest waiting period."""
    return kms.Key(
        scope,
        "TopicKey",
        description=description,
        enable_key_rotation=True,
        removal_policy=cdk.RemovalPolicy.DESTROY,
        pending_window=cdk.Duration.days(7),
    )


def dead_letter_metric(dead_letters: sqs.IQueue) -> cloudwatch.Metric:
    """The metric of `shapes.DLQ_ALARM` (the local stack's alarm evaluator uses it too)."""
    dlq = shapes.DLQ_ALARM
    return cloudwatch.Metric(
        namespace=dlq.namespace,
        metric_name=dlq.metric_name,
        dimensions_map={"QueueName": dead_letters.queue_name},
        statistic=dlq.statistic,
        period=cdk.Duration.seconds(dlq.period_seconds),
    )


@dataclass(frozen=True)
class Alarms:
    """How every VHS alarm is made (ingest's, the change feed's and the collector's): in
    `scope`, named ``{config.prefix}-{id}``, sending both ALARM and OK to `action`, with
    missing data not breaching."""

    scope: Construct
    config: VhsConfig
    action: cloudwatch.IAlarmAction

    def alarm(
        self,
        id: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float,
        evaluation_periods: int = 1,
        comparison_operator: cloudwatch.ComparisonOperator = AT_LEAST,
    ) -> cloudwatch.Alarm:
        """An alarm on `metric`; by default it fires when one period reaches `threshold`."""
        created = cloudwatch.Alarm(
            self.scope,
            id,
            alarm_name=f"{self.config.prefix}-{id}",
            alarm_description=description,
            metric=metric,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=comparison_operator,
        )
        created.add_alarm_action(self.action)
        created.add_ok_action(self.action)
        return created

    def dead_letters(self, id: str, queue: sqs.IQueue, description: str) -> cloudwatch.Alarm:
        """`shapes.DLQ_ALARM` on `queue`: the shape the local stack's alarm evaluator uses
        too. The first dead letter alarms at once."""
        dlq = shapes.DLQ_ALARM
        return self.alarm(
            id,
            dead_letter_metric(queue),
            description,
            threshold=dlq.threshold,
            evaluation_periods=dlq.evaluation_periods,
            comparison_operator=comparison(dlq.comparison_operator),
        )

    def function_errors(
        self, id: str, function: lambda_.IFunction, description: str
    ) -> cloudwatch.Alarm:
        """Failed invocations of `function` (the Errors sum of one alarm period reaches
        `alarms.function_errors`): every VHS function has this alarm."""
        thresholds = self.config.alarms
        return self.alarm(
            id,
            function.metric_errors(
                period=cdk.Duration.seconds(thresholds.period_seconds), statistic="Sum"
            ),
            description,
            threshold=thresholds.function_errors,
        )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        queue: sqs.IQueue,
        dead_letters: sqs.IQueue,
        function: lambda_.IFunction,
        table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, id)
        self.topic_key, self.topic = self._alarm_topic(config)
        self.alarms = self._ingest_alarms(config, queue, dead_letters, function, table)
        self.dashboard = self._dashboard(config, queue, function, table)

    def _alarm_topic(self, config: VhsConfig) -> tuple[kms.Key, sns.Topic]:
        """The topic the alarms publish to (and its key), with the alarm e-mail subscribed."""
        stack = cdk.Stack.of(self)
        # SNS encrypts with a customer managed key: CloudWatch cannot publish to a topic
        # encrypted with the AWS managed aws/sns key, because that key's policy cannot be
        # changed to let CloudWatch use it.
        key = topic_key(self, f"Encrypts the VHS {config.stage} alarm topic")
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=list(TOPIC_KEY_ACTIONS),
                resources=["*"],  # in a key policy, "*" is this key
                # Only for this account's alarms: the service principal is every account's.
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"VHS {config.stage} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        if config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        return key, topic

    def _ingest_alarms(
        self,
        config: VhsConfig,
        queue: sqs.IQueue,
        dead_letters: sqs.IQueue,
        function: lambda_.IFunction,
        table: dynamodb.ITable,
    ) -> list[cloudwatch.Alarm]:
        thresholds = config.alarms
        alarms = Alarms(self, config, actions.SnsAction(self.topic))
        period = cdk.Duration.seconds(thresholds.period_seconds)
        self.dead_letter_alarm = alarms.dead_letters(
            "DeadLetters",
            dead_letters,
            "Messages are in the ingest dead-letter queue: records that were not stored. "
            "Read their vhs-error-* attributes, fix the cause, then redrive.",
        )
        self.errors_alarm = alarms.function_errors(
            "FunctionErrors",
            function,
            "The ingest function failed whole invocations (crash, timeout or configuration).",
        )
        self.throttles_alarm = alarms.alarm(
            "FunctionThrottles",
            function.metric_throttles(period=period, statistic="Sum"),
            "The ingest function was throttled: check the account's concurrency.",
            threshold=thresholds.function_throttles,
        )
        self.age_alarm = alarms.alarm(
            "QueueAge",
            queue.metric_approximate_age_of_oldest_message(
                period=cdk.Duration.seconds(thresholds.oldest_message_period_seconds),
                statistic="Maximum",
            ),
            f"The oldest ingest message waited over {thresholds.oldest_message_age_seconds} s: "
            "ingest is falling behind or stopped.",
            threshold=thresholds.oldest_message_age_seconds,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self.dynamodb_alarm = alarms.alarm(
            "TableThrottles",
            table.metric_throttled_requests_for_operations(
                operations=list(STORE_OPERATIONS), period=period
            ),
            "DynamoDB throttled requests to the index table.",
            threshold=thresholds.dynamodb_throttled_requests,
        )
        return [
            self.dead_letter_alarm,
            self.errors_alarm,
            self.throttles_alarm,
            self.age_alarm,
            self.dynamodb_alarm,
        ]

    def _dashboard(
        self,
        config: VhsConfig,
        queue: sqs.IQueue,
        function: lambda_.IFunction,
        table: dynamodb.ITable,
    ) -> cloudwatch.Dashboard:
        """The pipeline on one page, a row at a time: what it is and its alarms; the queue;
        the function; the outcomes and the table."""
        dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{config.prefix}-pipeline",
            default_interval=cdk.Duration.hours(3),
        )
        dashboard.add_widgets(*self._overview_row(config))
        dashboard.add_widgets(*self._queue_row(queue))
        dashboard.add_widgets(*self._function_row(config, function))
        dashboard.add_widgets(*self._outcome_row(config, table))
        return dashboard

    def _overview_row(self, config: VhsConfig) -> list[cloudwatch.IWidget]:
        """The stage, the pipeline's shape, and the alarms' state."""
        return [
            cloudwatch.TextWidget(
                markdown=(
                    f"# VHS {config.stage}\n"
                    "producers -> **ingest queue** -> **ingest function** -> "
                    "S3 bodies + DynamoDB index; invalid or failing messages -> **DLQ**"
                ),
                width=12,
                height=3,
            ),
            cloudwatch.AlarmStatusWidget(alarms=self.alarms, width=12, height=3),
        ]

    def _queue_row(self, queue: sqs.IQueue) -> list[cloudwatch.IWidget]:
        """The ingest queue: its traffic, its oldest message, its dead letters."""
        minute = cdk.Duration.minutes(1)
        return [
            cloudwatch.GraphWidget(
                title="Ingest queue",
                left=[
                    queue.metric_number_of_messages_sent(period=minute, statistic="Sum"),
                    queue.metric_approximate_number_of_messages_visible(
                        period=minute, statistic="Maximum"
                    ),
                    queue.metric_approximate_number_of_messages_not_visible(
                        period=minute, statistic="Maximum"
                    ),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Oldest message age (s)",
                left=[self.age_alarm.metric],
                left_annotations=[self.age_alarm.to_annotation()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Dead letters",
                left=[self.dead_letter_alarm.metric],
                left_annotations=[self.dead_letter_alarm.to_annotation()],
                width=8,
            ),
        ]

    def _function_row(
        self, config: VhsConfig, function: lambda_.IFunction
    ) -> list[cloudwatch.IWidget]:
        """The ingest function: invocations, duration, concurrency."""
        minute = cdk.Duration.minutes(1)
        return [
            cloudwatch.GraphWidget(
                title="Ingest function",
                left=[
                    function.metric_invocations(period=minute, statistic="Sum"),
                    function.metric_errors(period=minute, statistic="Sum"),
                    function.metric_throttles(period=minute, statistic="Sum"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Function duration (ms)",
                left=[
                    function.metric_duration(period=minute, statistic=statistic, label=statistic)
                    for statistic in ("p50", "p99", "Maximum")
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Concurrent executions",
                left=[function.metric("ConcurrentExecutions", period=minute, statistic="Maximum")],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=config.ingest.max_concurrency, label="event source maximum"
                    )
                ],
                width=8,
            ),
        ]

    def _outcome_row(self, config: VhsConfig, table: dynamodb.ITable) -> list[cloudwatch.IWidget]:
        """Messages by outcome, and the index table's capacity."""
        minute = cdk.Duration.minutes(1)
        outcome_metrics = [
            cloudwatch.Metric(
                namespace=metrics_namespace(config),
                metric_name=outcome,
                dimensions_map={"service": settings.INGEST_FUNCTION.service},
                statistic="Sum",
                period=minute,
                label=outcome,
            )
            for outcome in INGEST_OUTCOMES
        ]
        return [
            cloudwatch.GraphWidget(
                title="Messages by outcome", left=outcome_metrics, stacked=True, width=12
            ),
            cloudwatch.GraphWidget(
                title="Index table",
                left=[
                    table.metric_consumed_read_capacity_units(period=minute, statistic="Sum"),
                    table.metric_consumed_write_capacity_units(period=minute, statistic="Sum"),
                ],
                right=[self.dynamodb_alarm.metric],
                width=12,
            ),
        ]
