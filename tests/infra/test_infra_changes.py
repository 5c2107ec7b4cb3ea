"""The change feed's stack (infra/changes.py), checked on the synthesized templates."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from infra_support import (
    CHANGES_HANDLER,
    LAMBDA_HANDLER,
    Synthesized,
    as_list,
    logical_id,
    only,
    resources_of,
    ssm_parameter,
    statements,
)

from infra import shapes
from infra.changes import STREAM_LIST_ACTIONS, STREAM_READ_ACTIONS, TOPIC_KEY_ACTIONS
from vhs import shapes as vhs_shapes
from vhs_ops.local.invoke import HANDLERS

SHAPE = vhs_shapes.CHANGES


# --- the stack ----------------------------------------------------------------------------------


def test_the_change_feed_is_a_stateless_stack_of_its_own(
    app: Synthesized, changes: dict[str, Any]
) -> None:
    stack = app.stacks.changes
    assert stack.stack_name == "Vhs-prod-Changes"
    assert {app.stacks.store, app.stacks.ingest} <= set(stack.dependencies)
    text = json.dumps(changes)
    assert "Fn::ImportValue" not in text and "Fn::GetStackOutput" not in text
    assert [n for n, r in changes["Resources"].items() if r.get("DeletionPolicy") == "Retain"] == []
    assert {"ChangeTopicArn", "ChangeDeadLetterQueueUrl", "ChangeFunctionName"} <= set(
        changes["Outputs"]
    )


def test_the_stream_and_alarm_topic_arns_travel_through_ssm(
    changes: dict[str, Any], store: dict[str, Any], ingest: dict[str, Any]
) -> None:
    def written(template: dict[str, Any], name: str) -> Any:
        (value,) = [
            r["Properties"]["Value"]
            for r in resources_of(template, "AWS::SSM::Parameter").values()
            if r["Properties"]["Name"] == name
        ]
        return value

    table = logical_id(store, "AWS::DynamoDB::Table")
    assert written(store, "/vhs/prod/table-stream-arn") == {"Fn::GetAtt": [table, "StreamArn"]}
    topic = logical_id(ingest, "AWS::SNS::Topic")
    assert written(ingest, "/vhs/prod/alarm-topic-arn") == {"Ref": topic}
    # ... and the Changes stack resolves both at deploy time.
    ssm_parameter(changes, "/vhs/prod/table-stream-arn")
    ssm_parameter(changes, "/vhs/prod/alarm-topic-arn")
    change_topic = logical_id(changes, "AWS::SNS::Topic")
    assert written(changes, "/vhs/prod/change-topic-arn") == {"Ref": change_topic}


# --- the topic and the dead-letter queue ----------------------------------------------------------


def test_the_topic_is_fifo_encrypted_with_a_rotated_key_and_tls_only(
    changes: dict[str, Any],
) -> None:
    topic = only(changes, "AWS::SNS::Topic")["Properties"]
    key_id = logical_id(changes, "AWS::KMS::Key")
    assert topic["TopicName"] == "vhs-prod-changes.fifo"
    assert topic["FifoTopic"] is True
    assert topic["ContentBasedDeduplication"] is False  # the handler sets deduplication ids
    assert topic["FifoThroughputScope"] == "MessageGroup"
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert only(changes, "AWS::KMS::Key")["Properties"]["EnableKeyRotation"] is True
    policy = only(changes, "AWS::SNS::TopicPolicy")
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements(policy)
    )


def test_the_dead_letter_queue_is_encrypted_tls_only_and_keeps_14_days(
    changes: dict[str, Any],
) -> None:
    queue = only(changes, "AWS::SQS::Queue")["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == SHAPE.dlq_retention_seconds == 14 * 24 * 3600
    policy = only(changes, "AWS::SQS::QueuePolicy")
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements(policy)
    )


# --- the function and its event source ------------------------------------------------------------


def test_the_function_is_packaged_like_the_ingest_function(
    changes: dict[str, Any], ingest: dict[str, Any]
) -> None:
    mine = only(changes, "AWS::Lambda::Function")["Properties"]
    theirs = only(ingest, "AWS::Lambda::Function")["Properties"]
    for same in ("Runtime", "Architectures", "TracingConfig"):
        assert mine[same] == theirs[same], same
    assert mine["Code"]["S3Key"] == theirs["Code"]["S3Key"]  # the same asset
    (layer,) = mine["Layers"]
    (their_layer,) = theirs["Layers"]
    assert changes["Parameters"][layer["Ref"]] == ingest["Parameters"][their_layer["Ref"]]
    assert mine["Handler"] == CHANGES_HANDLER == "handlers.changes.handler" != LAMBDA_HANDLER
    assert HANDLERS["changes"] == "handlers.changes"
    assert mine["Timeout"] == SHAPE.function_timeout_seconds
    assert mine["MemorySize"] == SHAPE.function_memory_mb
    log_group = only(changes, "AWS::Logs::LogGroup")
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert mine["LoggingConfig"] == {
        "LogGroup": {"Ref": logical_id(changes, "AWS::Logs::LogGroup")}
    }


def test_the_function_environment(changes: dict[str, Any]) -> None:
    env = only(changes, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["VHS_CHANGE_TOPIC_ARN"] == {"Ref": logical_id(changes, "AWS::SNS::Topic")}
    assert env["VHS_BUCKET_NAME"] == {
        "Fn::Join": [
            "",
            ["vhs-prod-bodies-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}],
        ]
    }
    assert env["VHS_PREFIX"] == shapes.DEPLOYED_BODY_PREFIX
    assert env["POWERTOOLS_SERVICE_NAME"] == "vhs-changes"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "VHS/prod"
    assert int(env["VHS_CHANGES_STOP_AT_REMAINING_MS"]) == SHAPE.stop_publishing_at_remaining_ms


def test_the_stream_event_source(changes: dict[str, Any]) -> None:
    mapping_id = logical_id(changes, "AWS::Lambda::EventSourceMapping")
    mapping = changes["Resources"][mapping_id]
    props = mapping["Properties"]
    assert props["EventSourceArn"] == {"Ref": ssm_parameter(changes, "/vhs/prod/table-stream-arn")}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    assert props["MaximumRetryAttempts"] == SHAPE.retry_attempts
    assert 0 <= props["MaximumRetryAttempts"] <= 10_000  # bounded (-1 would be unbounded)
    assert props["MaximumRecordAgeInSeconds"] == SHAPE.max_record_age_seconds
    assert props["MaximumRecordAgeInSeconds"] < vhs_shapes.STREAM_RETENTION_SECONDS
    assert props["BatchSize"] == SHAPE.batch_size
    assert props["ParallelizationFactor"] == SHAPE.parallelization_factor
    dlq = logical_id(changes, "AWS::SQS::Queue")
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [dlq, "Arn"]}}
    }
    # Lambda checks the role when it creates the mapping: the policy must exist first.
    assert logical_id(changes, "AWS::IAM::Policy") in mapping["DependsOn"]


def test_the_role_grants_exactly_what_the_feed_needs(changes: dict[str, Any]) -> None:
    role = only(changes, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    allowed: dict[str, list[Any]] = {}
    for s in statements(only(changes, "AWS::IAM::Policy")):
        assert s["Effect"] == "Allow"
        for action in as_list(s["Action"]):
            assert "*" not in action, action
            allowed.setdefault(action, []).extend(as_list(s["Resource"]))
    stream = {"Ref": ssm_parameter(changes, "/vhs/prod/table-stream-arn")}
    key = {"Fn::GetAtt": [logical_id(changes, "AWS::KMS::Key"), "Arn"]}
    expected = {
        **{action: [stream] for action in STREAM_READ_ACTIONS},
        # ListStreams takes no resource: on the stream ARN it would match no request.
        **{action: ["*"] for action in STREAM_LIST_ACTIONS},
        "sns:Publish": [{"Ref": logical_id(changes, "AWS::SNS::Topic")}],
        **{action: [key] for action in TOPIC_KEY_ACTIONS},
        "sqs:SendMessage": [{"Fn::GetAtt": [logical_id(changes, "AWS::SQS::Queue"), "Arn"]}],
        "logs:CreateLogStream": [
            {"Fn::GetAtt": [logical_id(changes, "AWS::Logs::LogGroup"), "Arn"]}
        ],
        "logs:PutLogEvents": [{"Fn::GetAtt": [logical_id(changes, "AWS::Logs::LogGroup"), "Arn"]}],
        # X-Ray has no resource-level permissions (acknowledged in cdk-nag).
        "xray:PutTraceSegments": ["*"],
        "xray:PutTelemetryRecords": ["*"],
    }
    # The store's zstd dictionaries, for a patch of a body packed with one: nothing else of
    # the bucket.
    (dictionaries,) = allowed.pop("s3:GetObject")
    joined = "".join(p if isinstance(p, str) else "{}" for p in dictionaries["Fn::Join"][1])
    assert joined == "arn:{}:s3:::vhs-prod-bodies-{}-{}/bodies/_dictionaries/*"
    assert allowed == expected
    # "*" in a statement of its own: the stream's three actions stay on the stream only.
    (listing,) = [
        s
        for s in statements(only(changes, "AWS::IAM::Policy"))
        if "dynamodb:ListStreams" in as_list(s["Action"])
    ]
    assert listing == {
        "Sid": "ListTableStreams",
        "Effect": "Allow",
        "Action": "dynamodb:ListStreams",
        "Resource": "*",
    }


# --- alarms -------------------------------------------------------------------------------------


def test_alarms_notify_the_existing_alarm_topic(changes: dict[str, Any]) -> None:
    alarms = {
        r["Properties"]["AlarmName"].rsplit("-", 1)[1]: r["Properties"]
        for r in resources_of(changes, "AWS::CloudWatch::Alarm").values()
    }
    assert set(alarms) == {"ChangeDeadLetters", "ChangeFunctionErrors", "ChangeIteratorAge"}
    topic = {"Ref": ssm_parameter(changes, "/vhs/prod/alarm-topic-arn")}
    for name, alarm in alarms.items():
        assert alarm["AlarmName"] == f"Vhs-prod-{name}"
        assert alarm["AlarmActions"] == alarm["OKActions"] == [topic], name
        assert alarm["TreatMissingData"] == "notBreaching"
    dlq, shape = alarms["ChangeDeadLetters"], vhs_shapes.DLQ_ALARM
    queue = logical_id(changes, "AWS::SQS::Queue")
    assert dlq["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert (dlq["MetricName"], dlq["Statistic"], dlq["Period"]) == (
        shape.metric_name,
        shape.statistic,
        shape.period_seconds,
    )
    assert (dlq["ComparisonOperator"], dlq["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    errors = alarms["ChangeFunctionErrors"]
    function = logical_id(changes, "AWS::Lambda::Function")
    assert errors["MetricName"] == "Errors" and errors["Threshold"] == 1
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    age = alarms["ChangeIteratorAge"]
    assert age["MetricName"] == "IteratorAge" and age["Statistic"] == "Maximum"
    assert age["Threshold"] == SHAPE.iterator_age_alarm_seconds * 1000


# --- the shared shape -----------------------------------------------------------------------------


def test_the_shape_refuses_unbounded_retries_and_ages_past_the_stream() -> None:
    with pytest.raises(ValueError, match="retry attempts"):
        dataclasses.replace(SHAPE, retry_attempts=-1)
    with pytest.raises(ValueError, match="record age"):
        dataclasses.replace(SHAPE, max_record_age_seconds=vhs_shapes.STREAM_RETENTION_SECONDS)
    with pytest.raises(ValueError, match="cut-off"):
        dataclasses.replace(
            SHAPE, stop_publishing_at_remaining_ms=SHAPE.function_timeout_seconds * 1000
        )


def test_the_asset_carries_the_change_feed_handler(app: Synthesized) -> None:
    asset = app.asset
    for name in ("handlers/changes.py", "vhs/changes/feed.py", "vhs/changes/stream.py"):
        assert (asset / name).is_file(), name
