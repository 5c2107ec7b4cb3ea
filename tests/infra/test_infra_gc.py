"""The garbage collector's stack (infra/gc.py), checked on the synthesized templates."""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from infra_support import (
    GC_HANDLER,
    LAMBDA_HANDLER,
    Synthesized,
    as_list,
    logical_id,
    only,
    render,
    resources_of,
    ssm_parameter,
    statements,
)

from infra import VhsConfig, shapes
from infra.config import ConfigError
from infra.gc import GarbageCollection, gc_function_name
from vhs import shapes as vhs_shapes
from vhs.maintenance.gc import DEFAULT_GRACE, parse_duration
from vhs_ops.local.invoke import HANDLERS, load_handler

SHAPE = vhs_shapes.GC
ROOT = Path(__file__).resolve().parents[2]
BODIES = "arn:${AWS::Partition}:s3:::vhs-prod-bodies-${AWS::AccountId}-${AWS::Region}"
TABLE = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/vhs-prod-records"
FUNCTION = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:vhs-prod-gc"


def construct_template(config: VhsConfig, tmp_path: Path) -> dict[str, Any]:
    """The GarbageCollection construct alone in a stack (no cdk-nag): for configurations
    other than the default app's."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    GarbageCollection(
        stack,
        "GarbageCollection",
        config=config,
        bucket=s3.Bucket.from_bucket_name(stack, "Bodies", "bodies-bucket"),
        table=dynamodb.Table.from_table_name(stack, "Records", config.table_name),
    )
    return app.synth().get_stack_by_name("Probe").template


# --- the stack ----------------------------------------------------------------------------------


def test_gc_is_a_stateless_stack_of_its_own(app: Synthesized, gc: dict[str, Any]) -> None:
    stack = app.stacks.maintenance
    assert stack.stack_name == "Vhs-prod-Maintenance"
    assert {app.stacks.store, app.stacks.ingest} <= set(stack.dependencies)
    text = json.dumps(gc)
    assert "Fn::ImportValue" not in text and "Fn::GetStackOutput" not in text
    assert [n for n, r in gc["Resources"].items() if r.get("DeletionPolicy") == "Retain"] == []
    assert set(gc["Outputs"]) == {"GcFunctionName", "GcRuleName"}
    function = logical_id(gc, "AWS::Lambda::Function")
    rule = logical_id(gc, "AWS::Events::Rule")
    assert gc["Outputs"]["GcFunctionName"]["Value"] == {"Ref": function}
    assert gc["Outputs"]["GcRuleName"]["Value"] == {"Ref": rule}
    assert {r["Type"] for r in gc["Resources"].values()} == {
        "AWS::Logs::LogGroup",
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
        "AWS::Lambda::Function",
        "AWS::Events::Rule",
        "AWS::Lambda::Permission",
        "AWS::CloudWatch::Alarm",
    }


def test_the_other_stacks_carry_nothing_of_gc(app: Synthesized) -> None:
    for stack in (app.stacks.store, app.stacks.ingest, app.stacks.changes):
        text = json.dumps(app.template_json(stack))
        assert GC_HANDLER not in text and "vhs-prod-gc" not in text, stack.stack_name
        assert "AWS::Events::Rule" not in text


# --- the function -------------------------------------------------------------------------------


def test_the_function_is_packaged_like_the_ingest_function(
    gc: dict[str, Any], ingest: dict[str, Any]
) -> None:
    mine = only(gc, "AWS::Lambda::Function")["Properties"]
    theirs = only(ingest, "AWS::Lambda::Function")["Properties"]
    for same in ("Runtime", "Architectures", "TracingConfig"):
        assert mine[same] == theirs[same], same
    assert mine["TracingConfig"] == {"Mode": "Active"}
    assert mine["Code"]["S3Key"] == theirs["Code"]["S3Key"]  # the same asset
    (layer,) = mine["Layers"]
    (their_layer,) = theirs["Layers"]
    assert gc["Parameters"][layer["Ref"]] == ingest["Parameters"][their_layer["Ref"]]
    assert mine["Handler"] == GC_HANDLER == "handlers.gc.handler" != LAMBDA_HANDLER
    assert HANDLERS["gc"] == "handlers.gc"
    assert mine["FunctionName"] == gc_function_name(VhsConfig(stage="prod")) == "vhs-prod-gc"
    assert mine["Timeout"] == SHAPE.function_timeout_seconds == 900
    assert mine["MemorySize"] == SHAPE.function_memory_mb
    assert only(gc, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 30
    assert mine["LoggingConfig"] == {"LogGroup": {"Ref": logical_id(gc, "AWS::Logs::LogGroup")}}


def test_the_timeout_leaves_the_handler_time_to_hand_shards_on() -> None:
    reserve_ms = sys.modules[load_handler("gc").__module__].RESERVE_MS
    assert SHAPE.function_timeout_seconds * 1000 > 2 * reserve_ms


def test_the_function_environment(gc: dict[str, Any]) -> None:
    env = only(gc, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert {k: render(v) for k, v in env.items()} == {
        "VHS_TABLE_NAME": "vhs-prod-records",
        "VHS_BUCKET_NAME": "vhs-prod-bodies-${AWS::AccountId}-${AWS::Region}",
        "VHS_PREFIX": shapes.DEPLOYED_BODY_PREFIX,
        "VHS_GC_GRACE": SHAPE.grace,
        "POWERTOOLS_SERVICE_NAME": "vhs-gc",
        "POWERTOOLS_METRICS_NAMESPACE": "VHS/prod",
        "LOG_LEVEL": "INFO",
    }
    assert parse_duration(env["VHS_GC_GRACE"]) == DEFAULT_GRACE


def test_the_collector_judges_with_the_retention_ingest_writes_with(tmp_path: Path) -> None:
    # With another retention than readers, the collector would delete bodies they still read.
    config = VhsConfig(stage="prod", retain_versions=3, retain_days=7)
    env = only(construct_template(config, tmp_path), "AWS::Lambda::Function")["Properties"][
        "Environment"
    ]["Variables"]
    assert env["VHS_RETAIN_VERSIONS"] == "3"
    assert env["VHS_RETAIN_DAYS"] == "7"


# --- the role -----------------------------------------------------------------------------------


def test_the_role_grants_exactly_what_the_collector_calls(gc: dict[str, Any]) -> None:
    role = only(gc, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }
    policy = only(gc, "AWS::IAM::Policy")
    assert policy["Properties"]["Roles"] == [{"Ref": logical_id(gc, "AWS::IAM::Role")}]
    log_group = "${" + logical_id(gc, "AWS::Logs::LogGroup") + ".Arn}"
    found = [
        {
            "Sid": s.get("Sid"),
            "Effect": s["Effect"],
            "Action": sorted(as_list(s["Action"])),
            "Resource": [render(r) for r in as_list(s["Resource"])],
            **({"Condition": s["Condition"]} if "Condition" in s else {}),
        }
        for s in statements(policy)
    ]
    assert found == [
        {
            "Sid": "WriteLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group],
        },
        {
            "Sid": "ListBodyShards",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [BODIES],
            "Condition": {"StringLike": {"s3:prefix": f"{shapes.DEPLOYED_BODY_PREFIX}/*"}},
        },
        {
            "Sid": "ReadBodyMetadata",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [f"{BODIES}/{shapes.DEPLOYED_BODY_PREFIX}/*"],
        },
        {
            "Sid": "DeleteOrphanedBodies",
            "Effect": "Allow",
            "Action": ["s3:DeleteObject"],
            "Resource": [f"{BODIES}/{shapes.DEPLOYED_BODY_PREFIX}/*"],
        },
        {
            "Sid": "NeverDeleteDictionaries",
            "Effect": "Deny",
            "Action": ["s3:DeleteObject"],
            "Resource": [f"{BODIES}/{shapes.DEPLOYED_BODY_PREFIX}/_dictionaries/*"],
        },
        {
            "Sid": "ReadAndMarkIndex",
            "Effect": "Allow",
            "Action": ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
            "Resource": [TABLE],
        },
        {
            "Sid": "FindExpiredCondemnations",
            "Effect": "Allow",
            "Action": ["dynamodb:Scan"],
            "Resource": [f"{TABLE}/index/{vhs_shapes.TABLE.condemned_index}"],
        },
        {
            "Sid": "InvokeItselfToFanOutAndContinue",
            "Effect": "Allow",
            "Action": ["lambda:InvokeFunction"],
            "Resource": [FUNCTION],
        },
        # X-Ray has no resource-level permissions (acknowledged in cdk-nag).
        {
            "Sid": None,
            "Effect": "Allow",
            "Action": ["xray:PutTelemetryRecords", "xray:PutTraceSegments"],
            "Resource": ["*"],
        },
    ]


def test_the_self_invoke_arn_is_the_functions_own_without_a_cycle(gc: dict[str, Any]) -> None:
    function_id = logical_id(gc, "AWS::Lambda::Function")
    function = gc["Resources"][function_id]
    # The ARN the role names is the one the function gets: region, account and its fixed name.
    assert FUNCTION.rsplit(":", 1)[1] == function["Properties"]["FunctionName"]
    # ... built from the name, not from the function: the policy does not refer to it.
    assert function_id not in json.dumps(only(gc, "AWS::IAM::Policy"))
    assert logical_id(gc, "AWS::IAM::Policy") in function["DependsOn"]


def test_delete_is_granted_only_to_the_collector_and_only_under_the_body_prefix(
    app: Synthesized,
) -> None:
    deletes = []
    for stack in (app.stacks.store, app.stacks.ingest, app.stacks.changes, app.stacks.maintenance):
        template = app.template_json(stack)
        for type_ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for policy in resources_of(template, type_).values():
                for s in statements(policy):
                    actions = as_list(s["Action"])
                    for action in actions:
                        assert "*" not in action, action
                        assert action != "s3:DeleteObjectVersion", action
                    if "dynamodb:Scan" in actions:
                        # Of the sparse index of condemned items only, never of the table.
                        assert actions == ["dynamodb:Scan"]
                        assert [render(r) for r in as_list(s["Resource"])] == [
                            f"{TABLE}/index/{vhs_shapes.TABLE.condemned_index}"
                        ]
                    if "s3:DeleteObject" in actions:
                        deletes.append(
                            (
                                stack.stack_name,
                                s["Effect"],
                                [render(r) for r in as_list(s["Resource"])],
                            )
                        )
    prefix = f"{BODIES}/{shapes.DEPLOYED_BODY_PREFIX}"
    assert deletes == [
        ("Vhs-prod-Maintenance", "Allow", [f"{prefix}/*"]),
        # The zstd dictionaries under the prefix: never (vhs/bodies/dictionaries.py).
        ("Vhs-prod-Maintenance", "Deny", [f"{prefix}/_dictionaries/*"]),
    ]


def test_the_collector_can_never_act_on_the_whole_bucket(tmp_path: Path) -> None:
    """An empty body prefix would let the collector list and delete anywhere in the bucket:
    it is refused. A nested prefix scopes every permission to it."""
    with pytest.raises(ConfigError, match="bodyPrefix"):
        VhsConfig(stage="prod", body_prefix="")
    template = construct_template(VhsConfig(stage="prod", body_prefix="a/b"), tmp_path)
    by_sid = {s.get("Sid"): s for s in statements(only(template, "AWS::IAM::Policy"))}
    assert render(by_sid["DeleteOrphanedBodies"]["Resource"]).endswith(":s3:::bodies-bucket/a/b/*")
    assert by_sid["ListBodyShards"]["Condition"]["StringLike"]["s3:prefix"] == "a/b/*"
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["VHS_PREFIX"] == "a/b"


# --- the schedule -------------------------------------------------------------------------------


def test_the_rule_runs_the_function_on_the_schedule_with_the_fan_out(gc: dict[str, Any]) -> None:
    rule_id = logical_id(gc, "AWS::Events::Rule")
    rule = gc["Resources"][rule_id]["Properties"]
    assert rule["ScheduleExpression"] == SHAPE.schedule_expression == "rate(1 day)"
    assert rule["State"] == "ENABLED"
    assert "EventPattern" not in rule and "EventBusName" not in rule  # a schedule only
    function_id = logical_id(gc, "AWS::Lambda::Function")
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    assert json.loads(target["Input"]) == {"parallel": SHAPE.parallel} == {"parallel": 8}
    # EventBridge may invoke the function, and only from this rule.
    permission = only(gc, "AWS::Lambda::Permission")["Properties"]
    assert permission == {
        "Action": "lambda:InvokeFunction",
        "FunctionName": {"Fn::GetAtt": [function_id, "Arn"]},
        "Principal": "events.amazonaws.com",
        "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]},
    }


def test_schedule_fan_out_and_grace_come_from_context(tmp_path: Path) -> None:
    config = VhsConfig.from_context(
        {
            "stage": "prod",
            "gcSchedule": "cron(0 3 * * ? *)",
            "gcParallel": "16",
            "gcGrace": "2h",
        }.get
    )
    assert config.gc == dataclasses.replace(
        SHAPE, schedule_expression="cron(0 3 * * ? *)", parallel=16, grace="2h"
    )
    template = construct_template(config, tmp_path)
    rule = only(template, "AWS::Events::Rule")["Properties"]
    assert rule["ScheduleExpression"] == "cron(0 3 * * ? *)"
    assert json.loads(rule["Targets"][0]["Input"]) == {"parallel": 16}
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["VHS_GC_GRACE"] == "2h"


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("gcSchedule", "every day", "schedule"),
        ("gcSchedule", "rate(1 day", "schedule"),
        ("gcParallel", "0", "parallel"),
        ("gcParallel", "257", "parallel"),
        ("gcParallel", "eight", "whole number"),
        ("gcGrace", "an hour", "grace"),
        ("gcGrace", "-1h", "grace"),
    ],
)
def test_bad_gc_context_fails_at_synth(key: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        VhsConfig.from_context({key: value}.get)


@pytest.mark.parametrize("text", ["0", "90", "90s", "30m", "1h", "2d", "1.5h"])
def test_the_shape_accepts_what_the_handler_parses(text: str) -> None:
    assert dataclasses.replace(SHAPE, grace=text).grace == text
    assert parse_duration(text) >= timedelta(0)


def test_the_shape_refuses_a_timeout_lambda_does_not_have() -> None:
    with pytest.raises(ValueError, match="timeout"):
        dataclasses.replace(SHAPE, function_timeout_seconds=901)


# --- the alarm ----------------------------------------------------------------------------------


def test_the_errors_alarm_notifies_the_alarm_topic(gc: dict[str, Any]) -> None:
    (alarm,) = [
        r["Properties"]
        for r in resources_of(gc, "AWS::CloudWatch::Alarm").values()
        if r["Properties"]["AlarmName"] == "Vhs-prod-GcErrors"
    ]
    topic = {"Ref": ssm_parameter(gc, "/vhs/prod/alarm-topic-arn")}
    function = logical_id(gc, "AWS::Lambda::Function")
    assert alarm["AlarmName"] == "Vhs-prod-GcErrors"
    assert alarm["AlarmActions"] == alarm["OKActions"] == [topic]
    assert alarm["TreatMissingData"] == "notBreaching"
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Lambda",
        "Errors",
        "Sum",
    )
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert alarm["Period"] == shapes.ALARMS.period_seconds
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["EvaluationPeriods"]) == (
        "GreaterThanOrEqualToThreshold",
        1,
        1,
    )
    description = alarm["AlarmDescription"]
    assert description.startswith("GC failed: orphans are not being collected")
    assert "no data is at risk" in description and "docs/runbook.md" in description


def test_the_runbook_and_deploy_docs_know_the_alarm_and_the_stack() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    assert "`Vhs-<stage>-GcErrors`" in runbook and "## GC errors" in runbook
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    for name in ("Vhs-<stage>-Maintenance", "GcErrors", "GcFunctionName", "GcRuleName"):
        assert name in deploy, name
    for key in ("gcSchedule", "gcParallel", "gcGrace"):
        assert f"`{key}`" in deploy, key


def test_the_asset_carries_the_collector(app: Synthesized) -> None:
    asset = app.asset
    for name in ("handlers/gc.py", "vhs/maintenance/gc.py", "vhs/keys.py", "vhs/retention.py"):
        assert (asset / name).is_file(), name


def test_the_failures_alarm_watches_what_a_run_could_not_collect(gc: dict[str, Any]) -> None:
    """Ids or shards one run could not collect (a hot id's throttling, an unreadable page)
    do not fail the function: the handler counts them, and this alarm fires on them."""
    (alarm,) = [
        r["Properties"]
        for r in resources_of(gc, "AWS::CloudWatch::Alarm").values()
        if r["Properties"]["AlarmName"] == "Vhs-prod-GcFailures"
    ]
    topic = {"Ref": ssm_parameter(gc, "/vhs/prod/alarm-topic-arn")}
    assert alarm["AlarmActions"] == alarm["OKActions"] == [topic]
    watched = {
        q["MetricStat"]["Metric"]["MetricName"]: q["MetricStat"]["Metric"]["Dimensions"]
        for q in alarm["Metrics"]
        if "MetricStat" in q
    }
    service = [{"Name": "service", "Value": "vhs-gc"}]
    assert watched == {"gc_failed": service, "gc_failed_shards": service}
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "GreaterThanOrEqualToThreshold",
        1,
    )
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    assert "`Vhs-<stage>-GcFailures`" in runbook and "## GC failures" in runbook
