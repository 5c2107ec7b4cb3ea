"""What the two Step Functions features (bulk import, reindex) share: the Lambda states
of the worker, and the errors no retry can fix."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from vhs.errors import permanent_error_names

# What no retry can fix (bad input, configuration, a replaced export): never retried.
PERMANENT_ERRORS = permanent_error_names()


def worker_task(
    scope: Construct, id: str, function: lambda_.IFunction, **options: Any
) -> tasks.LambdaInvoke:
    """A state that hands its input to `function` and takes its answer. Lambda's service
    errors are retried; `PERMANENT_ERRORS` never, and first (a Retrier matches in order, so
    it must come before any added later). `options` are LambdaInvoke's."""
    task = tasks.LambdaInvoke(
        scope,
        id,
        lambda_function=function,
        payload_response_only=True,
        retry_on_service_exceptions=True,
        **options,
    )
    task.add_retry(errors=list(PERMANENT_ERRORS), max_attempts=0)
    return task


def plan_task(scope: Construct, function: lambda_.IFunction, **options: Any) -> tasks.LambdaInvoke:
    """The Plan state: `function` checks the execution's input (``plan``) before any work,
    told the execution's name (``execution``)."""
    payload = {
        "plan": sfn.JsonPath.object_at("$"),
        "execution": sfn.JsonPath.string_at("$$.Execution.Name"),
    }
    return worker_task(
        scope, "Plan", function, payload=sfn.TaskInput.from_object(payload), **options
    )
