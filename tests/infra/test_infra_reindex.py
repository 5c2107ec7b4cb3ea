"""The reindex stack (infra/reindex.py), checked on the synthesized templates: the state
machine's shape (a Distributed Map with bounded concurrency looping the worker with its
cursor, retries), least-privilege roles, logging and tracing, and the failures alarm."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra_support import (
    Synthesized,
    logical_id,
    only,
    render,
    resources_of,
    ssm_parameter,
    statements,
)

from vhs import settings, shapes

SHAPE = shapes.REINDEX
TABLE = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/vhs-prod-records"


@pytest.fixture(scope="module")
def reindex(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.reindex)


def definition(template: dict[str, Any]) -> dict[str, Any]:
    """The state machine's definition, its CloudFormation references as "TOKEN"."""
    body = only(template, "AWS::StepFunctions::StateMachine")["Properties"]["DefinitionString"]
    _, parts = body["Fn::Join"]
    return json.loads("".join(part if isinstance(part, str) else "TOKEN" for part in parts))


def policy_of(template: dict[str, Any], role_prefix: str) -> list[dict[str, Any]]:
    (policy,) = [
        p
        for p in resources_of(template, "AWS::IAM::Policy").values()
        if any(r["Ref"].startswith(role_prefix) for r in p["Properties"]["Roles"])
        and "DistributedMap" not in json.dumps(p)
    ]
    return statements(policy)


def test_reindex_is_a_stateless_stack_of_its_own(app: Synthesized, reindex: dict) -> None:
    stack = app.stacks.reindex
    assert stack.stack_name == "Vhs-prod-Reindex"
    assert {app.stacks.store, app.stacks.ingest, app.stacks.changes} <= set(stack.dependencies)
    text = json.dumps(reindex)
    assert "Fn::ImportValue" not in text
    assert [n for n, r in reindex["Resources"].items() if r.get("DeletionPolicy") == "Retain"] == []
    machine = logical_id(reindex, "AWS::StepFunctions::StateMachine")
    assert reindex["Outputs"]["ReindexStateMachineArn"]["Value"] == {"Ref": machine}
    assert set(reindex["Outputs"]) == {"ReindexStateMachineArn", "ReindexFunctionName"}
    for name in ("change-topic-arn", "change-topic-key-arn", "alarm-topic-arn"):
        ssm_parameter(reindex, f"/vhs/prod/{name}")


def test_the_changes_stack_publishes_its_topic_key_for_the_worker(app: Synthesized) -> None:
    changes = app.template_json(app.stacks.changes)
    (parameter,) = [
        p
        for p in resources_of(changes, "AWS::SSM::Parameter").values()
        if p["Properties"]["Name"] == "/vhs/prod/change-topic-key-arn"
    ]
    key = logical_id(changes, "AWS::KMS::Key")
    assert parameter["Properties"]["Value"] == {"Fn::GetAtt": [key, "Arn"]}


