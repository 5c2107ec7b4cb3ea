"""cdk-nag (through Validations) and cfn-lint gate the templates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from infra_support import Synthesized, synthesize

from infra import nag

# Every finding this app acknowledges, and where. A new acknowledgement must be added here,
# so it is reviewed rather than slipped in.
EXPECTED_ACKNOWLEDGEMENTS = {
    ("AwsSolutions-IAM5[Resource::*]", "Vhs-prod-Ingest/Ingest/Role/DefaultPolicy/Resource"),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-bodies-<AWS::AccountId>-<AWS::Region>/bodies/*]",
        "Vhs-prod-Ingest/Ingest/Role/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-staging-<AWS::AccountId>-<AWS::Region>/incoming/*]",
        "Vhs-prod-Ingest/Ingest/Role/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-staging-<AWS::AccountId>-<AWS::Region>/dead-letters/*]",
        "Vhs-prod-Ingest/Ingest/Role/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-staging-<AWS::AccountId>-<AWS::Region>/incoming/*]",
        "Vhs-prod-Ingest/Ingest/ProducerPolicy/Resource",
    ),
    # GetObject of the store's zstd dictionaries (infra/store.py, dictionary_arn), named by
    # their content's hash: for the store's writers and the change feed.
    *(
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
            "vhs-prod-bodies-<AWS::AccountId>-<AWS::Region>/bodies/_dictionaries/*]",
            f"Vhs-prod-{path}/Role/DefaultPolicy/Resource",
        )
        for path in ("Ingest/Ingest", "Changes/ChangeFeed", "Import/BulkImport")
    ),
    # The change feed (infra/changes.py): X-Ray, as for ingest; and its DLQ is the stream
    # event source's on-failure destination, which cdk-nag's SQS3 does not recognise.
    ("AwsSolutions-IAM5[Resource::*]", "Vhs-prod-Changes/ChangeFeed/Role/DefaultPolicy/Resource"),
    ("AwsSolutions-SQS3", "Vhs-prod-Changes/ChangeFeed/DeadLetters/Resource"),
    # The garbage collector (infra/gc.py): X-Ray, as for ingest; and GetObject (HeadObject)
    # and DeleteObject on the objects under the body prefix, whose keys are found by listing.
    (
        "AwsSolutions-IAM5[Resource::*]",
        "Vhs-prod-Maintenance/GarbageCollection/Role/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-bodies-<AWS::AccountId>-<AWS::Region>/bodies/*]",
        "Vhs-prod-Maintenance/GarbageCollection/Role/DefaultPolicy/Resource",
    ),
    # The read API (infra/read_api.py): X-Ray, as for ingest; and GetObject on the objects
    # under the body prefix, whose content-addressed keys the index names at read time.
    ("AwsSolutions-IAM5[Resource::*]", "Vhs-prod-ReadApi/ReadApi/Role/DefaultPolicy/Resource"),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-bodies-<AWS::AccountId>-<AWS::Region>/bodies/*]",
        "Vhs-prod-ReadApi/ReadApi/Role/DefaultPolicy/Resource",
    ),
    # Reindex (infra/reindex.py): X-Ray for the worker; X-Ray and log delivery for the state
    # machine (no resource-level permissions); its invoke grant on the worker's versions; the
    # Distributed Map's describe/stop of its own child executions and redrive of its map runs.
    ("AwsSolutions-IAM5[Resource::*]", "Vhs-prod-Reindex/Reindex/Role/DefaultPolicy/Resource"),
    (
        "AwsSolutions-IAM5[Resource::*]",
        "Vhs-prod-Reindex/Reindex/StateMachine/Role/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::<ReindexFunctionDAB9BC78.Arn>:*]",
        "Vhs-prod-Reindex/Reindex/StateMachine/Role/DefaultPolicy/Resource",
    ),
    # Bulk import (infra/bulk_import.py). The function: X-Ray, as for ingest; the store's
    # writes and staged payloads, as ingest has them; the import files and its results, under
    # their prefixes, and its reports (deleted when a retry stored every line). The state
    # machine: the manifest and results under the results prefix, its own Map Runs' child
    # executions, and log delivery and X-Ray (Resource "*").
    ("AwsSolutions-IAM5[Resource::*]", "Vhs-prod-Import/BulkImport/Role/DefaultPolicy/Resource"),
    *(
        (
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::vhs-prod-{objects}]",
            "Vhs-prod-Import/BulkImport/Role/DefaultPolicy/Resource",
        )
        for objects in (
            "bodies-<AWS::AccountId>-<AWS::Region>/bodies/*",
            "staging-<AWS::AccountId>-<AWS::Region>/incoming/*",
            "staging-<AWS::AccountId>-<AWS::Region>/imports/*",
            "staging-<AWS::AccountId>-<AWS::Region>/import-results/*",
            # DeleteObject of a retried chunk's stale report: reports only.
            "staging-<AWS::AccountId>-<AWS::Region>/import-results/*/reports/*",
        )
    ),
    (
        "AwsSolutions-IAM5[Resource::*]",
        "Vhs-prod-Import/BulkImport/MachineRole/DefaultPolicy/Resource",
    ),
    (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
        "vhs-prod-staging-<AWS::AccountId>-<AWS::Region>/import-results/*]",
        "Vhs-prod-Import/BulkImport/MachineRole/DefaultPolicy/Resource",
    ),
    *(
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
            '<AWS::AccountId>:execution:{"Fn::Select":[6,{"Fn::Split":[":",'
            f'{{"Ref":"ReindexStateMachine9CDCA4BF"}}]}}]}}{suffix}]',
            "Vhs-prod-Reindex/Reindex/StateMachine/DistributedMapPolicy/Resource",
        )
        for suffix in (":*", "/ReplaySegments:*")
    ),
    *(
        (
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:"
            f"<AWS::AccountId>:execution:vhs-prod-import{executions}]",
            "Vhs-prod-Import/BulkImport/MachineRole/DefaultPolicy/Resource",
        )
        for executions in (":*", "/Import:*")
    ),
}


def test_cdk_nag_passes_with_only_the_expected_acknowledgements(
    default_app: Synthesized,
) -> None:
    (report,) = default_app.validation_report()["pluginReports"]
    assert report["pluginName"] == "AwsSolutions"
    assert report["conclusion"] == "success"
    assert report["violations"] == []
    found = set()
    for violation in report["suppressedViolations"]:
        assert len(violation["reason"]) >= nag.MIN_REASON_LENGTH, violation
        for construct in violation["violatingConstructs"]:
            found.add((violation["ruleName"], construct["constructPath"]))
    assert found == EXPECTED_ACKNOWLEDGEMENTS


def test_an_unacknowledged_finding_fails_synthesis(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    iam.Role(stack, "Wide", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")).add_to_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="Validation"):
        app.synth()


def test_an_acknowledgement_without_a_real_reason_is_refused() -> None:
    app = cdk.App()
    with pytest.raises(ValueError, match="must say why"):
        nag.acknowledge(app, "AwsSolutions-S1", "not needed")


def test_cfn_lint_reports_no_errors(default_app: Synthesized) -> None:
    templates = sorted(str(p) for p in default_app.outdir.glob("*.template.json"))
    assert len(templates) == 7  # Store, Ingest, Changes, Maintenance, ReadApi, Reindex, Import
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("cfn-lint")),
            "--non-zero-exit-code",
            "error",
            *templates,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_email_subscription_is_optional(tmp_path: Path) -> None:
    synthesized = synthesize(tmp_path, context={"stage": "dev"}, nag=False)
    template = synthesized.template_json(synthesized.stacks.ingest)
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]
    assert synthesized.stacks.store.stack_name == "Vhs-dev-Store"
