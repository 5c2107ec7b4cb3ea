"""What `sam local invoke` needs from a template, and only in the synth made for it.

`make sam-synth` synthesizes the app with context ``samLocal=true`` into cdk.out.sam/. That
template differs from the deployed one in three ways, so the SAM CLI can run each function in
its Lambda container against `vhs local up`, offline:

* Powertools comes from a local layer (the pinned release, pip-installed into
  .sam/powertools-layer/python by `make sam-layer`) instead of the managed layer's ARN, which
  the deployed template reads from a public SSM parameter at deploy time: SAM reads such a
  parameter's name as the ARN ("Invalid Layer Arn"), and a real ARN makes it download the
  layer from AWS, with credentials.
* Each function declares AWS_ENDPOINT_URL: SAM passes a container only the variables its
  template declares. Its value here is the default local stack as seen from a container;
  `vhs local up` writes every other value into .vhs/sam-env.json for `--env-vars`.
* Every resource carries ``SamResourceId`` metadata: SAM otherwise derives a resource's name
  from its construct path, warns for each path deeper than it parses, and falls back to the
  hash-suffixed logical id. The functions are named as `vhs invoke` names them (ingest,
  changes, gc); the functions carry their name in the deployed templates too (metadata only).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from vhs.shapes.local import CONTAINER_ENDPOINT

from .runtime import architecture, python_runtime

RESOURCE_ID = "SamResourceId"
ROOT = Path(__file__).resolve().parent.parent
# `make sam-layer` installs the pinned Powertools here (python/ is the layer's layout).
LAYER_DIR = ROOT / ".sam" / "powertools-layer"
LOCAL_ENVIRONMENT = {"AWS_ENDPOINT_URL": CONTAINER_ENDPOINT}


def local_powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    if not (LAYER_DIR / "python" / "aws_lambda_powertools").is_dir():
        raise FileNotFoundError(f"{LAYER_DIR} holds no Powertools: run `make sam-layer` first")
    return lambda_.LayerVersion(
        scope,
        "PowertoolsLocal",
        code=lambda_.Code.from_asset(str(LAYER_DIR)),
        compatible_runtimes=[python_runtime()],
        compatible_architectures=[architecture()],
        description="Powertools for `sam local invoke` only (never deployed)",
    )


@jsii.implements(cdk.IAspect)
class NameEveryResource:
    """Gives every resource that has no SAM name yet its logical id as one, so SAM neither
    parses its construct path nor warns that it cannot."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, cdk.CfnResource) and RESOURCE_ID not in (
            node.cfn_options.metadata or {}
        ):
            node.add_metadata(RESOURCE_ID, node.logical_id)


def prepare(stack: cdk.Stack) -> None:
    cdk.Aspects.of(stack).add(NameEveryResource())