def test_the_state_machine_maps_segments_with_bounded_concurrency_and_loops_each(
    reindex: dict,
) -> None:
    states = definition(reindex)["States"]
    # The worker plans the run (checks the input) before any segment starts.
    assert definition(reindex)["StartAt"] == "Plan"
    plan = states["Plan"]
    assert (
        plan["Type"] == "Task" and plan["Resource"] == "TOKEN" and plan["Next"] == "ReplaySegments"
    )
    assert plan["Parameters"] == {"plan.$": "$", "execution.$": "$$.Execution.Name"}
    assert next(r for r in plan["Retry"] if "InvalidInput" in r["ErrorEquals"])["MaxAttempts"] == 0
    each = states["ReplaySegments"]
    assert each["Type"] == "Map" and each["MaxConcurrency"] == SHAPE.max_concurrency
    assert each["ItemsPath"] == "$.segments"
    assert each["ItemSelector"] == {
        "segment.$": "$$.Map.Item.Value.segment",
        "share.$": "$$.Map.Item.Value.share",
        "run.$": "$.run",
    }
    processor = each["ItemProcessor"]
    assert processor["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    loop = processor["States"]
    assert processor["StartAt"] == "ReplayPage"
    page = loop["ReplayPage"]
    assert page["Type"] == "Task" and page["Resource"] == "TOKEN"  # the worker's ARN
    assert page["Next"] == "SegmentDone"
    retried = {error for retry in page["Retry"] for error in retry["ErrorEquals"]}
    assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= retried
    assert "States.TaskFailed" in retried
    assert all(retry["MaxAttempts"] <= 10 for retry in page["Retry"])
    # Permanent errors match first, and are not retried.
    first = [i for i, r in enumerate(page["Retry"]) if "InvalidInput" in r["ErrorEquals"]]
    task_failed = [
        i for i, r in enumerate(page["Retry"]) if "States.TaskFailed" in r["ErrorEquals"]
    ]
    assert first[0] < task_failed[0] and page["Retry"][first[0]]["MaxAttempts"] == 0
    choice = loop["SegmentDone"]
    assert choice["Choices"] == [
        {"Variable": "$.done", "BooleanEquals": True, "Next": "SegmentReplayed"}
    ]
    assert choice["Default"] == "ReplayPage"  # the next page, from the returned cursor
    # A child's output is its totals, never the run: the Map's results stay bounded.
    assert loop["SegmentReplayed"]["Type"] == "Pass" and loop["SegmentReplayed"]["End"] is True
    assert loop["SegmentReplayed"]["Parameters"] == {
        "segment.$": "$.segment",
        "totals.$": "$.totals",
    }


def test_the_state_machine_logs_everything_traces_and_times_out(reindex: dict) -> None:
    machine = only(reindex, "AWS::StepFunctions::StateMachine")["Properties"]
    assert machine["StateMachineType"] == "STANDARD"
    assert machine["StateMachineName"] == "vhs-prod-reindex"
    assert machine["TracingConfiguration"] == {"Enabled": True}
    logging = machine["LoggingConfiguration"]
    assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is True
    assert definition(reindex)["TimeoutSeconds"] == SHAPE.execution_timeout_hours * 3600


def test_the_worker_may_scan_the_table_and_publish_to_the_topic_only(reindex: dict) -> None:
    function = only(reindex, "AWS::Lambda::Function")["Properties"]
    assert function["Handler"] == settings.REINDEX_FUNCTION.handler
    assert function["Timeout"] == SHAPE.function_timeout_seconds
    variables = function["Environment"]["Variables"]
    assert variables[settings.TABLE_NAME] == "vhs-prod-records"
    topic = ssm_parameter(reindex, "/vhs/prod/change-topic-arn")
    key = ssm_parameter(reindex, "/vhs/prod/change-topic-key-arn")
    assert variables[settings.CHANGE_TOPIC_ARN] == {"Ref": topic}
    assert variables[settings.REINDEX_STOP_AT_REMAINING_MS] == str(SHAPE.stop_at_remaining_ms)
    role = function["Role"]["Fn::GetAtt"][0]
    by_sid = {s.get("Sid"): s for s in policy_of(reindex, role)}
    assert set(by_sid) == {"WriteLogs", "ScanTheTable", "PublishReplays", "EncryptReplays", None}
    assert sorted(by_sid["ScanTheTable"]["Action"]) == ["dynamodb:BatchGetItem", "dynamodb:Scan"]
    assert render(by_sid["ScanTheTable"]["Resource"]) == TABLE  # the table, not its indexes
    assert by_sid["PublishReplays"]["Action"] == "sns:Publish"
    assert by_sid["PublishReplays"]["Resource"] == {"Ref": topic}
    assert sorted(by_sid["EncryptReplays"]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert by_sid["EncryptReplays"]["Resource"] == {"Ref": key}
    assert sorted(by_sid[None]["Action"]) == ["xray:PutTelemetryRecords", "xray:PutTraceSegments"]


def test_the_state_machine_may_invoke_the_worker_and_nothing_else(reindex: dict) -> None:
    machine = only(reindex, "AWS::StepFunctions::StateMachine")["Properties"]
    role = machine["RoleArn"]["Fn::GetAtt"][0]
    function = logical_id(reindex, "AWS::Lambda::Function")
    found = policy_of(reindex, role)
    invoke = [s for s in found if "lambda:InvokeFunction" in json.dumps(s["Action"])]
    (statement,) = invoke
    assert statement["Action"] == "lambda:InvokeFunction"
    assert {render(r) for r in statement["Resource"]} == {
        f"${{{function}.Arn}}",
        f"${{{function}.Arn}}:*",
    }
    actions = {
        a for s in found for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not {a for a in actions if a.split(":")[0] in ("dynamodb", "sns", "s3", "kms")}
    (map_policy,) = [
        p for k, p in resources_of(reindex, "AWS::IAM::Policy").items() if "DistributedMap" in k
    ]
    mapped = {
        a
        for s in statements(map_policy)
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert mapped == {
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
        "states:RedriveExecution",
    }


def test_failed_or_timed_out_executions_alarm_to_the_alarm_topic(reindex: dict) -> None:
    alarm = only(reindex, "AWS::CloudWatch::Alarm")["Properties"]
    assert alarm["AlarmName"] == "Vhs-prod-ReindexFailures"
    topic = ssm_parameter(reindex, "/vhs/prod/alarm-topic-arn")
    assert alarm["AlarmActions"] == [{"Ref": topic}] and alarm["OKActions"] == [{"Ref": topic}]
    assert alarm["Threshold"] == 1 and alarm["TreatMissingData"] == "notBreaching"
    metrics = {m["Id"]: m for m in alarm["Metrics"] if "MetricStat" in m}
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in metrics.values()}
    assert names == {"ExecutionsFailed", "ExecutionsTimedOut"}
    machine = logical_id(reindex, "AWS::StepFunctions::StateMachine")
    for metric in metrics.values():
        assert metric["MetricStat"]["Metric"]["Namespace"] == "AWS/States"
        (dimension,) = metric["MetricStat"]["Metric"]["Dimensions"]
        assert dimension == {"Name": "StateMachineArn", "Value": {"Ref": machine}}
    (expression,) = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "failed + timedout"
