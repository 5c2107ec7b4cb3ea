"""The two stacks of a VHS deployment, and the app that holds them.

* ``Vhs-<stage>-Store`` (stateful): the body bucket, the index table, the staging bucket and
  the access-log bucket. Everything in it is RETAIN, so deleting the stack keeps the data.
* ``Vhs-<stage>-Ingest`` (stateless): the queues, the function, its event source, and the
  monitoring of all of it (alarm topic, alarms, dashboard). Delete and redeploy it freely.

The Ingest stack refers to the Store's resources by their physical names (see
`VhsConfig.table_name` and `VhsConfig.bucket_name`), not by cross-stack references, so
neither stack's template depends on the other's outputs. Monitoring lives in the stateless
stack rather than a third one because every alarm and widget names a queue or the function:
they deploy, change and go away together, and one `cdk destroy` removes the whole stateless
side.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from .config import VhsConfig
from .ingest import Ingest
from .monitoring import Monitoring
from .store import Store


def _bucket_name(config: VhsConfig, role: str) -> str:
    return config.bucket_name(role, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION)


def _parameter(scope: Construct, config: VhsConfig, name: str, value: str, what: str) -> None:
    ssm.StringParameter(
        scope,
        f"Parameter{''.join(part.title() for part in name.split('-'))}",
        parameter_name=f"/vhs/{config.stage}/{name}",
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


@dataclass(frozen=True)
class VhsStacks:
    config: VhsConfig
    store: StoreStack
    ingest: IngestStack


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
    for stack in (store, ingest):
        cdk.Tags.of(stack).add("project", "vhs")
        cdk.Tags.of(stack).add("stage", config.stage)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return VhsStacks(config, store, ingest)
