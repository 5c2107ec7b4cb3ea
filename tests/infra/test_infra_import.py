"""The bulk import's stack (infra/bulk_import.py), checked on the synthesized templates."""

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
    synthesize,
)

from vhs import settings, shapes

SHAPE = shapes.BULK_IMPORT
BODIES = "arn:${AWS::Partition}:s3:::vhs-prod-bodies-${AWS::AccountId}-${AWS::Region}"
STAGING = "arn:${AWS::Partition}:s3:::vhs-prod-staging-${AWS::AccountId}-${AWS::Region}"
TABLE = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/vhs-prod-records"
STATES = "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}"


@pytest.fixture(scope="module")
def imports(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.bulk_import)


def definition(template: dict[str, Any]) -> dict[str, Any]:
    """The state machine's definition, references rendered as ${...}."""
    machine = only(template, "AWS::StepFunctions::StateMachine")["Properties"]
    return json.loads(render(machine["DefinitionString"]))


def granted(template: dict[str, Any], role: str) -> dict[str, tuple[list[str], list[str]]]:
    """{Sid: (actions, resources)} of the policy of the role whose logical id starts `role`."""
    (policy,) = [
        p
        for p in resources_of(template, "AWS::IAM::Policy").values()
        if render(p["Properties"]["Roles"][0]).startswith(f"${{{role}")
    ]
    return {
        s.get("Sid", "XRay"): (
            sorted(as_list(s["Action"])),
            sorted(render(r) for r in as_list(s["Resource"])),
        )
        for s in statements(policy)
    }


def test_the_import_is_a_stateless_stack_of_its_own(app: Synthesized, imports: dict) -> None:
    stack = app.stacks.bulk_import
    assert stack.stack_name == "Vhs-prod-Import"
    assert {app.stacks.store, app.stacks.ingest} <= set(stack.dependencies)
    text = json.dumps(imports)
    assert "Fn::ImportValue" not in text and "Fn::GetStackOutput" not in text
    assert [n for n, r in imports["Resources"].items() if r.get("DeletionPolicy") == "Retain"] == []
    assert set(imports["Outputs"]) == {
        "ImportStateMachineArn",
        "ImportBucketName",
        "ImportPrefix",
        "ImportResultsPrefix",
        "ImportFunctionName",
    }


def test_a_distributed_map_imports_the_plans_chunks_with_bounded_concurrency(
    imports: dict[str, Any],
) -> None:
    states = definition(imports)
    assert states["StartAt"] == "Plan"
    assert states["States"]["Plan"]["Next"] == "Import"
    assert states["States"]["Plan"]["Parameters"] == {
        "plan.$": "$",
        "execution.$": "$$.Execution.Name",
    }
    run = states["States"]["Import"]
    assert run["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        # STANDARD: a chunk's 900 s and its retries' waits exceed EXPRESS's 5 minutes.
        "ExecutionType": "STANDARD",
    }
    assert run["ItemReader"] == {
        "Resource": "arn:${AWS::Partition}:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSONL"},
        "Parameters": {
            "Bucket": "vhs-prod-staging-${AWS::AccountId}-${AWS::Region}",
            "Key.$": "$.plan.manifest_key",
        },
    }
    assert run["ItemBatcher"] == {
        "MaxItemsPerBatch": SHAPE.max_items_per_batch,
        "BatchInput": {"execution.$": "$$.Execution.Name", "mapping.$": "$.plan.mapping"},
    }
    assert run["MaxConcurrency"] == SHAPE.max_concurrency
    assert run.get("ToleratedFailurePercentage", 0) == SHAPE.tolerated_failure_percentage
    assert run["ResultWriter"]["Parameters"]["Prefix"] == shapes.IMPORT_RESULTS_PREFIX
    (task,) = run["ItemProcessor"]["States"].values()
    assert task["Resource"].startswith("${BulkImportFunction")
    errors = [r["ErrorEquals"] for r in task["Retry"]]
    assert errors[-1] == ["ImportIncomplete"]
    # Bad input and a replaced export fail the chunk at once (MaxAttempts 0), matched first.
    (permanent,) = [r for r in task["Retry"] if "ExportChanged" in r["ErrorEquals"]]
    assert "InvalidInput" in permanent["ErrorEquals"] and permanent["MaxAttempts"] == 0
    assert "ImportIncomplete" not in permanent["ErrorEquals"]
    plan_permanent = [
        r for r in states["States"]["Plan"]["Retry"] if "InvalidInput" in r["ErrorEquals"]
    ]
    assert [r["MaxAttempts"] for r in plan_permanent] == [0]


