"""cdk-nag acknowledgements: every one names its rule, its exact finding and a reason.

cdk-nag 3 runs as a policy-validation plugin (`Validations.of(app).add_plugins(...)`); a
finding that is not acknowledged fails synthesis. Findings that carry a detail, such as
IAM5's wildcard resources, are acknowledged one by one: an acknowledgement of the object
ARNs under ``bodies/*`` does not cover any other wildcard.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"
# A reason has to say why, not just "ok": a floor on its length keeps them specific.
MIN_REASON_LENGTH = 40


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"the reason for acknowledging {rule} must say why: {reason!r}")
    rule_id = f"{PACK}::{rule}" + (f"[{finding}]" if finding else "")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


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
