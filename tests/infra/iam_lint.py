"""parliament (duo-labs' IAM linter) over every IAM policy of the synthesized templates.

CDK templates name resources through intrinsic functions (``Fn::Join`` of ``AWS::Partition``,
``Fn::GetAtt`` of a queue's ``Arn``, a parameter that SSM resolves at deploy time), which
parliament cannot read. They are resolved here as CloudFormation would, with a made-up
account and region: a pseudo parameter to a constant, a resource's ``Ref`` or attribute to
the value its type has (an ARN in that service's format, named after its physical name or
its logical id), and an SSM-typed template parameter to the value that one of the app's own
stacks writes to that parameter. Anything else raises `Unresolvable`, so a policy that
gains a new kind of reference fails the lint loudly rather than being skipped.
"""

from __future__ import annotations

import importlib.resources
import json
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

PARTITION, REGION, ACCOUNT = "aws", "eu-west-1", "111122223333"
PSEUDO_PARAMETERS = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
}
# The policies a template holds: identity policies only (managed policies, a role's inline
# policies and the DefaultPolicy resources CDK writes), the documents parliament lints.
POLICY_RESOURCE_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


class Unresolvable(ValueError):
    """An intrinsic function, resource type or parameter the resolver has no value for."""


def _name(properties: Mapping[str, Any], key: str, logical_id: str) -> str:
    value = properties.get(key, logical_id)
    if not isinstance(value, str):
        raise Unresolvable(f"{logical_id}: {key} is not a plain string: {value!r}")
    return value


