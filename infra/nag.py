"""cdk-nag acknowledgements and checkov skips: every one names its rule, its exact finding
(or resource) and a reason.

cdk-nag 3 runs as a policy-validation plugin (`Validations.of(app).add_plugins(...)`); a
finding that is not acknowledged fails synthesis. Findings that carry a detail, such as
IAM5's wildcard resources, are acknowledged one by one: an acknowledgement of the object
ARNs under ``bodies/*`` does not cover any other wildcard.

checkov (`make audit`) reads the synthesized templates. A check skipped for one resource is
skipped in that resource's template metadata (`skip_checkov`); checks skipped for the whole
project are in .checkov.yaml, each with its reason.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"
# A reason has to say why, not just "ok": a floor on its length keeps them specific.
MIN_REASON_LENGTH = 40


def _require_reason(rule: str, reason: str) -> None:
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"the reason for acknowledging {rule} must say why: {reason!r}")


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    _require_reason(rule, reason)
    rule_id = f"{PACK}::{rule}" + (f"[{finding}]" if finding else "")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def acknowledge_wildcard(construct: IConstruct, arn: str, reason: str) -> None:
    """Acknowledge IAM5 for the one wildcard resource `arn` in `construct`'s policies (an
    object ARN such as ``.../bodies/*``), and for no other."""
    acknowledge(construct, "AwsSolutions-IAM5", reason, finding=wildcard_resource(construct, arn))


def skip_checkov(construct: IConstruct, check: str, reason: str) -> None:
    """Skip one checkov check for the CloudFormation resource of `construct` (its default
    child): checkov reads ``Metadata.checkov.skip`` and reports the check as skipped there,
    with this reason, and still runs it on every other resource."""
    _require_reason(check, reason)
    resource = construct.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to annotate")
    skips = (resource.get_metadata("checkov") or {}).get("skip", [])
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check, "comment": reason}]})


def wildcard_resource(scope: IConstruct, arn: str) -> str:
    """The IAM5 finding detail for a resource ARN, as cdk-nag renders it: references as
    ``<AWS::Region>`` or ``<Logical.Attribute>``, joins flattened."""
    return "Resource::" + _render(cdk.Stack.of(scope).resolve(arn))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(_render(part) for part in parts)
    return json.dumps(value, separators=(",", ":"))
