"""Synthesize the VHS app in-process, the way `cdk synth` does (cdk.json context and all)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra import VhsConfig, VhsStacks, build
from vhs import settings

ROOT = Path(__file__).resolve().parents[2]
# The handlers Lambda calls, as the tests name them.
LAMBDA_HANDLER = settings.INGEST_FUNCTION.handler
CHANGES_HANDLER = settings.CHANGES_FUNCTION.handler
GC_HANDLER = settings.GC_FUNCTION.handler


def cdk_json_context() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    stacks: VhsStacks
    assembly: cdk.cx_api.CloudAssembly
    outdir: Path

    def template_json(self, stack: cdk.Stack) -> dict[str, Any]:
        return self.assembly.get_stack_by_name(stack.stack_name).template

    def template(self, stack: cdk.Stack) -> Template:
        return Template.from_json(self.template_json(stack))

    @property
    def store(self) -> Template:
        return self.template(self.stacks.store)

    @property
    def ingest(self) -> Template:
        return self.template(self.stacks.ingest)

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())

    @property
    def asset(self) -> Path:
        """The Lambda asset's folder (one asset: every function has the same code)."""
        (asset,) = [p for p in self.outdir.iterdir() if p.name.startswith("asset.")]
        return asset


def synthesize(
    outdir: Path,
    *,
    context: dict[str, Any] | None = None,
    config: VhsConfig | None = None,
    **build_options: Any,
) -> Synthesized:
    app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), **(context or {})})
    stacks = build(app, config, **build_options)
    return Synthesized(stacks, app.synth(), outdir)


def as_list(value: Any) -> list[Any]:
    """A CloudFormation field that holds one value or a list of them, as a list."""
    return value if isinstance(value, list) else [value]


def resources_of(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    found = resources_of(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))


def logical_id(template: dict[str, Any], type_: str) -> str:
    """The logical id of the one resource of `type_`."""
    (found,) = resources_of(template, type_)
    return found


def statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return policy["Properties"]["PolicyDocument"]["Statement"]


def ssm_parameter(template: dict[str, Any], name: str) -> str:
    """The logical id of the template parameter that resolves SSM parameter `name`."""
    (found,) = [
        key
        for key, p in template["Parameters"].items()
        if p["Type"] == "AWS::SSM::Parameter::Value<String>" and p["Default"] == name
    ]
    return found


def render(value: Any) -> str:
    """A CloudFormation value as text (Fn::Join flattened, references as ${Name})."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(render(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return "${" + value["Ref"] + "}"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    return json.dumps(value, sort_keys=True)
