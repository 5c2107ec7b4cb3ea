"""Every production setting the issue asks for, checked on the synthesized templates."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match
from infra_support import (
    LAMBDA_HANDLER,
    Synthesized,
    as_list,
    only,
    render,
    resources_of,
    statements,
)

from infra import shapes
from infra.config import powertools_ssm_parameter
from vhs import shapes as vhs_shapes

BODY_PREFIX = shapes.DEPLOYED_BODY_PREFIX


# --- stacks -----------------------------------------------------------------------------------


def test_stacks_are_named_by_stage_and_split_stateful_from_stateless(app: Synthesized) -> None:
    assert app.stacks.store.stack_name == "Vhs-prod-Store"
    assert app.stacks.ingest.stack_name == "Vhs-prod-Ingest"
    assert app.stacks.store in app.stacks.ingest.dependencies


def test_stateful_resources_are_retained_and_nothing_else_is(
    store: dict[str, Any], ingest: dict[str, Any]
) -> None:
    data = {"AWS::S3::Bucket", "AWS::DynamoDB::Table"}
    kept = {
        name: r
        for name, r in store["Resources"].items()
        if r["Type"] in data and r.get("DeletionPolicy") == "Retain"
    }
    assert len(kept) == 4  # bodies, staging, access logs, table
    for r in kept.values():
        assert r["UpdateReplacePolicy"] == "Retain"
    retained_in_ingest = [
        name for name, r in ingest["Resources"].items() if r.get("DeletionPolicy") == "Retain"
    ]
    assert retained_in_ingest == []


def test_the_stateless_stack_needs_nothing_from_the_stateful_one(ingest: dict[str, Any]) -> None:
    text = json.dumps(ingest)
    assert "Fn::ImportValue" not in text
    assert "Fn::GetStackOutput" not in text


def test_outputs(store: dict[str, Any], ingest: dict[str, Any]) -> None:
    assert {"TableName", "BucketName", "StagingBucketName", "BodyPrefix"} <= set(store["Outputs"])
    assert {"QueueUrl", "DeadLetterQueueUrl", "AlarmTopicArn", "ProducerPolicyArn"} <= set(
        ingest["Outputs"]
    )


# --- the store --------------------------------------------------------------------------------


def buckets(store: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        render(r["Properties"]["BucketName"]).split("-")[2]: r
        for r in resources_of(store, "AWS::S3::Bucket").values()
    }


def test_every_bucket_blocks_public_access_encrypts_and_aborts_multipart(
    store: dict[str, Any],
) -> None:
    found = buckets(store)
    assert set(found) == {"bodies", "staging", "logs"}
    for role, bucket in found.items():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, role
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
        assert {
            "AbortIncompleteMultipartUpload": {
                "DaysAfterInitiation": vhs_shapes.BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS
            },
            "Id": "abort-incomplete-multipart-uploads",
            "Status": "Enabled",
        } in props["LifecycleConfiguration"]["Rules"]
        assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]


def test_every_bucket_denies_requests_without_tls(store: dict[str, Any]) -> None:
    policies = resources_of(store, "AWS::S3::BucketPolicy")
    assert len(policies) == 3
    for policy in policies.values():
        denies = [s for s in statements(policy) if s["Effect"] == "Deny"]
        assert any(s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)
        assert any(
            s.get("Condition") == {"NumericLessThan": {"s3:TlsVersion": 1.2}} for s in denies
        )


def test_body_and_staging_buckets_log_access_and_keep_their_own_lifecycle(
    store: dict[str, Any],
) -> None:
    found = buckets(store)
    logs_bucket = next(name for name, r in store["Resources"].items() if r is found["logs"])
    for role in ("bodies", "staging"):
        logging = found[role]["Properties"]["LoggingConfiguration"]
        assert logging["DestinationBucketName"] == {"Ref": logs_bucket}
        assert logging["LogFilePrefix"] == f"{role}/"
    bodies = found["bodies"]["Properties"]
    assert bodies["VersioningConfiguration"] == {"Status": "Enabled"}
    assert {
        "ExpiredObjectDeleteMarker": True,
        "Id": "expire-noncurrent-bodies",
        "NoncurrentVersionExpiration": {"NoncurrentDays": shapes.BUCKET_NONCURRENT_VERSION_DAYS},
        "Status": "Enabled",
    } in bodies["LifecycleConfiguration"]["Rules"]
    staging_rules = found["staging"]["Properties"]["LifecycleConfiguration"]["Rules"]
    local = vhs_shapes.staging_expiry_rule()  # what `vhs local up` applies
    assert {
        "ExpirationInDays": local["Expiration"]["Days"],
        "Id": local["ID"],
        "Status": local["Status"],
    } in staging_rules
    assert local["Filter"] == {"Prefix": ""}
    # A staged payload outlives every message that can point at it.
    assert vhs_shapes.INGEST.dlq_retention_seconds < vhs_shapes.STAGING_EXPIRATION_DAYS * 86400


def test_table_settings_come_from_the_shared_shape(store: dict[str, Any]) -> None:
    table = only(store, "AWS::DynamoDB::Table")
    props = table["Properties"]
    shape = vhs_shapes.TABLE.create_table_kwargs("ignored")
    assert props["KeySchema"] == shape["KeySchema"]
    assert props["AttributeDefinitions"] == shape["AttributeDefinitions"]
    # The sparse index of condemned items (docs/gc.md), keys only.
    assert props["GlobalSecondaryIndexes"] == shape["GlobalSecondaryIndexes"]
    assert shape["GlobalSecondaryIndexes"][0]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert props["BillingMode"] == shape["BillingMode"] == "PAY_PER_REQUEST"
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["TableName"] == "vhs-prod-records"
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
    assert "ProvisionedThroughput" not in props


def test_store_parameters_tell_readers_where_the_store_is(store: dict[str, Any]) -> None:
    names = {r["Properties"]["Name"] for r in resources_of(store, "AWS::SSM::Parameter").values()}
    assert names == {
        "/vhs/prod/table-name",
        "/vhs/prod/bucket-name",
        "/vhs/prod/body-prefix",
        "/vhs/prod/table-stream-arn",  # the change feed's stack reads it (stacks.py)
    }


# --- the queues ---------------------------------------------------------------------------------


def queues(ingest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    found = resources_of(ingest, "AWS::SQS::Queue")
    assert len(found) == 2
    (queue,) = [r for r in found.values() if "RedrivePolicy" in r["Properties"]]
    (dlq,) = [r for r in found.values() if "RedrivePolicy" not in r["Properties"]]
    return queue["Properties"], dlq["Properties"]


def test_queue_and_dlq_follow_the_shared_shape(ingest: dict[str, Any]) -> None:
    queue, dlq = queues(ingest)
    shape = vhs_shapes.INGEST
    function = only(ingest, "AWS::Lambda::Function")["Properties"]
    assert function["Timeout"] == shape.function_timeout_seconds
    assert queue["VisibilityTimeout"] == shape.visibility_timeout_seconds
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert queue["MessageRetentionPeriod"] == shape.queue_retention_seconds
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["MaximumMessageSize"] == dlq["MaximumMessageSize"] == shape.max_message_bytes
    # The local stack creates its queues from the same helper.
    attributes = shape.queue_attributes("arn:aws:sqs:us-east-1:123456789012:dlq")
    assert int(attributes["VisibilityTimeout"]) == queue["VisibilityTimeout"]
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 5
    assert int(shape.dlq_attributes()["MessageRetentionPeriod"]) == dlq["MessageRetentionPeriod"]
    assert int(attributes["MaximumMessageSize"]) == queue["MaximumMessageSize"]


def test_queues_are_encrypted_and_deny_requests_without_tls(ingest: dict[str, Any]) -> None:
    for props in queues(ingest):
        assert props["SqsManagedSseEnabled"] is True
    policies = resources_of(ingest, "AWS::SQS::QueuePolicy")
    assert len(policies) == 2
    for policy in policies.values():
        assert any(
            s["Effect"] == "Deny"
            and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements(policy)
        )


# --- the function -------------------------------------------------------------------------------


def test_function_runtime_architecture_tracing_and_logs(ingest: dict[str, Any]) -> None:
    props = only(ingest, "AWS::Lambda::Function")["Properties"]
    assert props["Runtime"] == "python3.14"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == LAMBDA_HANDLER == "handlers.ingest.handler"
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["MemorySize"] == vhs_shapes.INGEST.function_memory_mb
    assert props["EphemeralStorage"] == {"Size": vhs_shapes.INGEST.function_ephemeral_storage_mb}
    assert "ReservedConcurrentExecutions" not in props
    log_group = only(ingest, "AWS::Logs::LogGroup")
    assert log_group["Properties"]["RetentionInDays"] == 30
    (log_group_id,) = resources_of(ingest, "AWS::Logs::LogGroup")
    assert props["LoggingConfig"] == {"LogGroup": {"Ref": log_group_id}}


def test_powertools_comes_from_the_managed_layer_of_the_pinned_release(
    ingest: dict[str, Any],
) -> None:
    (layer,) = only(ingest, "AWS::Lambda::Function")["Properties"]["Layers"]
    parameter = ingest["Parameters"][layer["Ref"]]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert parameter["Default"] == powertools_ssm_parameter()
    assert parameter["Default"] == "/aws/service/powertools/python/arm64/python3.14/3.37.0"


def test_function_environment(ingest: dict[str, Any]) -> None:
    env = only(ingest, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    queues_by_id = resources_of(ingest, "AWS::SQS::Queue")
    (dlq_id,) = [k for k, r in queues_by_id.items() if "RedrivePolicy" not in r["Properties"]]
    assert env["VHS_TABLE_NAME"] == "vhs-prod-records"
    assert render(env["VHS_BUCKET_NAME"]) == "vhs-prod-bodies-${AWS::AccountId}-${AWS::Region}"
    assert render(env["VHS_STAGING_BUCKET"]) == (
        "vhs-prod-staging-${AWS::AccountId}-${AWS::Region}"
    )
    assert env["VHS_STAGING_PREFIX"] == vhs_shapes.STAGING_PREFIX  # ingest reads only there
    assert env["VHS_PREFIX"] == BODY_PREFIX
    assert env["VHS_DLQ_URL"] == {"Ref": dlq_id}
    assert env["POWERTOOLS_SERVICE_NAME"] == "vhs-ingest"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "VHS/prod"
    assert env["LOG_LEVEL"] == "INFO"


def test_event_source_reports_batch_failures_with_maximum_concurrency(
    ingest: dict[str, Any],
) -> None:
    mapping = only(ingest, "AWS::Lambda::EventSourceMapping")["Properties"]
    shape = vhs_shapes.INGEST
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == shape.batch_size
    assert mapping["MaximumBatchingWindowInSeconds"] == shape.max_batching_window_seconds
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": shape.max_concurrency}


def test_asset_is_the_lambdas_folder_without_build_debris(app: Synthesized) -> None:
    asset = app.asset
    files = {str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file()}
    assert "handlers/ingest.py" in files
    assert "vhs/store.py" in files
    assert "vhs/shapes/__init__.py" in files
    assert not [f for f in files if "__pycache__" in f or ".egg-info" in f or f.endswith(".pyc")]


# --- least privilege ----------------------------------------------------------------------------


def role_statements(ingest: dict[str, Any]) -> list[dict[str, Any]]:
    (role_id,) = resources_of(ingest, "AWS::IAM::Role")
    found = []
    for policy in resources_of(ingest, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            found += statements(policy)
    return found


def bucket_arn(role: str) -> str:
    return "arn:${AWS::Partition}:s3:::vhs-prod-" + role + "-${AWS::AccountId}-${AWS::Region}"


def grants(stmts: list[dict[str, Any]]) -> dict[str, set[str]]:
    """action -> the resources it is allowed on (rendered)."""
    allowed: dict[str, set[str]] = {}
    for s in stmts:
        assert s["Effect"] == "Allow"
        for action in as_list(s["Action"]):
            allowed.setdefault(action, set()).update(render(r) for r in as_list(s["Resource"]))
    return allowed


def test_ingest_role_has_no_managed_policies(ingest: dict[str, Any]) -> None:
    role = only(ingest, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }


def test_ingest_role_grants_exactly_the_actions_the_handler_calls(
    ingest: dict[str, Any],
) -> None:
    allowed = grants(role_statements(ingest))
    bodies = bucket_arn("bodies")
    staging = bucket_arn("staging")
    table = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/vhs-prod-records"
    queue_ids = resources_of(ingest, "AWS::SQS::Queue")
    (dlq_id,) = [k for k, r in queue_ids.items() if "RedrivePolicy" not in r["Properties"]]
    (queue_id,) = [k for k, r in queue_ids.items() if "RedrivePolicy" in r["Properties"]]
    (log_group_id,) = resources_of(ingest, "AWS::Logs::LogGroup")
    assert allowed == {
        "s3:PutObject": {f"{bodies}/{BODY_PREFIX}/*", f"{staging}/dead-letters/*"},
        # Producers' payloads only (never dead-letters/); bodies are written, never read;
        # the store's zstd dictionaries are read (the newest packs, any one decodes).
        "s3:GetObject": {
            f"{staging}/{vhs_shapes.STAGING_PREFIX}*",
            f"{bodies}/{BODY_PREFIX}/_dictionaries/*",
        },
        # So that a missing payload is a 404, not a 403: under incoming/ only (below).
        "s3:ListBucket": {staging},
        "s3:AbortMultipartUpload": {f"{bodies}/{BODY_PREFIX}/*"},
        "dynamodb:GetItem": {table},
        "dynamodb:UpdateItem": {table},
        "sqs:SendMessage": {f"${{{dlq_id}.Arn}}"},
        "sqs:ReceiveMessage": {f"${{{queue_id}.Arn}}"},
        "sqs:DeleteMessage": {f"${{{queue_id}.Arn}}"},
        "sqs:ChangeMessageVisibility": {f"${{{queue_id}.Arn}}"},
        "sqs:GetQueueAttributes": {f"${{{queue_id}.Arn}}"},
        "sqs:GetQueueUrl": {f"${{{queue_id}.Arn}}"},
        "logs:CreateLogStream": {f"${{{log_group_id}.Arn}}"},
        "logs:PutLogEvents": {f"${{{log_group_id}.Arn}}"},
        # X-Ray has no resource-level permissions (acknowledged in cdk-nag).
        "xray:PutTraceSegments": {"*"},
        "xray:PutTelemetryRecords": {"*"},
    }
    (listing,) = [s for s in role_statements(ingest) if "s3:ListBucket" in as_list(s["Action"])]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": f"{vhs_shapes.STAGING_PREFIX}*"}}


def test_no_policy_anywhere_has_wildcard_actions_scan_or_delete(
    store: dict[str, Any], ingest: dict[str, Any]
) -> None:
    forbidden = {"dynamodb:Scan", "s3:DeleteObject", "s3:DeleteObjectVersion"}
    for template in (store, ingest):
        for type_ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for policy in resources_of(template, type_).values():
                for s in statements(policy):
                    for action in as_list(s["Action"]):
                        assert "*" not in action, action
                        assert action not in forbidden, action


def test_producer_policy_can_only_send_and_stage(ingest: dict[str, Any]) -> None:
    policy = only(ingest, "AWS::IAM::ManagedPolicy")
    stmts = statements(policy)
    # Never under dead-letters/: the function's dead letters and the receipts that make their
    # reasons believed (a producer that wrote one could vouch for a forged reason).
    denied = [s for s in stmts if s["Effect"] == "Deny"]
    assert [
        (sorted(as_list(s["Action"])), [render(r) for r in as_list(s["Resource"])]) for s in denied
    ] == [
        (
            ["s3:AbortMultipartUpload", "s3:PutObject"],
            [bucket_arn("staging") + "/" + vhs_shapes.DEAD_LETTER_STAGING_PREFIX + "*"],
        )
    ]
    assert vhs_shapes.DEAD_LETTER_RECEIPT_PREFIX.startswith(vhs_shapes.DEAD_LETTER_STAGING_PREFIX)
    allowed = grants([s for s in stmts if s["Effect"] == "Allow"])
    (queue_id,) = [
        k
        for k, r in resources_of(ingest, "AWS::SQS::Queue").items()
        if "RedrivePolicy" in r["Properties"]
    ]
    staging = bucket_arn("staging") + "/" + vhs_shapes.STAGING_PREFIX + "*"
    assert allowed == {
        "sqs:SendMessage": {f"${{{queue_id}.Arn}}"},
        "s3:PutObject": {staging},
        "s3:AbortMultipartUpload": {staging},
    }


# --- alarms and dashboard -------------------------------------------------------------------------


def alarms(ingest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["AlarmName"].rsplit("-", 1)[1]: r["Properties"]
        for r in resources_of(ingest, "AWS::CloudWatch::Alarm").values()
    }


def test_every_alarm_sends_alarm_and_ok_to_the_topic(ingest: dict[str, Any]) -> None:
    (topic_id,) = resources_of(ingest, "AWS::SNS::Topic")
    found = alarms(ingest)
    assert set(found) == {
        "DeadLetters",
        "FunctionErrors",
        "FunctionThrottles",
        "QueueAge",
        "TableThrottles",
    }
    for name, alarm in found.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
        assert alarm["OKActions"] == [{"Ref": topic_id}], name
        assert alarm["TreatMissingData"] == "notBreaching", name


def test_dead_letter_alarm_fires_on_the_first_message(ingest: dict[str, Any]) -> None:
    alarm = alarms(ingest)["DeadLetters"]
    (dlq_id,) = [
        k
        for k, r in resources_of(ingest, "AWS::SQS::Queue").items()
        if "RedrivePolicy" not in r["Properties"]
    ]
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}
    ]
    assert alarm["Statistic"] == "Maximum"
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] == 1
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["Period"] == 60
    # The same definition the local stack's alarm evaluator uses.
    shape = vhs_shapes.DLQ_ALARM
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        shape.metric_name,
        shape.statistic,
        shape.period_seconds,
    )
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["EvaluationPeriods"]) == (
        shape.comparison_operator,
        shape.threshold,
        shape.evaluation_periods,
    )


def test_function_queue_age_and_table_alarms(ingest: dict[str, Any]) -> None:
    found = alarms(ingest)
    assert found["FunctionErrors"]["MetricName"] == "Errors"
    assert found["FunctionThrottles"]["MetricName"] == "Throttles"
    age = found["QueueAge"]
    assert age["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert age["ComparisonOperator"] == "GreaterThanThreshold"
    assert age["Threshold"] == shapes.ALARMS.oldest_message_age_seconds == 900
    table = found["TableThrottles"]
    metrics = [m["MetricStat"]["Metric"] for m in table["Metrics"] if "MetricStat" in m]
    assert {m["MetricName"] for m in metrics} == {"ThrottledRequests"}
    operations = {d["Value"] for m in metrics for d in m["Dimensions"] if d["Name"] == "Operation"}
    assert operations == {"GetItem", "BatchGetItem", "UpdateItem"}


def test_alarm_topic_is_encrypted_tls_only_and_open_to_cloudwatch(
    ingest: dict[str, Any], app: Synthesized
) -> None:
    template = app.ingest
    (key_id,) = resources_of(ingest, "AWS::KMS::Key")
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}}
    )
    # CloudWatch may use the key for this account's alarms only.
    key_statements = ingest["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    (cloudwatch,) = [
        s for s in key_statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert cloudwatch["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    }
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ),
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "sns:Publish",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                            }
                        ),
                    ]
                )
            }
        },
    )


def test_alarm_email_subscription_comes_from_context(ingest: dict[str, Any]) -> None:
    subscription = only(ingest, "AWS::SNS::Subscription")["Properties"]
    assert subscription["Protocol"] == "email"
    assert subscription["Endpoint"] == "oncall@example.com"


def test_dashboard_shows_the_pipeline(ingest: dict[str, Any]) -> None:
    dashboard = only(ingest, "AWS::CloudWatch::Dashboard")["Properties"]
    assert dashboard["DashboardName"] == "Vhs-prod-pipeline"
    body = render(dashboard["DashboardBody"])
    for needle in (
        "ApproximateAgeOfOldestMessage",
        "ApproximateNumberOfMessagesVisible",
        "Invocations",
        "Duration",
        "ConsumedWriteCapacityUnits",
        "VHS/prod",
        "alarm",
    ):
        assert needle in body, needle
