"""Ingest: the queue producers send to, its dead-letter queue, and the function between the
queue and the store.

Queue and event-source settings come from `vhs.resources.INGEST`, the definition the local
event-source emulator uses too. The function's role is written out statement by statement:
only the S3, DynamoDB and SQS actions the handler calls, on its own bucket prefix, staging
bucket, table and dead-letter queue. No Scan, no DeleteObject (deleted records leave their
bodies to the garbage collector), no wildcard actions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from vhs import resources

from . import nag
from .config import (
    LAMBDA_ARCHITECTURE,
    LAMBDA_HANDLER,
    LAMBDA_PYTHON_VERSION,
    POWERTOOLS_LAYER_ACCOUNT,
    VhsConfig,
    powertools_layer_name,
    powertools_ssm_parameter,
)

# The Lambda asset: the whole lambdas/ folder (the vhs package and the handlers), as it is.
# No bundling, so synth needs no Docker; Powertools comes from the managed layer and boto3
# from the runtime.
LAMBDAS_DIR = Path(__file__).resolve().parent.parent / "lambdas"
ASSET_EXCLUDE = ["*.egg-info", "**/__pycache__", "**/*.pyc", "**/.pytest_cache", "**/.DS_Store"]

SERVICE_NAME = "vhs-ingest"
DEAD_LETTER_STAGING_PREFIX = resources.DEAD_LETTER_STAGING_PREFIX


def python_runtime(version: str = LAMBDA_PYTHON_VERSION) -> lambda_.Runtime:
    return getattr(lambda_.Runtime, "PYTHON_" + version.replace(".", "_"))


def powertools_layer(scope: Construct, config: VhsConfig) -> lambda_.ILayerVersion:
    """The AWS-managed Powertools layer for the stack's region and the function's
    architecture. By default its ARN is the public SSM parameter of the pinned release,
    resolved by CloudFormation at deploy time in the stack's region."""
    if config.powertools_layer_arn:
        arn = config.powertools_layer_arn
    elif config.powertools_layer_version:
        arn = cdk.Stack.of(scope).format_arn(
            service="lambda",
            account=POWERTOOLS_LAYER_ACCOUNT,
            resource="layer",
            resource_name=f"{powertools_layer_name()}:{config.powertools_layer_version}",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
    else:
        arn = ssm.StringParameter.value_for_string_parameter(scope, powertools_ssm_parameter())
    return lambda_.LayerVersion.from_layer_version_arn(scope, "Powertools", arn)


def _object_arn(bucket: s3.IBucket, prefix: str) -> str:
    """ARN of every object under a key prefix ("" for the whole bucket)."""
    return bucket.arn_for_objects(f"{prefix.strip('/')}/*" if prefix.strip("/") else "*")


def vhs_function(
    scope: Construct,
    config: VhsConfig,
    *,
    handler: str,
    description: str,
    timeout_seconds: int,
    memory_mb: int,
    log_group: logs.ILogGroup,
    role: iam.IRole,
    environment: dict[str, str],
    **options: Any,
) -> lambda_.Function:
    """A VHS Lambda function ("Function" in `scope`): the lambdas/ asset, the newest Python
    runtime the Powertools layer supports, arm64, active tracing, and the given role and logs.
    Every VHS function is packaged the same way; only what it does differs."""
    return lambda_.Function(
        scope,
        "Function",
        description=description,
        runtime=python_runtime(),
        architecture=_ARCHITECTURES[LAMBDA_ARCHITECTURE],
        handler=handler,
        code=lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=ASSET_EXCLUDE),
        layers=[powertools_layer(scope, config)],
        timeout=cdk.Duration.seconds(timeout_seconds),
        memory_size=memory_mb,
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group,
        role=role,
        environment=environment,
        **options,
    )


