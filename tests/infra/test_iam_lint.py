"""parliament, duo-labs' IAM linter, over every identity policy of the synthesized app
(tests/infra/iam_lint.py resolves their intrinsic functions).

A finding fails the test unless ACCEPTED names it, exactly, with the reason it is wrong or
needed; an accepted finding that no longer occurs fails too, so the list stays minimal.
Resource policies (bucket, queue, topic and key policies) and trust policies are not linted:
parliament reads every document as an identity policy, so each trust policy is "MALFORMED"
(no Resource) and each key policy's Resource "*" (which means the key itself) a wildcard.
test_security.py's rules cover them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from iam_lint import Finding, Resolver, Unresolvable, lint, policy_documents
from infra_support import Synthesized, statements

Templates = dict[str, dict[str, Any]]


def _mismatch(*actions: tuple[str, str]) -> str:
    """parliament's RESOURCE_MISMATCH detail: the actions no resource of the statement fits,
    with the resource format each needs."""
    return json.dumps(
        [{"action": action, "required_format": form} for action, form in actions], sort_keys=True
    )


STREAM = "arn:*:dynamodb:*:*:table/*/stream/*"
EXPRESS_EXECUTION = "arn:*:states:*:*:express:*:*:*"
LOG_DELIVERY_REASON = (
    "Step Functions' logging to CloudWatch Logs is a vended log delivery: AWS documents "
    "logs:PutResourcePolicy (with the other log delivery actions, on Resource '*') for the "
    "state machine's role, to let the delivery write to the log group. It grants no data "
    "access, and CDK adds the same set for any state machine with logs."
)
DESCRIBE_EXPRESS_REASON = (
    "parliament asks for every resource type the service reference lists for "
    "DescribeExecution, and it lists two: execution and express. Either one suffices; the "
    "grant names this state machine's own executions, as AWS's policy for Distributed Map "
    "does (execution:<state machine>:*)."
)

# (where, issue, detail) -> why it is accepted.
ACCEPTED: dict[tuple[str, str, str], str] = {
    (
        "Changes:ChangeFeedRoleDefaultPolicyEAA29577",
        "RESOURCE_MISMATCH",
        _mismatch(
            ("dynamodb:DescribeStream", STREAM),
            ("dynamodb:GetRecords", STREAM),
            ("dynamodb:GetShardIterator", STREAM),
        ),
    ): (
        "A false positive on every real stream ARN: a stream's label is its creation time, "
        "with colons (table/vhs-prod-records/stream/2024-01-01T00:00:00.000), and parliament "
        "refuses a colon in a resource id whose format has none. The grant is the table's own "
        "stream ARN, from the Store stack's SSM parameter."
    ),
    (
        "Import:BulkImportMachineRoleDefaultPolicy1E20306A",
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        '{"actions": ["logs:putresourcepolicy"]}',
    ): LOG_DELIVERY_REASON,
    (
        "Reindex:ReindexStateMachineRoleDefaultPolicyA75404BD",
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        '{"actions": ["logs:putresourcepolicy"]}',
    ): LOG_DELIVERY_REASON,
    (
        "Import:BulkImportMachineRoleDefaultPolicy1E20306A",
        "RESOURCE_MISMATCH",
        _mismatch(("states:DescribeExecution", EXPRESS_EXECUTION)),
    ): DESCRIBE_EXPRESS_REASON,
    (
        "Reindex:ReindexStateMachineDistributedMapPolicy5E77F9C2",
        "RESOURCE_MISMATCH",
        _mismatch(("states:DescribeExecution", EXPRESS_EXECUTION)),
    ): DESCRIBE_EXPRESS_REASON,
    (
        "ReadApi:ReadApiReaderPolicyD55FBE0D",
        "UNKNOWN_CONDITION_FOR_ACTION",
        "Unknown condition lambda:InvokedViaFunctionUrl for action lambda:InvokeFunction",
    ): (
        "parliament 1.6.4's IAM definitions date from April 2025; lambda:InvokedViaFunctionUrl "
        "came with the October 2025 change that makes a function URL need "
        "lambda:InvokeFunction as well as InvokeFunctionUrl. The condition confines that "
        "InvokeFunction to calls through the URL."
    ),
}


def _templates(app: Synthesized) -> Templates:
    """Every stack's template, by its name less the stage's prefix (Import, Changes...)."""
    prefix = f"{app.stacks.config.prefix}-"
    return {stack.stack_name.removeprefix(prefix): stack.template for stack in app.assembly.stacks}


@pytest.fixture(scope="module")
def templates(app: Synthesized) -> Templates:
    return _templates(app)


@pytest.fixture(scope="module")
def findings(templates: Templates) -> list[Finding]:
    return lint(policy_documents(templates))


def _key(finding: Finding) -> tuple[str, str, str]:
    return (finding.where, finding.issue, finding.detail)


def test_parliament_finds_nothing_that_is_not_accepted(findings: list[Finding]) -> None:
    assert [f for f in findings if _key(f) not in ACCEPTED] == []


def test_every_accepted_finding_still_occurs(findings: list[Finding]) -> None:
    assert set(ACCEPTED) - {_key(f) for f in findings} == set()
    assert all(len(reason) >= 80 for reason in ACCEPTED.values())


def test_every_identity_policy_of_the_app_is_linted(templates: Templates) -> None:
    """The managed policies, the DefaultPolicy resources and any inline role policy, each
    resolved to plain ARNs (no intrinsic function left for parliament to misread)."""
    documents = list(policy_documents(templates))
    carriers = {
        f"{stack}:{logical_id}"
        for stack, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
    }
    assert {d.where for d in documents} >= carriers
    assert len(carriers) >= 10
    text = json.dumps([d.document for d in documents])
    assert '"Ref"' not in text and '"Fn::' not in text


def _grant_list_streams_on_the_stream(templates: Templates) -> Templates:
    """The change feed's role as it was: ListStreams granted on the stream ARN."""
    doctored = copy.deepcopy(templates)
    policy = doctored["Changes"]["Resources"]["ChangeFeedRoleDefaultPolicyEAA29577"]
    stmts = statements(policy)
    (listing,) = [s for s in stmts if s.get("Sid") == "ListTableStreams"]
    (reading,) = [s for s in stmts if s.get("Sid") == "ReadTheTableStream"]
    stmts.remove(listing)
    reading["Action"] = [*reading["Action"], "dynamodb:ListStreams"]
    return doctored


