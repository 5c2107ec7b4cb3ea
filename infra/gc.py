"""Garbage collection in AWS: the collector as a Lambda, run on a schedule by EventBridge.

The function runs `handlers.gc` (docs/gc.md) with the settings of `vhs.resources.GC`
(overridable through VhsConfig): an EventBridge rule invokes it on the schedule with
``{"parallel": N}``, it fans the 256 shards out over N asynchronous invocations of itself,
and an invocation that runs short of time hands the shards it has not reached to a fresh
invocation of itself. It is the ingest function's twin in packaging (same asset, runtime,
architecture and Powertools layer, from infra/ingest.py) with a role of its own, written out
statement by statement: list the body prefix, read object metadata and delete objects under
it, read and mark the index table's items, invoke itself, write its own logs. No Scan, no
PutObject, no DeleteObjectVersion, no wildcard actions.

The function has a fixed name (`gc_function_name`), so its role can name the function's ARN
without referring to the function: a reference from the role's policy to the function it
belongs to would be a cycle (the function depends on its role).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from . import nag
from .config import VhsConfig
from .ingest import (
    _RETENTION,
    _object_arn,
    metrics_namespace,
    vhs_function,
)
from .monitoring import notifying_alarm

GC_HANDLER = "handlers.gc.handler"
SERVICE_NAME = "vhs-gc"


def gc_function_name(config: VhsConfig) -> str:
    """A fixed name: the role's self-invoke statement is built from it (see the docstring)."""
    return f"vhs-{config.stage}-gc"


def list_prefix_condition(body_prefix: str) -> dict[str, dict[str, str]] | None:
    """ListBucket only under the body prefix (the collector lists `{prefix}/{shard}/`); the
    whole bucket when bodies have no prefix."""
    prefix = body_prefix.strip("/")
    return {"StringLike": {"s3:prefix": f"{prefix}/*"}} if prefix else None


class GarbageCollection(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        bucket: s3.IBucket,
        table: dynamodb.ITable,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        shape = config.gc
        stack = cdk.Stack.of(self)
        function_name = gc_function_name(config)

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
            description=f"VHS {config.stage} garbage collector: list, judge, delete orphans",
        )
        body_objects = _object_arn(bucket, config.body_prefix)
        # The function's own ARN, from its fixed name: not `self.function.function_arn`,
        # which would make the role's policy depend on the function that depends on it.
        self.function_arn = stack.format_arn(
            service="lambda",
            resource="function",
            resource_name=function_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        for statement in (
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
            iam.PolicyStatement(
                sid="ListBodyShards",
                actions=["s3:ListBucket"],  # ListObjectsV2, one shard prefix at a time
                resources=[bucket.bucket_arn],
                conditions=list_prefix_condition(config.body_prefix),
            ),
            iam.PolicyStatement(
                sid="ReadBodyMetadata",
                # HeadObject, for the `vhs-id` metadata of bodies whose id is cut in the key.
                actions=["s3:GetObject"],
                resources=[body_objects],
            ),
            iam.PolicyStatement(
                sid="DeleteOrphanedBodies",
                # The current version only: the bucket is versioned, so a delete leaves a
                # noncurrent version for 30 days. No DeleteObjectVersion.
                actions=["s3:DeleteObject"],
                resources=[body_objects],
            ),
            iam.PolicyStatement(
                sid="ReadAndMarkIndex",
                # BatchGetItem reads the ids of a listing page; UpdateItem writes and clears
                # the condemnation markers (conditional writes). No Scan, no GetItem.
                actions=["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
                resources=[table.table_arn],
            ),
            iam.PolicyStatement(
                sid="InvokeItselfToFanOutAndContinue",
                actions=["lambda:InvokeFunction"],
                resources=[self.function_arn],
            ),
        ):
            self.role.add_to_principal_policy(statement)

        environment = {
            "VHS_TABLE_NAME": table.table_name,
            "VHS_BUCKET_NAME": bucket.bucket_name,
            "VHS_GC_GRACE": shape.grace,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace(config),
            "LOG_LEVEL": config.log_level,
        }
        # The collector judges versions by retention, exactly as readers do (docs/gc.md): it
        # must have the retention the ingest function writes and readers read with, or it
        # would collect bodies that readers still consider retained.
        optional = {
            "VHS_PREFIX": config.body_prefix or None,
            "VHS_RETAIN_VERSIONS": config.retain_versions,
            "VHS_RETAIN_DAYS": config.retain_days,
        }
        environment.update({k: str(v) for k, v in optional.items() if v is not None})

        self.function = vhs_function(
            self,
            config,
            handler=GC_HANDLER,
            description=f"VHS {config.stage}: deletes body objects no retained version uses",
            timeout_seconds=shape.function_timeout_seconds,
            memory_mb=shape.function_memory_mb,
            log_group=self.log_group,
            role=self.role,
            environment=environment,
            function_name=function_name,
        )

        # The schedule. The target adds the function's resource policy for this rule
        # (lambda:InvokeFunction by events.amazonaws.com, on condition of the rule's ARN).
        self.rule = events.Rule(
            self,
            "Schedule",
            description=f"VHS {config.stage}: runs the garbage collector",
            schedule=events.Schedule.expression(shape.schedule_expression),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object({"parallel": shape.parallel}),
                )
            ],
        )

        nag.skip_checkov(
            self.function,
            "CKV_AWS_116",
            "The events of this asynchronously invoked function are only `{parallel: N}` and "
            "lists of shards to collect: a failed one is retried twice, raises the GcErrors "
            "alarm, and the next scheduled run collects every shard again, so a DLQ would hold "
            "nothing to replay.",
        )
        nag.acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Tracing.ACTIVE adds xray:PutTraceSegments and xray:PutTelemetryRecords, which "
            "support no resource-level permissions: AWS requires Resource '*' for them.",
            finding="Resource::*",
        )
        nag.acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Object-level access under the store's body prefix only: the collector deletes "
            "orphaned bodies, whose keys are content-addressed ({prefix}/{shard}/{id}/{sha256}) "
            "and found by listing, so they cannot be named in advance. The actions are "
            "GetObject (HeadObject) and DeleteObject; no PutObject, no DeleteObjectVersion.",
            finding=nag.wildcard_resource(self, body_objects),
        )

        self.alarms: list[cloudwatch.Alarm] = []
        if alarm_topic is not None:
            self.errors_alarm = notifying_alarm(
                self,
                "GcErrors",
                name=config.prefix,
                action=actions.SnsAction(alarm_topic),
                metric=self.function.metric_errors(
                    period=cdk.Duration.seconds(config.alarms.period_seconds), statistic="Sum"
                ),
                description=(
                    "GC failed: orphans are not being collected; no data is at risk; "
                    "see docs/runbook.md (GC errors)."
                ),
                threshold=config.alarms.function_errors,
                evaluation_periods=1,
                comparison_operator=(
                    cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
                ),
            )
            self.alarms = [self.errors_alarm]