def test_executions_are_logged_without_their_data_and_traced(imports: dict[str, Any]) -> None:
    machine = only(imports, "AWS::StepFunctions::StateMachine")["Properties"]
    assert machine["StateMachineType"] == "STANDARD"
    assert machine["TracingConfiguration"] == {"Enabled": True}
    assert machine["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["LoggingConfiguration"]["IncludeExecutionData"] is False
    assert machine["StateMachineName"] == "vhs-prod-import"


def test_the_function_reads_imports_writes_results_and_writes_the_store_as_ingest_does(
    imports: dict[str, Any],
) -> None:
    assert granted(imports, "BulkImportRole") == {
        "WriteLogs": (
            ["logs:CreateLogStream", "logs:PutLogEvents"],
            ["${BulkImportLogs1AA37305.Arn}"],
        ),
        "ListImportFiles": (["s3:ListBucket"], [STAGING]),
        "ReadImportFiles": (["s3:GetObject"], [f"{STAGING}/imports/*"]),
        "WriteResults": (["s3:PutObject"], [f"{STAGING}/import-results/*"]),
        # Only reports are ever removed (a retried chunk's stale one), never results.
        "ReplaceReports": (["s3:DeleteObject"], [f"{STAGING}/import-results/*/reports/*"]),
        "WriteBodies": (["s3:AbortMultipartUpload", "s3:PutObject"], [f"{BODIES}/bodies/*"]),
        "ReadDictionaries": (["s3:GetObject"], [f"{BODIES}/bodies/_dictionaries/*"]),
        "ReadStagedPayloads": (["s3:GetObject"], [f"{STAGING}/incoming/*"]),
        "TellMissingPayloads": (["s3:ListBucket"], [STAGING]),
        "ReadAndWriteIndex": (["dynamodb:GetItem", "dynamodb:UpdateItem"], [TABLE]),
        "XRay": (["xray:PutTelemetryRecords", "xray:PutTraceSegments"], ["*"]),
    }
    # It lists two prefixes of the staging bucket and nothing else: the export's files, and
    # the producers' payloads a line may point to (for a 404 where one is missing).
    listings = {
        s["Sid"]: s["Condition"]
        for p in resources_of(imports, "AWS::IAM::Policy").values()
        for s in statements(p)
        if s.get("Sid") in ("ListImportFiles", "TellMissingPayloads")
    }
    assert listings == {
        "ListImportFiles": {"StringLike": {"s3:prefix": "imports/*"}},
        "TellMissingPayloads": {"StringLike": {"s3:prefix": "incoming/*"}},
    }


def test_the_state_machine_reads_no_export_and_runs_only_its_own_children(
    imports: dict[str, Any],
) -> None:
    function = logical_id(imports, "AWS::Lambda::Function")
    grants = granted(imports, "BulkImportMachineRole")
    assert grants["InvokeImportFunction"] == (["lambda:InvokeFunction"], [f"${{{function}.Arn}}"])
    assert grants["ReadManifestWriteResults"] == (
        [
            "s3:AbortMultipartUpload",
            "s3:GetObject",
            "s3:ListMultipartUploadParts",
            "s3:PutObject",
        ],
        [f"{STAGING}/import-results/*"],
    )
    assert grants["StartChildExecutions"] == (
        ["states:StartExecution"],
        [f"{STATES}:stateMachine:vhs-prod-import"],
    )
    assert grants["DescribeAndStopChildExecutions"] == (
        ["states:DescribeExecution", "states:StopExecution"],
        [f"{STATES}:execution:vhs-prod-import:*"],
    )
    assert grants["RedriveMapRun"] == (
        ["states:RedriveExecution"],
        [f"{STATES}:execution:vhs-prod-import/Import:*"],
    )
    assert set(grants) == {
        "InvokeImportFunction",
        "ReadManifestWriteResults",
        "StartChildExecutions",
        "DescribeAndStopChildExecutions",
        "RedriveMapRun",
        "DeliverExecutionLogs",
        "TraceExecutions",
    }
    # Only these two policies: CDK's own grants (the whole bucket, every function version)
    # are never attached.
    assert len(resources_of(imports, "AWS::IAM::Policy")) == 2


def test_the_function_is_told_where_imports_live_and_of_the_store(imports: dict) -> None:
    function = only(imports, "AWS::Lambda::Function")["Properties"]
    assert function["Handler"] == settings.BULK_IMPORT_FUNCTION.handler
    assert function["Timeout"] == SHAPE.function_timeout_seconds
    assert function["MemorySize"] == SHAPE.function_memory_mb
    environment = {k: render(v) for k, v in function["Environment"]["Variables"].items()}
    assert (
        environment[settings.IMPORT_BUCKET] == "vhs-prod-staging-${AWS::AccountId}-${AWS::Region}"
    )
    assert environment[settings.IMPORT_PREFIX] == shapes.IMPORT_PREFIX
    assert environment[settings.IMPORT_RESULTS_PREFIX] == shapes.IMPORT_RESULTS_PREFIX
    assert environment[settings.TABLE_NAME] == "vhs-prod-records"
    assert environment[settings.STAGING_PREFIX] == shapes.STAGING_PREFIX
    assert environment[settings.IMPORT_CHUNK_LINES] == str(SHAPE.chunk_lines)


def test_failed_or_timed_out_imports_and_function_errors_alarm(imports: dict[str, Any]) -> None:
    alarms = {
        r["Properties"]["AlarmName"]: r["Properties"]
        for r in resources_of(imports, "AWS::CloudWatch::Alarm").values()
    }
    assert set(alarms) == {
        "Vhs-prod-ImportExecutionsFailed",
        "Vhs-prod-ImportExecutionsTimedOut",
        "Vhs-prod-ImportErrors",
    }
    assert alarms["Vhs-prod-ImportExecutionsFailed"]["MetricName"] == "ExecutionsFailed"
    assert alarms["Vhs-prod-ImportExecutionsTimedOut"]["MetricName"] == "ExecutionsTimedOut"
    topic = ssm_parameter(imports, "/vhs/prod/alarm-topic-arn")
    for alarm in alarms.values():
        assert [render(a) for a in alarm["AlarmActions"]] == [f"${{{topic}}}"]
        assert [render(a) for a in alarm["OKActions"]] == [f"${{{topic}}}"]


def test_an_import_bucket_of_its_own_and_the_concurrency_come_from_context(
    tmp_path: Path,
) -> None:
    synthesized = synthesize(
        tmp_path,
        nag=False,
        context={"stage": "prod", "importBucket": "catalogue-exports", "importConcurrency": "7"},
    )
    template = synthesized.template_json(synthesized.stacks.bulk_import)
    run = definition(template)["States"]["Import"]
    assert run["MaxConcurrency"] == 7
    assert run["ItemReader"]["Parameters"]["Bucket"] == "catalogue-exports"
    grants = granted(template, "BulkImportRole")
    exports = "arn:${AWS::Partition}:s3:::catalogue-exports"
    assert grants["ReadImportFiles"] == (["s3:GetObject"], [f"{exports}/imports/*"])
    assert grants["WriteResults"] == (["s3:PutObject"], [f"{exports}/import-results/*"])
    # Staged payloads are still the staging bucket's.
    assert grants["ReadStagedPayloads"] == (["s3:GetObject"], [f"{STAGING}/incoming/*"])