class Ingest(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VhsConfig,
        bucket: s3.IBucket,
        staging: s3.IBucket,
        table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, id)
        shape = config.ingest

        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.seconds(shape.dlq_retention_seconds),
            max_message_size_bytes=shape.max_message_bytes,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            visibility_timeout=cdk.Duration.seconds(shape.visibility_timeout_seconds),
            retention_period=cdk.Duration.seconds(shape.queue_retention_seconds),
            max_message_size_bytes=shape.max_message_bytes,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=shape.max_receive_count
            ),
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
            description=f"VHS {config.stage} ingest function: store writes only",
        )
        body_objects = _object_arn(bucket, config.body_prefix)
        staged_objects = _object_arn(staging, resources.STAGING_PREFIX)
        dead_letter_objects = _object_arn(
            staging, resources.STAGING_PREFIX + DEAD_LETTER_STAGING_PREFIX
        )
        for statement in (
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
            iam.PolicyStatement(
                sid="ReadAndWriteBodies",
                # PutObject covers CreateMultipartUpload, UploadPart and
                # CompleteMultipartUpload; a failed multipart upload is aborted.
                actions=["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
                resources=[body_objects],
            ),
            iam.PolicyStatement(
                sid="ReadStagedPayloads",
                actions=["s3:GetObject"],
                resources=[staged_objects],
            ),
            iam.PolicyStatement(
                sid="StageOversizedDeadLetters",
                actions=["s3:PutObject"],
                resources=[dead_letter_objects],
            ),
            iam.PolicyStatement(
                sid="ReadAndWriteIndex",
                actions=["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
                resources=[table.table_arn],
            ),
            iam.PolicyStatement(
                sid="DeadLetterInvalidMessages",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue_arn],
            ),
        ):
            self.role.add_to_principal_policy(statement)

        environment = {
            "VHS_TABLE_NAME": table.table_name,
            "VHS_BUCKET_NAME": bucket.bucket_name,
            "VHS_DLQ_URL": self.dead_letters.queue_url,
            "VHS_STAGING_BUCKET": staging.bucket_name,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace(config),
            "LOG_LEVEL": config.log_level,
        }
        optional = {
            "VHS_PREFIX": config.body_prefix or None,
            "VHS_STAGING_PREFIX": resources.STAGING_PREFIX or None,
            "VHS_INLINE_THRESHOLD": config.inline_threshold,
            "VHS_RETAIN_VERSIONS": config.retain_versions,
            "VHS_RETAIN_DAYS": config.retain_days,
        }
        environment.update({k: str(v) for k, v in optional.items() if v is not None})

        self.function = vhs_function(
            self,
            config,
            handler=LAMBDA_HANDLER,
            description=f"VHS {config.stage}: stores the records sent to the ingest queue",
            timeout_seconds=shape.function_timeout_seconds,
            memory_mb=shape.function_memory_mb,
            ephemeral_storage_size=cdk.Size.mebibytes(shape.function_ephemeral_storage_mb),
            log_group=self.log_group,
            role=self.role,
            environment=environment,
        )

        self.event_source: sources.SqsEventSource | None = None
        if config.ingest_event_source:
            self.event_source = sources.SqsEventSource(
                self.queue,
                batch_size=shape.batch_size,
                max_batching_window=cdk.Duration.seconds(shape.max_batching_window_seconds),
                report_batch_item_failures=True,
                max_concurrency=shape.max_concurrency,
            )
            self.function.add_event_source(self.event_source)
        nag.skip_checkov(
            self.function,
            "CKV_AWS_116",
            "A function DLQ catches failed asynchronous invocations; this function is invoked "
            "synchronously by the SQS event source, and a message it fails stays in the queue "
            "until the queue's redrive policy moves it to the ingest DLQ.",
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
            "Object-level access under the store's body prefix only: body keys are "
            "content-addressed ({prefix}/{shard}/{id}/{sha256}) and cannot be listed in "
            "advance. The actions are PutObject, GetObject and AbortMultipartUpload; no "
            "DeleteObject, no List.",
            finding=nag.wildcard_resource(self, body_objects),
        )
        nag.acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "GetObject on the staging bucket: producers stage claim-check payloads under "
            "keys they choose (SQS Extended Client UUIDs), and the handler reads only keys "
            "that a message points to inside this bucket.",
            finding=nag.wildcard_resource(self, staged_objects),
        )
        nag.acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "PutObject under dead-letters/ of the staging bucket only: an invalid message too "
            "large for the DLQ is staged there by its message id and dead-lettered as a "
            "claim check.",
            finding=nag.wildcard_resource(self, dead_letter_objects),
        )

        # What a producer may do: send to the ingest queue and stage large payloads.
        self.producer_policy = iam.ManagedPolicy(
            self,
            "ProducerPolicy",
            description=f"Send records to VHS {config.stage}: attach to producer roles",
            statements=[
                iam.PolicyStatement(
                    sid="SendToIngestQueue",
                    actions=["sqs:SendMessage"],
                    resources=[self.queue.queue_arn],
                ),
                iam.PolicyStatement(
                    sid="StageLargePayloads",
                    actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[staged_objects],
                ),
            ],
        )
        nag.acknowledge(
            self.producer_policy,
            "AwsSolutions-IAM5",
            "Producers put claim-check payloads in the staging bucket under keys they choose "
            "(SQS Extended Client UUIDs); PutObject and AbortMultipartUpload only, and staged "
            "objects expire by lifecycle.",
            finding=nag.wildcard_resource(self, staged_objects),
        )


def metrics_namespace(config: VhsConfig) -> str:
    return f"VHS/{config.stage}"


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}
_ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
