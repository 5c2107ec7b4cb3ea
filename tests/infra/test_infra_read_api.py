"""The read API's stack (infra/read_api.py), checked on the synthesized templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from infra_support import (
    Synthesized,
    as_list,
    logical_id,
    only,
    render,
    resources_of,
    ssm_parameter,
    statements,
)

from vhs import settings, shapes

SHAPE = shapes.READ_API
ROOT = Path(__file__).resolve().parents[2]
BODIES = "arn:${AWS::Partition}:s3:::vhs-prod-bodies-${AWS::AccountId}-${AWS::Region}"
TABLE = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/vhs-prod-records"


@pytest.fixture(scope="module")
def api(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.read_api)


def _alarm(template: dict[str, Any], name: str) -> dict[str, Any]:
    (alarm,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::CloudWatch::Alarm").values()
        if r["Properties"]["AlarmName"] == f"Vhs-prod-{name}"
    ]
    return alarm


def test_the_read_api_is_a_stateless_stack_of_its_own(app: Synthesized, api: dict) -> None:
    stack = app.stacks.read_api
    assert stack.stack_name == "Vhs-prod-ReadApi"
    assert {app.stacks.store, app.stacks.ingest} <= set(stack.dependencies)
    text = json.dumps(api)
    assert "Fn::ImportValue" not in text and "Fn::GetStackOutput" not in text
    assert [n for n, r in api["Resources"].items() if r.get("DeletionPolicy") == "Retain"] == []
    assert set(api["Outputs"]) == {"ReadApiUrl", "ReaderPolicyArn", "ReadApiFunctionName"}
    url = logical_id(api, "AWS::Lambda::Url")
    assert api["Outputs"]["ReadApiUrl"]["Value"] == {"Fn::GetAtt": [url, "FunctionUrl"]}


def test_the_url_takes_only_signed_requests(api: dict[str, Any]) -> None:
    url = only(api, "AWS::Lambda::Url")["Properties"]
    function = logical_id(api, "AWS::Lambda::Function")
    assert url["AuthType"] == "AWS_IAM"
    assert url["TargetFunctionArn"] == {"Fn::GetAtt": [function, "Arn"]}
    assert url.get("InvokeMode", "BUFFERED") == "BUFFERED"
    # No resource policy opens it: callers need the reader policy (or their own grant).
    assert resources_of(api, "AWS::Lambda::Permission") == {}
    assert "Cors" not in url


def test_the_function_reads_and_does_nothing_else(api: dict[str, Any]) -> None:
    (policy,) = [
        p for p in resources_of(api, "AWS::IAM::Policy").values() if "Roles" in p["Properties"]
    ]
    granted = {
        s["Sid"]: (sorted(as_list(s["Action"])), sorted(render(r) for r in as_list(s["Resource"])))
        for s in statements(policy)
        if s.get("Sid")
    }
    assert granted["ReadIndex"] == (["dynamodb:GetItem"], [TABLE])
    assert granted["ReadBodies"] == (["s3:GetObject"], [f"{BODIES}/bodies/*"])
    actions = {a for s in statements(policy) for a in as_list(s["Action"])}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "dynamodb:GetItem",
        "s3:GetObject",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }


def test_the_function_is_told_the_store_as_ingest_is(app: Synthesized, api: dict) -> None:
    function = only(api, "AWS::Lambda::Function")["Properties"]
    environment = function["Environment"]["Variables"]
    assert environment[settings.READ_API_PRESIGN_SECONDS] == str(SHAPE.presign_seconds)
    assert environment[settings.PREFIX] == "bodies"
    assert render(environment[settings.BUCKET_NAME]).startswith("vhs-prod-bodies-")
    assert environment[settings.TABLE_NAME] == "vhs-prod-records"
    # It writes nothing, so it is not told the inline threshold; it reads with the retention
    # ingest writes with.
    assert settings.INLINE_THRESHOLD not in environment
    ingest = app.template_json(app.stacks.ingest)
    (ingest_function,) = [
        f["Properties"]
        for f in resources_of(ingest, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == settings.INGEST_FUNCTION.handler
    ]
    for name in (settings.RETAIN_VERSIONS, settings.RETAIN_DAYS, settings.PREFIX):
        assert environment.get(name) == ingest_function["Environment"]["Variables"].get(name)
    assert function["Handler"] == settings.READ_API_FUNCTION.handler
    assert function["Timeout"] == SHAPE.function_timeout_seconds
    assert function["MemorySize"] == SHAPE.function_memory_mb
    assert environment["POWERTOOLS_SERVICE_NAME"] == settings.READ_API_FUNCTION.service


def test_the_reader_policy_calls_the_url_and_nothing_else(api: dict[str, Any]) -> None:
    policy = only(api, "AWS::IAM::ManagedPolicy")["Properties"]
    function = {"Fn::GetAtt": [logical_id(api, "AWS::Lambda::Function"), "Arn"]}
    by_action = {s["Action"]: s for s in statements({"Properties": policy})}
    assert set(by_action) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    url = by_action["lambda:InvokeFunctionUrl"]
    assert url["Resource"] == function
    assert url["Condition"] == {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
    # InvokeFunction is required for a function URL since October 2025; only through the URL,
    # so the policy's holder cannot invoke the function with an event of their own.
    invoke = by_action["lambda:InvokeFunction"]
    assert invoke["Resource"] == function
    assert invoke["Condition"] == {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}
    assert api["Outputs"]["ReaderPolicyArn"]["Value"] == {
        "Ref": logical_id(api, "AWS::IAM::ManagedPolicy")
    }
    parameters = {
        p["Properties"]["Name"]: p["Properties"]["Value"]
        for p in resources_of(api, "AWS::SSM::Parameter").values()
    }
    assert set(parameters) == {"/vhs/prod/read-api-url", "/vhs/prod/reader-policy-arn"}


def test_the_5xx_rate_alarm_is_a_share_of_requests(api: dict[str, Any]) -> None:
    alarm = _alarm(api, "ReadApi5xxRate")
    topic = {"Ref": ssm_parameter(api, "/vhs/prod/alarm-topic-arn")}
    assert alarm["AlarmActions"] == alarm["OKActions"] == [topic]
    assert alarm["TreatMissingData"] == "notBreaching"
    (expression,) = [q for q in alarm["Metrics"] if "Expression" in q]
    assert expression["Expression"] == "IF(requests > 0, 100 * errors / requests, 0)"
    watched = {
        q["Id"]: (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"])
        for q in alarm["Metrics"]
        if "MetricStat" in q
    }
    assert watched == {"errors": ("Url5xxCount", "Sum"), "requests": ("UrlRequestCount", "Sum")}
    function = logical_id(api, "AWS::Lambda::Function")
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            assert metric["Namespace"] == "AWS/Lambda"
            assert metric["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
            assert query["MetricStat"]["Period"] == SHAPE.period_seconds
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "GreaterThanOrEqualToThreshold",
        SHAPE.error_rate_percent,
    )


def test_the_latency_alarm_watches_p99_for_several_periods(api: dict[str, Any]) -> None:
    alarm = _alarm(api, "ReadApiLatency")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "UrlRequestLatency")
    assert alarm["ExtendedStatistic"] == "p99"
    assert alarm["Threshold"] == SHAPE.latency_p99_ms
    assert alarm["EvaluationPeriods"] == SHAPE.latency_evaluation_periods > 1
    assert alarm["Period"] == SHAPE.period_seconds


def test_every_alarm_is_in_the_runbook(api: dict[str, Any]) -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    names = {
        r["Properties"]["AlarmName"] for r in resources_of(api, "AWS::CloudWatch::Alarm").values()
    }
    assert names == {
        "Vhs-prod-ReadApi5xxRate",
        "Vhs-prod-ReadApiLatency",
        "Vhs-prod-ReadApiErrors",
        "Vhs-prod-ReadApiThrottles",
    }
    for name in names:
        assert f"`{name.replace('prod', '<stage>')}`" in runbook, name
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    for name in ("Vhs-<stage>-ReadApi", "ReadApiUrl", "ReaderPolicyArn"):
        assert name in deploy, name


def test_the_asset_carries_the_read_api(app: Synthesized) -> None:
    asset = app.asset
    assert (asset / "handlers" / "read_api.py").is_file()
    # The local server that fronts the same handler is not shipped.
    assert not (asset / "vhs" / "local").exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("presign_seconds", 0),
        ("presign_seconds", 3601),
        ("error_rate_percent", 0),
        ("function_memory_mb", 64),
        ("period_seconds", 90),
    ],
)
def test_a_bad_shape_is_refused(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field.split("_")[0]):
        shapes.ReadApiShape(**{field: value})
