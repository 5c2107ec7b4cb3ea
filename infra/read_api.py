"""The read API in AWS: `handlers.read_api` behind a Lambda function URL with IAM auth.

Consumers in any language read records over HTTPS with SigV4-signed requests (docs/read-api.md):
the latest version, a retained version, the history. Why a function URL and not API Gateway:
the API is three GET routes with IAM auth, which a function URL does by itself; API Gateway
would add $1.00 (HTTP API) to $3.50 (REST API) per million requests, and its 10 MB / 29 s
limits buy nothing here, because a body too large for a Lambda response is answered with a
redirect to a presigned S3 URL either way.

What the function may do is written out statement by statement: GetItem on the index table,
GetObject under the body prefix (to read a body, and to presign the redirect for one too
large to return: a presigned URL carries the signer's permissions). Nothing else: no Query, no
Scan, no writes.

Who may read is not this stack's choice: it outputs a managed policy (`ReaderPolicyArn`) to
attach to consumers' roles. Since October 2025 a function URL with AWS_IAM auth needs both
lambda:InvokeFunctionUrl and lambda:InvokeFunction (the latter only through the URL).

Alarms (to the Ingest stack's alarm topic): the share of requests answered 5xx, the p99
latency, function errors and throttles (a throttled request is a 429 to the consumer).
"""

from __future__ import annotations

import dataclasses
from typing import Unpack

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from vhs import settings, shapes

from . import nag
from .feature import StoreFeature, StoreWiring
from .function import allow
from .monitoring import Alarms

LAMBDA_NAMESPACE = "AWS/Lambda"


def url_metric(
    function: lambda_.IFunction, name: str, *, statistic: str, period: cdk.Duration
) -> cloudwatch.Metric:
    """A function URL metric of `function` (Lambda publishes them by FunctionName)."""
    return cloudwatch.Metric(
        namespace=LAMBDA_NAMESPACE,
        metric_name=name,
        dimensions_map={"FunctionName": function.function_name},
        statistic=statistic,
        period=period,
    )


def reader_statements(function: lambda_.IFunction) -> list[iam.PolicyStatement]:
    """What a consumer needs to call the function URL, and no more: InvokeFunctionUrl for an
    IAM-authorised URL, and InvokeFunction only through a function URL (so the policy does not
    let its holder invoke the function with an event of their own making)."""
    return [
        allow(
            "CallTheReadApi",
            ["lambda:InvokeFunctionUrl"],
            [function.function_arn],
            {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}},
        ),
        allow(
            "InvokeThroughTheUrlOnly",
            ["lambda:InvokeFunction"],
            [function.function_arn],
            {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}},
        ),
    ]


class ReadApi(StoreFeature):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        shape: shapes.ReadApiShape = shapes.READ_API,
        **wiring: Unpack[StoreWiring],
    ) -> None:
        """The function is told of the store what ingest is (`StoreWiring`): it reads with the
        retention ingest writes with, so a version the API answers 404 for is one the library
        would not return either."""
        super().__init__(scope, id, **wiring)
        config, table, body_objects = self.config, self.table, self.body_objects
        self.add_function(
            settings.READ_API_FUNCTION,
            does="the read API (function URL, IAM auth)",
            role="read API: read items and bodies",
            statements=[
                # One GetItem per request: the item holds the versions and the small bodies.
                allow("ReadIndex", ["dynamodb:GetItem"], [table.table_arn]),
                # A body in S3: read it, or presign a GET of it for a body too large to return.
                allow("ReadBodies", ["s3:GetObject"], [body_objects]),
            ],
            # The reader writes nothing: the inline threshold is not among its settings.
            environment=settings.read_api_environment(
                dataclasses.replace(self.store, inline_threshold=None),
                presign_seconds=shape.presign_seconds,
            ),
            shape=shape,
            no_dlq_reason=(
                "The function is invoked synchronously through its URL: a failed request is "
                "answered with an error to its caller, who retries; there is no event to keep."
            ),
        )
        self.url = self.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM,
            invoke_mode=lambda_.InvokeMode.BUFFERED,
        )
        self.reader_policy = iam.ManagedPolicy(
            self,
            "ReaderPolicy",
            description=f"VHS {config.stage}: read records through the read API",
            statements=reader_statements(self.function),
        )

        nag.acknowledge_wildcard(
            self.function.execution_role,
            body_objects,
            "Object-level read under the store's body prefix only: bodies are stored under "
            "content-addressed keys ({prefix}/{shard}/{id}/{sha256}) that the index names at "
            "read time, so they cannot be listed in advance. The only action is GetObject.",
        )

        self.add_alarms(self._alarms)

    def _alarms(self, alarms: Alarms) -> list[cloudwatch.Alarm]:
        config, shape = self.config, self.shape
        period = cdk.Duration.seconds(shape.period_seconds)
        function = self.function
        error_rate = cloudwatch.MathExpression(
            # No requests, no rate: a quiet period is not an outage.
            expression="IF(requests > 0, 100 * errors / requests, 0)",
            using_metrics={
                "errors": url_metric(function, "Url5xxCount", statistic="Sum", period=period),
                "requests": url_metric(function, "UrlRequestCount", statistic="Sum", period=period),
            },
            period=period,
            label="5xx responses (% of requests)",
        )
        return [
            alarms.alarm(
                "ReadApi5xxRate",
                error_rate,
                f"The read API answered {shape.error_rate_percent:g} % or more of its requests "
                "with 5xx: consumers cannot read; see docs/runbook.md (read API errors).",
                threshold=shape.error_rate_percent,
            ),
            alarms.alarm(
                "ReadApiLatency",
                url_metric(function, "UrlRequestLatency", statistic="p99", period=period),
                f"The read API's p99 latency is {shape.latency_p99_ms} ms or more: see "
                "docs/runbook.md (read API latency).",
                threshold=shape.latency_p99_ms,
                evaluation_periods=shape.latency_evaluation_periods,
            ),
            alarms.function_errors(
                "ReadApiErrors",
                function,
                "The read API function failed (an unhandled error or a timeout): its callers "
                "got 5xx; see docs/runbook.md (read API errors).",
            ),
            alarms.alarm(
                "ReadApiThrottles",
                function.metric_throttles(period=period, statistic="Sum"),
                "Read API requests were throttled (answered 429): consumers read faster than "
                "the account's Lambda concurrency allows; see docs/runbook.md (read API "
                "throttles).",
                threshold=config.alarms.function_throttles,
            ),
        ]
