"""Security properties of every synthesized template, by walking every resource.

Each rule is a function from one template to its findings (empty when the rule holds), run
over every stack of two configurations of the app: the default one (`default_app`: stage
prod, an alarm email, bodies under a prefix) and one without a body prefix, where the roles'
object ARNs cover whole buckets. Nothing names a resource: a resource added later is checked
as it is synthesized, and a resource type no rule has classified fails the encryption rule
until someone decides how it stores data. Each rule also has a test that feeds it a doctored
copy of a real template and expects the finding, so none of them can pass by finding nothing.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from infra_support import Synthesized, as_list, render, resources_of, statements, synthesize

from infra import nag
from vhs import shapes

Template = dict[str, Any]
Rule = Callable[[Template], list[str]]

# Services that hold or move records, or guard them: no wildcard in their actions at all.
DATA_SERVICES = frozenset({"s3", "dynamodb", "sqs", "sns", "kms", "lambda"})
# Actions that support no resource-level permissions, so AWS requires Resource "*" for them.
RESOURCELESS_ACTIONS = {
    "xray:PutTraceSegments": "Tracing.ACTIVE: X-Ray segments have no resource ARN",
    # The change feed's stream event source (infra/changes.py): ListStreams lists an
    # account's streams, so its only resource is "*" (a grant on the stream matches nothing).
    "dynamodb:ListStreams": "a stream event source: ListStreams has no resource ARN",
    "xray:PutTelemetryRecords": "Tracing.ACTIVE: X-Ray telemetry has no resource ARN",
    # A state machine's tracing and its log delivery to CloudWatch Logs (infra/reindex.py):
    # vended log deliveries and sampling rules have no resource ARN.
    "xray:GetSamplingRules": "state machine tracing: sampling rules have no resource ARN",
    "xray:GetSamplingTargets": "state machine tracing: sampling targets have no resource ARN",
    **{
        f"logs:{action}": "state machine logging: vended log delivery has no resource ARN"
        for action in (
            "CreateLogDelivery",
            "DeleteLogDelivery",
            "DescribeLogGroups",
            "DescribeResourcePolicies",
            "GetLogDelivery",
            "ListLogDeliveries",
            "PutResourcePolicy",
            "UpdateLogDelivery",
        )
    },
}
# Condition keys that confine a statement open to every principal to this account, an
# organization, a source resource or a network path.
CONFINING_CONDITION_KEYS = frozenset(
    {
        "aws:SourceArn",
        "aws:SourceAccount",
        "aws:SourceOwner",
        "aws:PrincipalAccount",
        "aws:PrincipalOrgID",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "kms:CallerAccount",
    }
)
POLICY_KEYS = ("PolicyDocument", "AssumeRolePolicyDocument", "KeyPolicy")
ACCOUNT_ROOT = "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"
PUBLIC_ACLS = frozenset({"PublicRead", "PublicReadWrite", "AuthenticatedRead"})
PUBLIC_ACCESS_BLOCK_FLAGS = (
    "BlockPublicAcls",
    "BlockPublicPolicy",
    "IgnorePublicAcls",
    "RestrictPublicBuckets",
)


@dataclass(frozen=True)
class TlsGuard:
    """The resource policy type that must deny requests without TLS to a resource type, the
    policy property naming the resources, what the deny must cover (rendered, from the
    resource's logical id), and data actions it must cover."""

    policy_type: str
    targets: str
    covered: Callable[[str], set[str]]
    actions: tuple[str, ...]


TLS_GUARDS = {
    "AWS::S3::Bucket": TlsGuard(
        "AWS::S3::BucketPolicy",
        "Bucket",
        lambda logical_id: {f"${{{logical_id}.Arn}}", f"${{{logical_id}.Arn}}/*"},
        ("s3:GetObject", "s3:PutObject", "s3:ListBucket"),
    ),
    "AWS::SQS::Queue": TlsGuard(
        "AWS::SQS::QueuePolicy",
        "Queues",
        lambda logical_id: {f"${{{logical_id}.Arn}}"},
        ("sqs:SendMessage", "sqs:ReceiveMessage"),
    ),
    # SNS topic policies deny Publish, the one action that carries data into a topic.
    "AWS::SNS::Topic": TlsGuard(
        "AWS::SNS::TopicPolicy",
        "Topics",
        lambda logical_id: {f"${{{logical_id}}}"},
        ("sns:Publish",),
    ),
}


def _bucket_encrypted(properties: dict[str, Any]) -> bool:
    rules = properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
    return bool(rules) and all(
        rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
        for rule in rules
    )


# What encryption at rest means for each type that stores data, as the template sets it.
ENCRYPTED_AT_REST: dict[str, Callable[[dict[str, Any]], bool]] = {
    "AWS::S3::Bucket": _bucket_encrypted,
    "AWS::SQS::Queue": lambda p: p.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in p,
    "AWS::SNS::Topic": lambda p: "KmsMasterKeyId" in p,
    # KMS: the AWS managed key (aws/dynamodb), or a customer managed one; not the AWS owned
    # default, whose use the account cannot see (infra/store.py says why).
    "AWS::DynamoDB::Table": lambda p: p.get("SSESpecification", {}).get("SSEEnabled") is True,
    "AWS::KMS::Key": lambda p: p.get("EnableKeyRotation") is True,
}
# Types that store data the service always encrypts at rest itself, with nothing to set.
ENCRYPTED_BY_THE_SERVICE = {
    "AWS::Logs::LogGroup": "CloudWatch Logs encrypts all log data at rest (.checkov.yaml)",
    "AWS::Lambda::Function": "Lambda encrypts code and environment at rest (.checkov.yaml)",
    # The reindex state machine's executions hold cursors and counts, never record bodies.
    "AWS::StepFunctions::StateMachine": "Step Functions encrypts execution data at rest",
}
# Types that hold no records: permissions, wiring, alarms and configuration (names, ARNs).
HOLDS_NO_RECORDS = frozenset(
    {
        "AWS::CDK::Metadata",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::Events::Rule",
        "AWS::IAM::ManagedPolicy",
        "AWS::IAM::Policy",
        "AWS::IAM::Role",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Lambda::Permission",
        "AWS::Lambda::Url",
        "AWS::S3::BucketPolicy",
        "AWS::SNS::Subscription",
        "AWS::SNS::TopicPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::SSM::Parameter",
    }
)
# Every checkov check skipped in template metadata (infra/nag.py skip_checkov): (stack, type,
# check) and how many resources skip it. A new skip must be added here, so it is reviewed.
EXPECTED_CHECKOV_SKIPS = {
    ("Store", "AWS::S3::Bucket", "CKV_AWS_18"): 1,  # the access-log bucket logs nowhere
    ("Store", "AWS::S3::Bucket", "CKV_AWS_21"): 2,  # access-log and staging: no versioning
    ("Store", "AWS::DynamoDB::Table", "CKV_AWS_119"): 1,  # AWS managed key, not a CMK
    ("Ingest", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # no async invocations
    ("Changes", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # no async invocations
    ("Maintenance", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # the next run redoes it
    ("ReadApi", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # synchronous: the caller retries
    ("Reindex", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # the state machine retries it
    ("Import", "AWS::Lambda::Function", "CKV_AWS_116"): 1,  # synchronous: Step Functions retries
}


# --- walking templates ------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    resource: str  # the logical id of the resource that holds the policy
    document: str  # which of POLICY_KEYS
    body: dict[str, Any]

    @property
    def allows(self) -> bool:
        return self.body.get("Effect") == "Allow"

    @property
    def actions(self) -> list[str]:
        return as_list(self.body.get("Action", []))

    def __str__(self) -> str:
        return f"{self.resource} {self.document} {json.dumps(self.body, sort_keys=True)}"


def _documents(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every policy document under `value`, wherever a resource type keeps it (inline role
    policies, managed policies, resource policies, trust and key policies)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in POLICY_KEYS and isinstance(item, str):
                item = json.loads(item)  # e.g. AWS::Logs::ResourcePolicy keeps JSON text
            if key in POLICY_KEYS and isinstance(item, dict) and "Statement" in item:
                yield key, item
            else:
                yield from _documents(item)
    elif isinstance(value, list):
        for item in value:
            yield from _documents(item)


def statements_of(template: Template) -> list[Statement]:
    return [
        Statement(logical_id, key, statement)
        for logical_id, resource in template["Resources"].items()
        for key, document in _documents(resource.get("Properties", {}))
        for statement in as_list(document["Statement"])
    ]


def _everyone(principal: Any) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, dict) and "*" in as_list(principal.get("AWS", []))


def _confined(statement: dict[str, Any]) -> bool:
    keys = {key for operator in statement.get("Condition", {}).values() for key in operator}
    return bool(keys & CONFINING_CONDITION_KEYS)


def is_account_key_delegation(statement: Statement) -> bool:
    """AWS's default key policy statement: kms:* on the key to the account itself, which
    grants no one anything but lets IAM policies in this account grant use of the key
    (without it the key cannot be managed at all)."""
    return (
        statement.document == "KeyPolicy"
        and statement.allows
        and statement.actions == ["kms:*"]
        and render(statement.body.get("Principal", {}).get("AWS")) == ACCOUNT_ROOT
        and "Condition" not in statement.body
    )


def _wildcard_scope(arn: str) -> bool:
    """An ARN that names no particular resource: any account, any bucket, or a bare
    resource type (``table/*``, ``function:*``)."""
    # A reference (`${AWS::AccountId}`, `${Table.Arn}`) names one thing; its own colons must
    # not split the ARN.
    parts = re.sub(r"\$\{[^}]*\}", "REF", arn).split(":", 5)
    if len(parts) < 6:
        return False  # a whole ARN resolved at deploy time (an SSM parameter): no pattern
    service, account, resource = parts[2], parts[4], parts[5]
    if account == "*":
        return True
    if service == "s3":
        return "*" in resource.split("/")[0]
    return re.match(r"^(?:[A-Za-z-]+[/:])?\*", resource) is not None


# --- the rules --------------------------------------------------------------------------------


def wildcard_actions(template: Template) -> list[str]:
    """Allow statements grant no `*`, no `service:*`, and no wildcard action on a data
    service, and never use NotAction."""
    findings = []
    for statement in statements_of(template):
        if not statement.allows or is_account_key_delegation(statement):
            continue
        if "NotAction" in statement.body:
            findings.append(f"NotAction in an Allow: {statement}")
        for action in statement.actions:
            service = action.partition(":")[0].lower()
            if action == "*" or action.endswith(":*"):
                findings.append(f"{action} (a whole service): {statement}")
            elif service in DATA_SERVICES and ("*" in action or "?" in action):
                findings.append(f"{action} (a wildcard on a data service): {statement}")
    return findings


def unscoped_resources(template: Template) -> list[str]:
    """Allow statements name their resources: Resource "*" only for actions that support no
    resource-level permissions, no ARN of any account or of a whole resource type, and no
    NotResource. In a key policy "*" is the key itself; trust policies name no resource."""
    findings = []
    for statement in statements_of(template):
        if not statement.allows or statement.document == "AssumeRolePolicyDocument":
            continue
        if "NotResource" in statement.body:
            findings.append(f"NotResource in an Allow: {statement}")
        if statement.document == "KeyPolicy":
            continue
        for resource in map(render, as_list(statement.body.get("Resource", []))):
            if resource == "*":
                unscoped = [a for a in statement.actions if a not in RESOURCELESS_ACTIONS]
                if unscoped:
                    findings.append(f"Resource * for {unscoped}: {statement}")
            elif _wildcard_scope(resource):
                findings.append(f"{resource} names no particular resource: {statement}")
    return findings


def public_principals(template: Template) -> list[str]:
    """No Allow to every principal unless a condition confines it to an account, an
    organization, a source or a network; no NotPrincipal in an Allow."""
    findings = []
    for statement in statements_of(template):
        if not statement.allows:
            continue
        if "NotPrincipal" in statement.body:
            findings.append(f"NotPrincipal in an Allow: {statement}")
        if _everyone(statement.body.get("Principal")) and not _confined(statement.body):
            findings.append(f"open to every principal: {statement}")
    return findings


def _denies_without_tls(statement: dict[str, Any], covered: set[str], actions: tuple) -> bool:
    patterns = as_list(statement.get("Action", []))
    return (
        statement.get("Effect") == "Deny"
        and _everyone(statement.get("Principal"))
        and str(statement.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")).lower()
        == "false"
        and covered <= {render(r) for r in as_list(statement.get("Resource", []))}
        and all(any(fnmatch.fnmatchcase(a, p) for p in patterns) for a in actions)
    )


def missing_tls_deny(template: Template) -> list[str]:
    """Every bucket, queue and topic has a resource policy, in its own template, that denies
    every principal its data actions on it when aws:SecureTransport is false."""
    findings = []
    for resource_type, guard in TLS_GUARDS.items():
        policies = resources_of(template, guard.policy_type).values()
        for logical_id in resources_of(template, resource_type):
            statements = [
                statement
                for policy in policies
                if {"Ref": logical_id} in as_list(policy["Properties"][guard.targets])
                for statement in as_list(policy["Properties"]["PolicyDocument"]["Statement"])
            ]
            if not any(
                _denies_without_tls(s, guard.covered(logical_id), guard.actions) for s in statements
            ):
                findings.append(f"{resource_type} {logical_id}: no deny of requests without TLS")
    return findings


def unencrypted_at_rest(template: Template) -> list[str]:
    """Every resource that stores data is encrypted at rest (KMS keys rotate), and every
    resource type is classified: a new type fails here until someone decides."""
    findings = []
    for logical_id, resource in template["Resources"].items():
        type_ = resource["Type"]
        if type_ in ENCRYPTED_AT_REST:
            if not ENCRYPTED_AT_REST[type_](resource.get("Properties", {})):
                findings.append(f"{type_} {logical_id}: not encrypted at rest as required")
        elif type_ not in ENCRYPTED_BY_THE_SERVICE and type_ not in HOLDS_NO_RECORDS:
            findings.append(f"{type_} {logical_id}: unclassified: does it store data?")
    return findings


def public_access(template: Template) -> list[str]:
    """Buckets block all public access and have no public ACL; no function is invocable by
    anyone (a permission for every principal, or any service, without a source; an
    unauthenticated function URL)."""
    findings = []
    for logical_id, bucket in resources_of(template, "AWS::S3::Bucket").items():
        properties = bucket.get("Properties", {})
        block = properties.get("PublicAccessBlockConfiguration", {})
        if not all(block.get(flag) is True for flag in PUBLIC_ACCESS_BLOCK_FLAGS):
            findings.append(f"bucket {logical_id}: public access not fully blocked: {block}")
        if properties.get("AccessControl") in PUBLIC_ACLS:
            findings.append(f"bucket {logical_id}: ACL {properties['AccessControl']}")
    for logical_id, permission in resources_of(template, "AWS::Lambda::Permission").items():
        properties = permission["Properties"]
        principal = render(properties["Principal"])
        sourced = {"SourceArn", "SourceAccount", "PrincipalOrgID"} & properties.keys()
        if (principal == "*" or principal.endswith(".amazonaws.com")) and not sourced:
            findings.append(f"permission {logical_id}: {principal} may invoke, from anywhere")
        if properties.get("FunctionUrlAuthType") == "NONE":
            findings.append(f"permission {logical_id}: an unauthenticated function URL")
    for logical_id, url in resources_of(template, "AWS::Lambda::Url").items():
        if url["Properties"].get("AuthType") == "NONE":
            findings.append(f"function URL {logical_id}: no authentication")
    return findings


# --- VHS's own boundaries (docs/reliability.md, "Trust boundaries") --------------------------


def _object_key_pattern(arn: str) -> str | None:
    """The key part of an S3 object ARN (`bucket/<this>`), or None for another ARN."""
    _, _, rest = arn.partition(":s3:::")
    bucket, slash, key = rest.partition("/")
    return key if bucket and slash else None


def scans_beyond_the_condemned_index(template: Template) -> list[str]:
    """No role may Scan a table: the collector may Scan the sparse `condemned` index only
    (condemned bodies of purged records), never the records themselves. The one exception is
    the reindex worker's statement "ScanTheTable" in the Reindex stack: replaying every
    record is what it is for (at a bounded rate, docs/changes.md)."""
    index = f"/index/{shapes.CONDEMNED_INDEX_NAME}"
    reindex = "reindex" in template.get("Description", "")
    return [
        f"Scan of {resource}: {statement}"
        for statement in statements_of(template)
        if statement.allows and "dynamodb:Scan" in statement.actions
        if not (reindex and statement.body.get("Sid") == "ScanTheTable")
        for resource in map(render, as_list(statement.body.get("Resource", [])))
        if not resource.endswith(index)
    ]


def deletes_outside_a_body_prefix(template: Template) -> list[str]:
    """Object deletes name a bucket and a non-empty literal key prefix before any wildcard (the
    bodies', the import's reports under `import-results/`): no role can delete across a whole
    bucket, whatever else the bucket holds."""
    findings = []
    for statement in statements_of(template):
        deletes = [a for a in statement.actions if a.startswith("s3:DeleteObject")]
        if not statement.allows or not deletes:
            continue
        for resource in map(render, as_list(statement.body.get("Resource", []))):
            key = _object_key_pattern(resource)
            if key is None or not key.partition("*")[0].strip("/"):
                findings.append(f"{deletes} on {resource}, not under a prefix: {statement}")
    return findings


def producers_write_outside_their_prefix(template: Template) -> list[str]:
    """A producer policy (a managed policy that sends to a queue) writes objects only under
    the producers' staging prefix, and denies writes to the ingest function's dead-letters/
    (staged dead letters and the receipts that make their reasons believed)."""
    findings = []
    for logical_id, policy in resources_of(template, "AWS::IAM::ManagedPolicy").items():
        stmts = [Statement(logical_id, "PolicyDocument", s) for s in statements(policy)]
        if not any(s.allows and "sqs:SendMessage" in s.actions for s in stmts):
            continue
        for statement in stmts:
            if not statement.allows or not any(a.startswith("s3:Put") for a in statement.actions):
                continue
            for resource in map(render, as_list(statement.body.get("Resource", []))):
                key = _object_key_pattern(resource) or ""
                if not key.startswith(shapes.STAGING_PREFIX):
                    findings.append(f"producer writes {resource}: {statement}")
        denied = {
            _object_key_pattern(render(r))
            for s in stmts
            if not s.allows and "s3:PutObject" in s.actions
            for r in as_list(s.body.get("Resource", []))
        }
        if f"{shapes.DEAD_LETTER_STAGING_PREFIX}*" not in denied:
            findings.append(f"producer policy {logical_id}: no deny of dead-letters/")
    return findings


def lists_beyond_what_it_reads(template: Template) -> list[str]:
    """A role lists a bucket only under prefixes (`s3:prefix` StringLike ``<prefix>/*``), each
    one where the same policy reads objects (GetObject on ``<bucket>/<prefix>/*``): ListBucket
    makes a missing object a 404 and finds the keys to read, and never shows the rest of a
    bucket (other producers' payloads, the handler's dead letters, another store's bodies)."""
    findings = []
    for logical_id, policy in {
        **resources_of(template, "AWS::IAM::Policy"),
        **resources_of(template, "AWS::IAM::ManagedPolicy"),
    }.items():
        stmts = [Statement(logical_id, "PolicyDocument", s) for s in statements(policy)]
        reads = {
            render(resource)
            for s in stmts
            if s.allows and "s3:GetObject" in s.actions
            for resource in as_list(s.body.get("Resource", []))
        }
        for statement in stmts:
            lists = [a for a in statement.actions if fnmatch.fnmatchcase("s3:ListBucket", a)]
            if not statement.allows or not lists:
                continue
            condition = statement.body.get("Condition", {})
            prefixes = as_list(condition.get("StringLike", {}).get("s3:prefix", []))
            if not prefixes:
                findings.append(f"lists a whole bucket: {statement}")
            for prefix in prefixes:
                for bucket in map(render, as_list(statement.body.get("Resource", []))):
                    if f"{bucket}/{prefix}" not in reads or "*" in prefix.removesuffix("/*"):
                        findings.append(f"lists {prefix} of {bucket}, reads none: {statement}")
    return findings


def service_grants_without_a_source(template: Template) -> list[str]:
    """An Allow to an AWS service principal in a resource or key policy carries a source
    condition (aws:SourceAccount or aws:SourceArn): the confused-deputy guard."""
    return [
        f"service grant without a source: {statement}"
        for statement in statements_of(template)
        if statement.allows
        and statement.document != "AssumeRolePolicyDocument"
        and isinstance(statement.body.get("Principal"), dict)
        and "Service" in statement.body["Principal"]
        and not _confined(statement.body)
    ]


RULES: tuple[Rule, ...] = (
    wildcard_actions,
    unscoped_resources,
    public_principals,
    missing_tls_deny,
    unencrypted_at_rest,
    public_access,
    scans_beyond_the_condemned_index,
    deletes_outside_a_body_prefix,
    producers_write_outside_their_prefix,
    lists_beyond_what_it_reads,
    service_grants_without_a_source,
)


# --- the templates ------------------------------------------------------------------------


def _templates_of(synthesized: Synthesized) -> dict[str, Template]:
    return {stack.stack_name: stack.template for stack in synthesized.assembly.stacks}


@pytest.fixture(scope="module")
def nested_prefix_app(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Another configuration: another stage and a body prefix of two segments (an empty one
    is refused at synth: the collector could delete anywhere in the bucket)."""
    context = {"stage": "qa", "bodyPrefix": "catalogue/bodies"}
    return synthesize(tmp_path_factory.mktemp("cdk.out"), context=context)


@pytest.fixture(scope="module")
def templates(default_app: Synthesized, nested_prefix_app: Synthesized) -> dict[str, Template]:
    """Every stack of both configurations, by stack name (the stages differ)."""
    found = {**_templates_of(default_app), **_templates_of(nested_prefix_app)}
    assert len(found) == 14, sorted(found)  # seven stacks a configuration
    return found


def _stack_template(templates: dict[str, Template], kind: str) -> Template:
    """A copy of the default configuration's stack of this kind, to doctor."""
    return copy.deepcopy(templates[f"Vhs-prod-{kind}"])


def _first(template: Template, type_: str) -> tuple[str, dict[str, Any]]:
    return next(iter(resources_of(template, type_).items()))


# --- every template obeys every rule ----------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_every_template_obeys(rule: Rule, templates: dict[str, Template]) -> None:
    findings = {name: rule(template) for name, template in templates.items()}
    assert {name: found for name, found in findings.items() if found} == {}


def test_the_walk_reaches_every_policy(templates: dict[str, Template]) -> None:
    """The IAM rules are only as good as the walk: every resource that carries a policy
    gives it statements. Prints the inventory (`pytest -rP -k walk` shows it)."""
    policy_types = {
        "AWS::IAM::Policy",
        "AWS::IAM::ManagedPolicy",
        "AWS::IAM::Role",
        "AWS::KMS::Key",
        "AWS::S3::BucketPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::SNS::TopicPolicy",
    }
    statements = 0
    resources = 0
    for name, template in templates.items():
        found = statements_of(template)
        statements += len(found)
        resources += len(template["Resources"])
        holders = {statement.resource for statement in found}
        carriers = {k for k, r in template["Resources"].items() if r["Type"] in policy_types}
        assert carriers <= holders, (name, sorted(carriers - holders))
    print(
        f"security rules: {len(RULES)}; {len(templates)} templates, {resources} resources, "
        f"{statements} IAM statements"
    )


def test_checkov_skips_in_template_metadata_are_the_reviewed_ones(
    templates: dict[str, Template],
) -> None:
    found: Counter[tuple[str, str, str]] = Counter()
    for name, template in templates.items():
        if not name.startswith("Vhs-prod-"):
            continue
        for resource in template["Resources"].values():
            for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
                assert len(skip["comment"]) >= nag.MIN_REASON_LENGTH, skip
                found[(name.removeprefix("Vhs-prod-"), resource["Type"], skip["id"])] += 1
    assert dict(found) == EXPECTED_CHECKOV_SKIPS


def test_a_checkov_skip_needs_a_reason_and_keeps_the_others(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Probe")
    queue = sqs.Queue(stack, "Queue")
    with pytest.raises(ValueError, match="must say why"):
        nag.skip_checkov(queue, "CKV_AWS_27", "not needed")
    with pytest.raises(TypeError, match="no CloudFormation resource"):
        nag.skip_checkov(stack, "CKV_AWS_27", "a reason long enough to pass the length floor")
    for check in ("CKV_AWS_27", "CKV_AWS_28"):
        nag.skip_checkov(queue, check, f"{check}: a reason long enough to pass the floor")
    resource = queue.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    skips = resource.get_metadata("checkov")["skip"]
    assert [skip["id"] for skip in skips] == ["CKV_AWS_27", "CKV_AWS_28"]


# --- each rule catches what it is there for ---------------------------------------------------


def _append_statement(template: Template, policy_type: str, statement: dict[str, Any]) -> str:
    logical_id, policy = _first(template, policy_type)
    policy["Properties"]["PolicyDocument"]["Statement"].append(statement)
    return logical_id


def _allow(action: Any, resource: Any, **more: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


A_QUEUE_ARN = {"Fn::GetAtt": ["IngestQueue", "Arn"]}


@pytest.mark.parametrize(
    "action", ["*", "logs:*", "s3:*", "dynamodb:Get*", "kms:GenerateDataKey*", "sqs:?endMessage"]
)
def test_wildcard_actions_are_caught(templates: dict[str, Template], action: str) -> None:
    template = _stack_template(templates, "Ingest")
    policy = _append_statement(template, "AWS::IAM::Policy", _allow(action, A_QUEUE_ARN))
    (finding,) = wildcard_actions(template)
    assert finding.startswith(action) and policy in finding


@pytest.mark.parametrize(
    ("negation", "rule"),
    [
        ("NotAction", wildcard_actions),
        ("NotResource", unscoped_resources),
        ("NotPrincipal", public_principals),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_negations_in_an_allow_are_caught(
    templates: dict[str, Template], negation: str, rule: Rule
) -> None:
    """An Allow of everything but something is as wide as a wildcard."""
    template = _stack_template(templates, "Ingest")
    statement = _allow("sqs:SendMessage", A_QUEUE_ARN, Principal={"AWS": "arn:aws:iam::1:root"})
    statement[negation] = statement.pop(negation.removeprefix("Not"))
    _append_statement(template, "AWS::SQS::QueuePolicy", statement)
    (finding,) = rule(template)
    assert finding.startswith(negation)


def test_only_the_accounts_own_key_delegation_may_allow_kms_everything(
    templates: dict[str, Template],
) -> None:
    template = _stack_template(templates, "Changes")
    _, key = _first(template, "AWS::KMS::Key")
    (delegation,) = key["Properties"]["KeyPolicy"]["Statement"]
    delegation["Principal"] = {"AWS": "*"}
    assert [f.split(" ")[0] for f in wildcard_actions(template)] == ["kms:*"]
    assert [f.split(":")[0] for f in public_principals(template)] == ["open to every principal"]


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("s3:GetObject", "*"),
        ("logs:PutLogEvents", ["*", A_QUEUE_ARN]),
        ("dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/*"),
        ("lambda:InvokeFunction", "arn:aws:lambda:us-east-1:123456789012:function:*"),
        ("sqs:SendMessage", "arn:aws:sqs:us-east-1:*:vhs-queue"),
        (
            "s3:GetObject",
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::*/bodies/*"]]},
        ),
    ],
)
def test_unscoped_resources_are_caught(
    templates: dict[str, Template], action: str, resource: Any
) -> None:
    template = _stack_template(templates, "Maintenance")
    policy = _append_statement(template, "AWS::IAM::Policy", _allow(action, resource))
    (finding,) = unscoped_resources(template)
    assert policy in finding


@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}, {"AWS": ["*", "arn:aws:iam::1:root"]}])
def test_statements_open_to_everyone_are_caught(
    templates: dict[str, Template], principal: Any
) -> None:
    template = _stack_template(templates, "Ingest")
    open_to_all = _allow("sqs:SendMessage", A_QUEUE_ARN, Principal=principal)
    policy = _append_statement(template, "AWS::SQS::QueuePolicy", open_to_all)
    (finding,) = public_principals(template)
    assert policy in finding
    # Confined to this account, the same statement is no longer open to everyone.
    open_to_all["Condition"] = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert public_principals(template) == []


def _drop_tls_denies(template: Template, policy_type: str) -> None:
    for policy in resources_of(template, policy_type).values():
        document = policy["Properties"]["PolicyDocument"]
        document["Statement"] = [s for s in document["Statement"] if s["Effect"] != "Deny"]


def _allow_tls_false(template: Template, policy_type: str) -> None:
    for policy in resources_of(template, policy_type).values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            statement.get("Condition", {}).get("Bool", {}).pop("aws:SecureTransport", None)


def _deny_only_the_bucket(template: Template, policy_type: str) -> None:
    for policy in resources_of(template, policy_type).values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny":
                statement["Resource"] = statement["Resource"][0]


def _deny_only_receive(template: Template, policy_type: str) -> None:
    for policy in resources_of(template, policy_type).values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny":
                statement["Action"] = "sqs:ReceiveMessage"


def _no_policy(template: Template, policy_type: str) -> None:
    for logical_id in list(resources_of(template, policy_type)):
        del template["Resources"][logical_id]


@pytest.mark.parametrize(
    ("kind", "resource_type", "edit"),
    [
        ("Store", "AWS::S3::Bucket", _drop_tls_denies),
        ("Store", "AWS::S3::Bucket", _allow_tls_false),
        ("Store", "AWS::S3::Bucket", _deny_only_the_bucket),
        ("Ingest", "AWS::SQS::Queue", _deny_only_receive),
        ("Changes", "AWS::SQS::Queue", _no_policy),
        ("Changes", "AWS::SNS::Topic", _drop_tls_denies),
        ("Ingest", "AWS::SNS::Topic", _no_policy),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_missing_tls_deny_is_caught(
    templates: dict[str, Template],
    kind: str,
    resource_type: str,
    edit: Callable[[Template, str], None],
) -> None:
    template = _stack_template(templates, kind)
    edit(template, TLS_GUARDS[resource_type].policy_type)
    expected = {
        f"{resource_type} {i}: no deny of requests without TLS"
        for i in resources_of(template, resource_type)
    }
    assert set(missing_tls_deny(template)) == expected


@pytest.mark.parametrize(
    ("kind", "resource_type", "properties"),
    [
        ("Store", "AWS::S3::Bucket", {"BucketEncryption": None}),
        ("Ingest", "AWS::SQS::Queue", {"SqsManagedSseEnabled": False}),
        ("Changes", "AWS::SNS::Topic", {"KmsMasterKeyId": None}),
        ("Store", "AWS::DynamoDB::Table", {"SSESpecification": None}),
        ("Store", "AWS::DynamoDB::Table", {"SSESpecification": {"SSEEnabled": False}}),
        ("Ingest", "AWS::KMS::Key", {"EnableKeyRotation": False}),
    ],
)
def test_unencrypted_storage_is_caught(
    templates: dict[str, Template], kind: str, resource_type: str, properties: dict[str, Any]
) -> None:
    template = _stack_template(templates, kind)
    logical_id, resource = _first(template, resource_type)
    for name, value in properties.items():
        if value is None:
            del resource["Properties"][name]
        else:
            resource["Properties"][name] = value
    assert unencrypted_at_rest(template) == [
        f"{resource_type} {logical_id}: not encrypted at rest as required"
    ]


def test_a_resource_type_nobody_classified_is_caught(templates: dict[str, Template]) -> None:
    template = _stack_template(templates, "Store")
    template["Resources"]["Files"] = {"Type": "AWS::EFS::FileSystem", "Properties": {}}
    assert unencrypted_at_rest(template) == [
        "AWS::EFS::FileSystem Files: unclassified: does it store data?"
    ]


def _open_block(template: Template) -> str:
    logical_id, bucket = _first(template, "AWS::S3::Bucket")
    bucket["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] = False
    return logical_id


def _public_acl(template: Template) -> str:
    logical_id, bucket = _first(template, "AWS::S3::Bucket")
    bucket["Properties"]["AccessControl"] = "PublicRead"
    return logical_id


def _unsourced_service_permission(template: Template) -> str:
    logical_id, permission = _first(template, "AWS::Lambda::Permission")
    del permission["Properties"]["SourceArn"]
    return logical_id


def _permission_for_anyone(template: Template) -> str:
    logical_id, permission = _first(template, "AWS::Lambda::Permission")
    permission["Properties"] = {**permission["Properties"], "Principal": "*"}
    del permission["Properties"]["SourceArn"]
    return logical_id


def _unauthenticated_url(template: Template) -> str:
    function_id, _ = _first(template, "AWS::Lambda::Function")
    url = {"TargetFunctionArn": {"Fn::GetAtt": [function_id, "Arn"]}, "AuthType": "NONE"}
    template["Resources"]["Url"] = {"Type": "AWS::Lambda::Url", "Properties": url}
    return "Url"


def _read_api_made_public(template: Template) -> str:
    logical_id, url = _first(template, "AWS::Lambda::Url")
    url["Properties"]["AuthType"] = "NONE"
    return logical_id


@pytest.mark.parametrize(
    ("kind", "edit"),
    [
        ("ReadApi", _read_api_made_public),
        ("Store", _open_block),
        ("Store", _public_acl),
        ("Maintenance", _unsourced_service_permission),
        ("Maintenance", _permission_for_anyone),
        ("Maintenance", _unauthenticated_url),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_public_access_is_caught(
    templates: dict[str, Template], kind: str, edit: Callable[[Template], str]
) -> None:
    template = _stack_template(templates, kind)
    logical_id = edit(template)
    (finding,) = public_access(template)
    assert logical_id in finding


# --- VHS's own boundaries, each caught in a doctored template --------------------------------


def _statement_with(template: Template, action: str) -> dict[str, Any]:
    return next(s.body for s in statements_of(template) if s.allows and action in s.actions)


def _scan_the_table(template: Template) -> str:
    scan = _statement_with(template, "dynamodb:Scan")
    scan["Resource"] = render(scan["Resource"]).removesuffix("/index/condemned")
    return "Scan of"


def _delete_across_the_bucket(template: Template) -> str:
    delete = _statement_with(template, "s3:DeleteObject")
    delete["Resource"] = render(delete["Resource"]).replace("/bodies/*", "/*")
    return "not under a prefix"


def _delete_with_a_wildcard_prefix(template: Template) -> str:
    delete = _statement_with(template, "s3:DeleteObject")
    delete["Resource"] = render(delete["Resource"]).replace("/bodies/*", "/*/x/*")
    return "not under a prefix"


def _producer_writes_the_whole_bucket(template: Template) -> str:
    _, policy = _first(template, "AWS::IAM::ManagedPolicy")
    stage = next(
        s for s in statements(policy) if s["Effect"] == "Allow" and "s3:PutObject" in s["Action"]
    )
    stage["Resource"] = render(stage["Resource"]).replace(f"/{shapes.STAGING_PREFIX}*", "/*")
    return "producer writes"


def _producer_without_the_deny(template: Template) -> str:
    _, policy = _first(template, "AWS::IAM::ManagedPolicy")
    document = policy["Properties"]["PolicyDocument"]
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    return "no deny of dead-letters/"


def _sid(template: Template, sid: str) -> dict[str, Any]:
    return next(s.body for s in statements_of(template) if s.body.get("Sid") == sid)


def _list_the_whole_staging_bucket(template: Template) -> str:
    """TellMissingPayloads as it was: ListBucket on the whole staging bucket."""
    del _sid(template, "TellMissingPayloads")["Condition"]
    return "lists a whole bucket"


def _list_the_dead_letters(template: Template) -> str:
    listing = _sid(template, "TellMissingPayloads")
    listing["Condition"]["StringLike"]["s3:prefix"] = f"{shapes.DEAD_LETTER_STAGING_PREFIX}*"
    return "reads none"


def _list_every_import_prefix(template: Template) -> str:
    listing = _sid(template, "ListImportFiles")
    listing["Condition"]["StringLike"]["s3:prefix"] = "*/*"
    return "reads none"


def _key_grant_without_a_source(template: Template) -> str:
    key = _statement_with(template, "kms:Decrypt")
    del key["Condition"]
    return "service grant without a source"


def _log_delivery_without_a_source(template: Template) -> str:
    logs = next(
        s.body
        for s in statements_of(template)
        if s.allows and s.body.get("Principal") == {"Service": "logging.s3.amazonaws.com"}
    )
    del logs["Condition"]
    return "service grant without a source"


@pytest.mark.parametrize(
    ("kind", "rule", "edit"),
    [
        ("Maintenance", scans_beyond_the_condemned_index, _scan_the_table),
        ("Maintenance", deletes_outside_a_body_prefix, _delete_across_the_bucket),
        ("Maintenance", deletes_outside_a_body_prefix, _delete_with_a_wildcard_prefix),
        ("Ingest", producers_write_outside_their_prefix, _producer_writes_the_whole_bucket),
        ("Ingest", producers_write_outside_their_prefix, _producer_without_the_deny),
        ("Ingest", lists_beyond_what_it_reads, _list_the_whole_staging_bucket),
        ("Ingest", lists_beyond_what_it_reads, _list_the_dead_letters),
        ("Import", lists_beyond_what_it_reads, _list_the_whole_staging_bucket),
        ("Import", lists_beyond_what_it_reads, _list_every_import_prefix),
        ("Ingest", service_grants_without_a_source, _key_grant_without_a_source),
        ("Store", service_grants_without_a_source, _log_delivery_without_a_source),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_vhs_boundaries_are_caught(
    templates: dict[str, Template], kind: str, rule: Rule, edit: Callable[[Template], str]
) -> None:
    template = _stack_template(templates, kind)
    assert rule(template) == []
    expected = edit(template)
    (finding,) = rule(template)
    assert expected in finding


def test_a_producer_of_its_own_stages_under_its_own_prefix_only(tmp_path: Path) -> None:
    """`producer_policy_for(name)`: a producer that cannot overwrite another's payloads."""
    from aws_cdk.assertions import Template as CdkTemplate
    from infra_support import cdk_json_context

    from infra.stacks import build

    stacks = build(cdk.App(outdir=str(tmp_path), context=cdk_json_context()), nag=False)
    stacks.ingest.ingest.producer_policy_for("catalogue")
    for bad in ("", "a/b", "../x"):
        with pytest.raises(ValueError, match="producer name"):
            stacks.ingest.ingest.producer_policy_for(bad)
    template = CdkTemplate.from_stack(stacks.ingest).to_json()
    staged = {
        render(resource)
        for policy in resources_of(template, "AWS::IAM::ManagedPolicy").values()
        for s in statements(policy)
        if s["Effect"] == "Allow" and "s3:PutObject" in as_list(s["Action"])
        for resource in as_list(s["Resource"])
    }
    assert {_object_key_pattern(arn) for arn in staged} == {
        f"{shapes.STAGING_PREFIX}*",
        f"{shapes.STAGING_PREFIX}catalogue/*",
    }
    assert producers_write_outside_their_prefix(template) == []


def test_every_trust_boundary_names_tests_that_exist() -> None:
    """docs/reliability.md's trust-boundaries table: each row's tests, rules and doctored
    templates are real, so a renamed or deleted test cannot leave a row unpinned."""
    root = Path(__file__).parents[2]
    text = (root / "docs" / "reliability.md").read_text()
    section = text.split("## Trust boundaries", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 9  # the header and a row for each boundary
    rule_names = {rule.__name__ for rule in RULES}
    for row in rows[1:]:
        pinned = row.rstrip(" |").rsplit(" | ", 1)[1]
        path = None
        tokens = re.findall(r"`([^`]+)`", pinned)
        assert tokens, row
        for token in tokens:
            name, _, edits = token.partition("[")
            for edit in re.findall(r"_\w+", edits):
                assert callable(globals().get(edit)), edit
            if "::" in name:
                file, test = name.split("::")
                path = file or path
                assert path, token
                assert re.search(rf"^def {test}\(", (root / path).read_text(), re.M), token
            elif name.startswith(("test_", "_")):  # a test here, or a doctored template
                assert callable(globals().get(name)), token
            elif name:  # (empty: `[_edit]` alone, checked above)
                assert name in rule_names, token