def _arn(service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
    return (
        f"arn:{PARTITION}:{service}:{REGION if region else ''}:"
        f"{ACCOUNT if account else ''}:{resource}"
    )


# For each resource type a policy refers to: its Ref, and its attributes, from its logical id
# and properties (the physical name where the template gives one).
Namer = Callable[[str, Mapping[str, Any]], str]
REFERENCES: dict[str, tuple[Namer, dict[str, Namer]]] = {
    "AWS::S3::Bucket": (
        lambda lid, p: _name(p, "BucketName", lid.lower()),
        {"Arn": lambda lid, p: f"arn:{PARTITION}:s3:::{_name(p, 'BucketName', lid.lower())}"},
    ),
    "AWS::SQS::Queue": (
        lambda lid, p: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{_name(p, 'QueueName', lid)}",
        {"Arn": lambda lid, p: _arn("sqs", _name(p, "QueueName", lid))},
    ),
    "AWS::SNS::Topic": (
        lambda lid, p: _arn("sns", _name(p, "TopicName", lid)),
        {"TopicArn": lambda lid, p: _arn("sns", _name(p, "TopicName", lid))},
    ),
    "AWS::KMS::Key": (
        lambda lid, p: f"key-{lid.lower()}",
        {"Arn": lambda lid, p: _arn("kms", f"key/key-{lid.lower()}")},
    ),
    "AWS::Lambda::Function": (
        lambda lid, p: _name(p, "FunctionName", lid),
        {"Arn": lambda lid, p: _arn("lambda", f"function:{_name(p, 'FunctionName', lid)}")},
    ),
    "AWS::Logs::LogGroup": (
        lambda lid, p: _name(p, "LogGroupName", lid),
        {"Arn": lambda lid, p: _arn("logs", f"log-group:{_name(p, 'LogGroupName', lid)}:*")},
    ),
    "AWS::IAM::Role": (
        lambda lid, p: _name(p, "RoleName", lid),
        {"Arn": lambda lid, p: _arn("iam", f"role/{_name(p, 'RoleName', lid)}", region=False)},
    ),
    "AWS::DynamoDB::Table": (
        lambda lid, p: _name(p, "TableName", lid),
        {
            "Arn": lambda lid, p: _arn("dynamodb", f"table/{_name(p, 'TableName', lid)}"),
            "StreamArn": lambda lid, p: _arn(
                "dynamodb", f"table/{_name(p, 'TableName', lid)}/stream/2024-01-01T00:00:00.000"
            ),
        },
    ),
    "AWS::StepFunctions::StateMachine": (
        lambda lid, p: _arn("states", f"stateMachine:{_name(p, 'StateMachineName', lid)}"),
        {"Arn": lambda lid, p: _arn("states", f"stateMachine:{_name(p, 'StateMachineName', lid)}")},
    ),
}


@dataclass(frozen=True)
class Resolver:
    """Resolves the intrinsic functions of one template of the app (`templates`: every
    template of the app, by stack name, for the SSM parameters one stack writes and another
    reads)."""

    templates: Mapping[str, Mapping[str, Any]]
    stack: str

    @property
    def template(self) -> Mapping[str, Any]:
        return self.templates[self.stack]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self._ref(argument)
            if key == "Fn::GetAtt":
                return self._attribute(*argument)
            if key == "Fn::Join":
                separator, parts = argument
                return separator.join(self._text(part) for part in parts)
            if key == "Fn::Select":
                index, items = argument
                return self(items)[int(self(index))]
            if key == "Fn::Split":
                separator, text = argument
                return self._text(text).split(separator)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolvable(f"{self.stack}: no resolver for {key}: {argument!r}")
        return {key: self(item) for key, item in value.items()}

    def _text(self, value: Any) -> str:
        resolved = self(value)
        if not isinstance(resolved, str):
            raise Unresolvable(f"{self.stack}: {value!r} does not resolve to text")
        return resolved

    def _ref(self, name: str) -> str:
        if name in PSEUDO_PARAMETERS:
            return PSEUDO_PARAMETERS[name]
        if name in self.template.get("Parameters", {}):
            return self._parameter(name)
        resource = self.template["Resources"].get(name)
        if resource is None:
            raise Unresolvable(f"{self.stack}: Ref to {name}, which is not in the template")
        ref, _ = self._namers(name, resource)
        return ref(name, self._names(resource))

    def _attribute(self, logical_id: str, attribute: str) -> str:
        resource = self.template["Resources"][logical_id]
        _, attributes = self._namers(logical_id, resource)
        if attribute not in attributes:
            raise Unresolvable(f"{self.stack}: no value for {resource['Type']}.{attribute}")
        return attributes[attribute](logical_id, self._names(resource))

    def _namers(self, logical_id: str, resource: Mapping[str, Any]) -> tuple[Namer, dict]:
        if resource["Type"] not in REFERENCES:
            raise Unresolvable(f"{self.stack}: no value for a {resource['Type']} ({logical_id})")
        return REFERENCES[resource["Type"]]

    def _names(self, resource: Mapping[str, Any]) -> dict[str, Any]:
        """A resource's physical names (BucketName, QueueName, ...), resolved."""
        properties = resource.get("Properties", {})
        return {key: self(value) for key, value in properties.items() if key.endswith("Name")}

    def _parameter(self, name: str) -> str:
        """An SSM-typed parameter: the value the stack that writes that SSM parameter gives
        it (resolved in that stack's template)."""
        parameter = self.template["Parameters"][name]
        if parameter["Type"] != "AWS::SSM::Parameter::Value<String>":
            raise Unresolvable(f"{self.stack}: parameter {name} of type {parameter['Type']}")
        for stack, template in self.templates.items():
            for resource in template["Resources"].values():
                properties = resource.get("Properties", {})
                if (
                    resource["Type"] == "AWS::SSM::Parameter"
                    and properties.get("Name") == parameter["Default"]
                ):
                    return Resolver(self.templates, stack)._text(properties["Value"])
        raise Unresolvable(f"{self.stack}: no stack of the app writes {parameter['Default']}")


@dataclass(frozen=True)
class PolicyDocument:
    where: str
    document: dict[str, Any]


def policy_documents(templates: Mapping[str, Mapping[str, Any]]) -> Iterator[PolicyDocument]:
    """Every identity policy of the app (`templates` by a name for each stack), its intrinsic
    functions resolved."""
    for stack, template in templates.items():
        resolve = Resolver(templates, stack)
        for logical_id, resource in template["Resources"].items():
            properties = resource.get("Properties", {})
            where = f"{stack}:{logical_id}"
            if resource["Type"] in POLICY_RESOURCE_TYPES:
                yield PolicyDocument(where, resolve(properties["PolicyDocument"]))
            elif resource["Type"] == "AWS::IAM::Role":
                for inline in properties.get("Policies", []):
                    yield PolicyDocument(
                        f"{where}/{inline['PolicyName']}", resolve(inline["PolicyDocument"])
                    )


@dataclass(frozen=True, order=True)
class Finding:
    where: str
    issue: str
    detail: str


def _provide_pkg_resources() -> None:
    """parliament 1.6.4 finds its two data files with ``pkg_resources.resource_filename``.
    pkg_resources is part of setuptools, which the project's venvs do not install (Makefile)
    and whose releases from 81 on no longer ship it; importlib.resources gives the same path
    for a package installed as files."""
    if "pkg_resources" in sys.modules:
        return
    try:
        import pkg_resources  # noqa: F401
    except ModuleNotFoundError:
        shim = types.ModuleType("pkg_resources")

        def resource_filename(package: str, name: str) -> str:
            return str(importlib.resources.files(package) / name)

        shim.resource_filename = resource_filename  # type: ignore[attr-defined]
        sys.modules["pkg_resources"] = shim


def lint(policies: Iterable[PolicyDocument]) -> list[Finding]:
    """parliament's findings (every severity it reports, INFO included; the community
    auditors too) on each policy."""
    _provide_pkg_resources()
    import parliament

    findings = []
    for policy in policies:
        analyzed = parliament.analyze_policy_string(
            json.dumps(policy.document), include_community_auditors=True
        )
        for finding in analyzed.findings:
            if finding.severity == "MUTE":
                continue
            findings.append(Finding(policy.where, finding.issue, _detail(finding)))
    return sorted(findings)


def _detail(finding: Any) -> str:
    """A finding's detail as stable text: its message or structure (such as the actions and
    the resource formats they need), and what its location names besides the position in
    the JSON parliament was handed (such as the actions a community auditor found)."""
    detail = finding.detail
    detail = detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True)
    location = {
        key: value
        for key, value in finding.location.items()
        if key not in ("line", "column", "filepath") and isinstance(value, str | list)
    }
    return " ".join(part for part in (detail, location and json.dumps(location)) if part)