def test_a_grant_that_matches_no_request_is_caught(templates: Templates) -> None:
    found = lint(policy_documents(_grant_list_streams_on_the_stream(templates)))
    (new,) = [f for f in found if _key(f) not in ACCEPTED]
    assert new.issue == "RESOURCE_MISMATCH"
    assert '{"action": "dynamodb:ListStreams", "required_format": "*"}' in new.detail


@pytest.mark.parametrize(
    "value",
    [
        {"Fn::ImportValue": "Vhs-prod-Store:BucketArn"},
        {"Ref": "NoSuchResource"},
        {"Fn::GetAtt": ["StoreTable", "Arn"]},  # a resource type with no value here
    ],
)
def test_what_cannot_be_resolved_fails_loudly(value: dict[str, Any]) -> None:
    template = {"Resources": {"StoreTable": {"Type": "AWS::DynamoDB::GlobalTable"}}}
    with pytest.raises(Unresolvable):
        Resolver({"Store": template}, "Store")(value)


def test_an_ssm_parameter_resolves_to_what_the_app_writes_there(templates: Templates) -> None:
    """The change feed reads the stream ARN from the SSM parameter the Store stack writes."""
    resolve = Resolver(templates, "Changes")
    (parameter,) = [
        name
        for name, p in templates["Changes"]["Parameters"].items()
        if p.get("Default", "").endswith("/table-stream-arn")
    ]
    assert resolve({"Ref": parameter}).startswith(
        "arn:aws:dynamodb:eu-west-1:111122223333:table/vhs-prod-records/stream/"
    )
