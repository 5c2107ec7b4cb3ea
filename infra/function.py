"""A VHS Lambda function: how every one of them is packaged, logged, traced and allowed.

The ingest function, the change feed's and the garbage collector are one `VhsFunction` each:
the Lambda asset (the runtime part of lambdas/), the newest Python runtime the Powertools
layer supports, arm64, active tracing, the Powertools layer, a log group and a role of its
own, and the POWERTOOLS_* environment of its `vhs.settings.FunctionSpec`. Only what a function
does differs: its handler, its settings, its size and the statements of its role.

The log group ("Logs") and the role ("Role") are created beside the function ("Function") in
the scope it is given, not below it, so each function's resources keep the logical ids and
construct paths they have always had.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from vhs import settings
from vhs.shapes import FunctionShape

from . import nag, sam
from .config import (
    POWERTOOLS_LAYER_ACCOUNT,
    VhsConfig,
    powertools_layer_name,
    powertools_ssm_parameter,
)
from .runtime import architecture, python_runtime

# The Lambda asset: the folder lambdas/, whole. It holds what runs in Lambda and nothing else
# (the operator side, the CLI, the local stack and the operator tools, is the package in ops/,
# beside it). No bundling, so synth needs no Docker; Powertools comes from the managed layer
# and boto3 from the runtime. Left out: only what building and running Python leaves behind.
# tests/infra/test_infra_asset.py checks that the asset is every file of lambdas/ under git,
# and that this is what the handlers import.
LAMBDAS_DIR = Path(__file__).resolve().parent.parent / "lambdas"
ASSET_EXCLUDE = [
    "*.egg-info",
    "**/__pycache__",
    "**/*.pyc",
    "**/.pytest_cache",
    "**/.DS_Store",
]

# CloudWatch Logs' retention periods (config.LOG_RETENTION_DAYS), as CDK names them.
LOG_RETENTION = {
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
XRAY_ACKNOWLEDGEMENT = (
    "Tracing.ACTIVE adds xray:PutTraceSegments and xray:PutTelemetryRecords, which "
    "support no resource-level permissions: AWS requires Resource '*' for them."
)


def allow(
    sid: str,
    actions: Sequence[str],
    resources: Sequence[str],
    conditions: Mapping[str, Any] | None = None,
) -> iam.PolicyStatement:
    """One Allow statement of a role, named by its Sid."""
    return iam.PolicyStatement(
        sid=sid,
        actions=list(actions),
        resources=list(resources),
        conditions=dict(conditions) if conditions else None,
    )


def list_prefix_condition(prefix: str) -> dict[str, dict[str, str]] | None:
    """ListBucket only under a prefix (the collector lists `{prefix}/{shard}/`; the import
    function `imports/`); the whole bucket when there is no prefix.

    The condition also decides what a missing object under the prefix answers: S3 answers a
    GetObject or HeadObject of a missing key with 404 only when the caller may ListBucket,
    and evaluates that ListBucket with the key as `s3:prefix` (AWS does not document it;
    Ceph's S3 gateway does the same "to match aws behavior", ceph/ceph#68577, and the live
    import test checks it on a deployed stage). So a key under the prefix is a 404, and one
    outside it a 403. moto cannot show either: its IAM checks evaluate no condition (a
    statement with one applies as if it had none), and it answers 404 for any missing key
    the caller may GetObject."""
    prefix = prefix.strip("/")
    return {"StringLike": {"s3:prefix": f"{prefix}/*"}} if prefix else None


def allow_listing(sid: str, bucket: s3.IBucket, prefix: str) -> iam.PolicyStatement:
    """ListBucket (ListObjectsV2) of `bucket` under `prefix` only (`list_prefix_condition`)."""
    return allow(sid, ["s3:ListBucket"], [bucket.bucket_arn], list_prefix_condition(prefix))


def metrics_namespace(config: VhsConfig) -> str:
    """The namespace every VHS function's Powertools metrics go to (and the dashboard reads)."""
    return f"VHS/{config.stage}"


