"""The VHS stacks: Store (stateful), Ingest, Changes and Maintenance (stateless).

* ``Vhs-<stage>-Store`` (stateful): the body bucket, the index table, the staging bucket and
  the access-log bucket. Everything in it is RETAIN, so deleting the stack keeps the data.
* ``Vhs-<stage>-Ingest`` (stateless): the queues, the function, its event source, and the
  monitoring of all of it (alarm topic, alarms, dashboard). Delete and redeploy it freely.
* ``Vhs-<stage>-Changes`` (stateless): the change feed (infra/changes.py): the function on
  the table's stream, its SNS FIFO topic and dead-letter queue, and its alarms, which go to
  the Ingest stack's alarm topic. It can be deployed, paused or removed without touching
  ingest; while it is gone the stream keeps 24 hours of changes for it.
* ``Vhs-<stage>-Maintenance`` (stateless): the garbage collector (infra/gc.py): its function,
  the EventBridge rule that runs it on a schedule, and its alarm, which goes to the Ingest
  stack's alarm topic. A stack of its own rather than a part of Ingest or Changes: the
  collector shares no resource with either (it names the Store's bucket and table, as they
  do), it can be paused or removed without touching the pipeline, and the Ingest and Changes
  templates stay exactly as they are.

The Ingest stack refers to the Store's resources by their physical names (see
`VhsConfig.table_name` and `VhsConfig.bucket_name`), not by cross-stack references, so
neither stack's template depends on the other's outputs. The Changes stack needs two values
that have no fixed name, the table's stream ARN (its label is the stream's creation time) and
the alarm topic's ARN: the Store and Ingest stacks write them to SSM parameters
(``/vhs/<stage>/table-stream-arn``, ``/vhs/<stage>/alarm-topic-arn``), which CloudFormation
resolves when the Changes stack is deployed. No cross-stack export pins the stateful stack.

Ingest's monitoring lives in the Ingest stack rather than a stack of its own because every
alarm and widget names a queue or the function: they deploy, change and go away together. The
change feed's alarms live in its stack for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from .changes import ChangeFeed
from .config import VhsConfig
from .gc import GarbageCollection
from .ingest import Ingest
from .monitoring import Monitoring
from .store import Store


def _bucket_name(config: VhsConfig, role: str) -> str:
    return config.bucket_name(role, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION)


def _parameter_name(config: VhsConfig, name: str) -> str:
    return f"/vhs/{config.stage}/{name}"


def _parameter(scope: Construct, config: VhsConfig, name: str, value: str, what: str) -> None:
    ssm.StringParameter(
        scope,
        f"Parameter{''.join(part.title() for part in name.split('-'))}",
        parameter_name=_parameter_name(config, name),
        string_value=value,
        description=f"VHS {config.stage}: {what}",
    )


class StoreStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: VhsConfig, **kwargs) -> None:
        super().__init__(
            scope,
            id,
            description=f"VHS {config.stage}: stateful resources (body bucket, index table)",
            **kwargs,
        )
        self.store = Store(
            self,
            "Store",
            table_name=config.table_name,
            bucket_name=_bucket_name(config, "bodies"),
            staging_bucket_name=_bucket_name(config, "staging"),
            access_log_bucket_name=_bucket_name(config, "logs"),
        )
        store = self.store
        for output, value, what in (
            ("TableName", store.table.table_name, "the index table (VHS_TABLE_NAME)"),
            ("TableArn", store.table.table_arn, "the index table's ARN"),
            ("TableStreamArn", store.table.table_stream_arn or "", "the change stream"),
            ("BucketName", store.bucket.bucket_name, "the body bucket (VHS_BUCKET_NAME)"),
            ("BodyPrefix", config.body_prefix or "(none)", "the body key prefix (VHS_PREFIX)"),
            ("StagingBucketName", store.staging.bucket_name, "where producers stage payloads"),
            ("AccessLogBucketName", store.access_logs.bucket_name, "S3 server access logs"),
        ):
            cdk.CfnOutput(self, output, value=value, description=what)
        _parameter(self, config, "table-name", store.table.table_name, "VHS_TABLE_NAME")
        _parameter(self, config, "bucket-name", store.bucket.bucket_name, "VHS_BUCKET_NAME")
        _parameter(self, config, "body-prefix", config.body_prefix or "/", "VHS_PREFIX")
        _parameter(
            self,
            config,
            "table-stream-arn",
            store.table.table_stream_arn or "",
            "the table's stream (the change feed reads it)",
        )


class IngestStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: VhsConfig, **kwargs) -> None:
        super().__init__(
            scope,
            id,
            description=f"VHS {config.stage}: ingest queue, function and monitoring (stateless)",
            **kwargs,
        )
        # The Store stack's resources, by name.
        bucket = s3.Bucket.from_bucket_name(self, "Bodies", _bucket_name(config, "bodies"))
        staging = s3.Bucket.from_bucket_name(self, "Staging", _bucket_name(config, "staging"))
        table = dynamodb.Table.from_table_name(self, "Records", config.table_name)
        self.ingest = Ingest(
            self, "Ingest", config=config, bucket=bucket, staging=staging, table=table
        )
        ingest = self.ingest
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            queue=ingest.queue,
            dead_letters=ingest.dead_letters,
            function=ingest.function,
            table=table,
        )
        for output, value, what in (
            ("QueueUrl", ingest.queue.queue_url, "producers send records here"),
            ("QueueArn", ingest.queue.queue_arn, "the ingest queue's ARN"),
            ("DeadLetterQueueUrl", ingest.dead_letters.queue_url, "records that failed"),
            ("AlarmTopicArn", self.monitoring.topic.topic_arn, "alarm and OK notifications"),
            ("ProducerPolicyArn", ingest.producer_policy.managed_policy_arn, "attach to producers"),
            ("FunctionName", ingest.function.function_name, "the ingest function"),
            ("DashboardName", self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        ):
            cdk.CfnOutput(self, output, value=value, description=what)
        _parameter(self, config, "queue-url", ingest.queue.queue_url, "the ingest queue URL")
        _parameter(self, config, "staging-bucket", staging.bucket_name, "staging bucket")
        _parameter(
            self,
            config,
            "producer-policy-arn",
            ingest.producer_policy.managed_policy_arn,
            "managed policy for producers",
        )
        _parameter(
            self,
            config,
            "alarm-topic-arn",
            self.monitoring.topic.topic_arn,
            "the alarm topic (the change feed's alarms notify it too)",
        )


class ChangesStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: VhsConfig, **kwargs) -> None:
        super().__init__(
            scope,
            id,
            description=f"VHS {config.stage}: change feed (table stream to SNS; stateless)",
            **kwargs,
        )
        bucket = s3.Bucket.from_bucket_name(self, "Bodies", _bucket_name(config, "bodies"))

        def resolved(name: str) -> str:
            # A CloudFormation parameter of type AWS::SSM::Parameter::Value<String>: resolved
            # at deploy time, so neither synth nor the Store stack depends on this stack.
            return ssm.StringParameter.value_for_string_parameter(
                self, _parameter_name(config, name)
            )

        alarm_topic = sns.Topic.from_topic_arn(self, "AlarmTopic", resolved("alarm-topic-arn"))
        self.changes = ChangeFeed(
            self,
            "ChangeFeed",
            config=config,
            bucket=bucket,
            table_stream_arn=resolved("table-stream-arn"),
            alarm_topic=alarm_topic,
        )
        changes = self.changes
        for output, value, what in (
            ("ChangeTopicArn", changes.topic.topic_arn, "subscribe here: one message per version"),
            ("ChangeDeadLetterQueueUrl", changes.dead_letters.queue_url, "stream ranges given up"),
            ("ChangeFunctionName", changes.function.function_name, "the change feed function"),
        ):
            cdk.CfnOutput(self, output, value=value, description=what)
        _parameter(
            self, config, "change-topic-arn", changes.topic.topic_arn, "the change feed topic"
        )


class MaintenanceStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: VhsConfig, **kwargs) -> None:
        super().__init__(
            scope,
            id,
            description=f"VHS {config.stage}: scheduled garbage collection (stateless)",
            **kwargs,
        )
        # The Store stack's resources, by name; the alarm topic through SSM, as for Changes.
        bucket = s3.Bucket.from_bucket_name(self, "Bodies", _bucket_name(config, "bodies"))
        table = dynamodb.Table.from_table_name(self, "Records", config.table_name)
        alarm_topic = sns.Topic.from_topic_arn(
            self,
            "AlarmTopic",
            ssm.StringParameter.value_for_string_parameter(
                self, _parameter_name(config, "alarm-topic-arn")
            ),
        )
        self.gc = GarbageCollection(
            self,
            "GarbageCollection",
            config=config,
            bucket=bucket,
            table=table,
            alarm_topic=alarm_topic,
        )
        for output, value, what in (
            ("GcFunctionName", self.gc.function.function_name, "the garbage collector"),
            ("GcRuleName", self.gc.rule.rule_name, "its schedule (disable it to pause GC)"),
        ):
            cdk.CfnOutput(self, output, value=value, description=what)


@dataclass(frozen=True)
class VhsStacks:
    config: VhsConfig
    store: StoreStack
    ingest: IngestStack
    changes: ChangesStack
    maintenance: MaintenanceStack


def build(
    app: cdk.App,
    config: VhsConfig | None = None,
    *,
    bootstrap_version_rule: bool = True,
    nag: bool = True,
) -> VhsStacks:
    """Add a VHS deployment to ``app``: the stacks, their tags and the cdk-nag checks.

    ``config`` defaults to the app's context. ``bootstrap_version_rule=False`` is for tests:
    moto's CloudFormation has no bootstrap stack to check. ``nag=False`` skips cdk-nag.
    """
    config = config or VhsConfig.from_context(app.node.try_get_context)

    def synth() -> cdk.IStackSynthesizer | None:
        # One synthesizer per stack: a synthesizer binds to the stack it is given to.
        if bootstrap_version_rule:
            return None
        return cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False)

    store = StoreStack(app, f"{config.prefix}-Store", config=config, synthesizer=synth())
    ingest = IngestStack(app, f"{config.prefix}-Ingest", config=config, synthesizer=synth())
    ingest.add_stack_dependency(store, "the function reads and writes the Store's bucket and table")
    changes = ChangesStack(app, f"{config.prefix}-Changes", config=config, synthesizer=synth())
    changes.add_stack_dependency(store, "the change feed reads the table's stream (SSM)")
    changes.add_stack_dependency(ingest, "the change feed's alarms notify the alarm topic (SSM)")
    maintenance = MaintenanceStack(
        app, f"{config.prefix}-Maintenance", config=config, synthesizer=synth()
    )
    maintenance.add_stack_dependency(store, "the collector reads the Store's bucket and table")
    maintenance.add_stack_dependency(ingest, "the collector's alarm notifies the alarm topic (SSM)")
    for stack in (store, ingest, changes, maintenance):
        cdk.Tags.of(stack).add("project", "vhs")
        cdk.Tags.of(stack).add("stage", config.stage)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return VhsStacks(config, store, ingest, changes, maintenance)