def log_group(scope: Construct, id: str, config: VhsConfig, **options: Any) -> logs.LogGroup:
    """A log group kept for the configuration's retention, deleted with its stack."""
    return logs.LogGroup(
        scope,
        id,
        retention=LOG_RETENTION[config.log_retention_days],
        removal_policy=cdk.RemovalPolicy.DESTROY,
        **options,
    )


def powertools_layer(scope: Construct, config: VhsConfig) -> lambda_.ILayerVersion:
    """The AWS-managed Powertools layer for the stack's region and the function's
    architecture. By default its ARN is the public SSM parameter of the pinned release,
    resolved by CloudFormation at deploy time in the stack's region."""
    if config.sam_local:
        return sam.local_powertools_layer(scope)
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


class VhsFunction(lambda_.Function):
    """A VHS Lambda function ("Function" in `scope`), with its log group ("Logs") and its role
    ("Role") beside it.

    The role gets the statement to write the function's own logs, then `statements` (what the
    handler calls, each scoped to its resources), then the X-Ray statements active tracing
    adds, whose Resource "*" is acknowledged here for every function. The environment is
    `environment` (the function's settings, from the vhs.settings builders) and the Powertools
    settings of `spec`; its timeout and memory are those of `shape`. `no_dlq_reason` says why
    the function needs no dead-letter queue of its own (checkov's CKV_AWS_116, skipped with
    that reason). `unscoped_reason` says why any of `statements` has Resource "*" (cdk-nag
    reports every "*" of a policy as one IAM5 finding, so one acknowledgement gives every
    reason).
    """

    def __init__(
        self,
        scope: Construct,
        *,
        config: VhsConfig,
        spec: settings.FunctionSpec,
        description: str,
        role_description: str,
        statements: Iterable[iam.PolicyStatement],
        environment: Mapping[str, str],
        shape: FunctionShape,
        no_dlq_reason: str,
        unscoped_reason: str | None = None,
        **options: Any,
    ) -> None:
        group = log_group(scope, "Logs", config)
        role = iam.Role(
            scope,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=role_description,
        )
        write_logs = allow(
            "WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [group.log_group_arn]
        )
        for statement in (write_logs, *statements):
            role.add_to_principal_policy(statement)

        super().__init__(
            scope,
            "Function",
            description=description,
            runtime=python_runtime(),
            architecture=architecture(),
            handler=spec.handler,
            code=lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=ASSET_EXCLUDE),
            layers=[powertools_layer(scope, config)],
            timeout=cdk.Duration.seconds(shape.function_timeout_seconds),
            memory_size=shape.function_memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=group,
            role=role,
            environment={
                **environment,
                **settings.powertools_environment(
                    spec, namespace=metrics_namespace(config), log_level=config.log_level
                ),
                **(sam.LOCAL_ENVIRONMENT if config.sam_local else {}),
            },
            **options,
        )
        self.execution_role = role  # what `role` returns, typed as the Role it is
        function = cast(lambda_.CfnFunction, self.node.default_child)
        # The Role property's GetAtt already orders the function after its role; CDK's
        # DependsOn on the role too is redundant (cfn-lint and `sam validate --lint`: W3005).
        # The one on the role's policy stays: the function may not run before it exists.
        policy = cast(cdk.CfnResource, role.node.find_child("DefaultPolicy").node.default_child)
        function.add_override("DependsOn", [policy.logical_id])
        # The name `sam local invoke NAME` takes (SAM reads it before the construct path).
        function.add_metadata(sam.RESOURCE_ID, spec.name)

        nag.skip_checkov(self, "CKV_AWS_116", no_dlq_reason)
        unscoped = " ".join(filter(None, (XRAY_ACKNOWLEDGEMENT, unscoped_reason)))
        nag.acknowledge(role, "AwsSolutions-IAM5", unscoped, finding="Resource::*")
