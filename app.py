#!/usr/bin/env python3
"""The VHS CDK app: `make synth`, or `npx cdk deploy --all -c stage=prod -c alarmEmail=...`.

Configuration comes from CDK context (cdk.json and `-c key=value`); see infra/config.py.
Synthesis is offline: no AWS credentials, no account lookups, no Docker.
"""

import json
import sys
from pathlib import Path

import aws_cdk as cdk

# The constructs read the resource shapes (vhs.shapes) and the functions' settings
# (vhs.settings) from the vhs package in lambdas/ (installed editable by `make setup`; added
# here too so a bare `python app.py` works).
sys.path.insert(0, str(Path(__file__).resolve().parent / "lambdas"))

from infra import build

ROOT = Path(__file__).resolve().parent

# cdk.json's context (feature flags included) as defaults, so `python app.py` synthesizes
# what `cdk synth` does; the CLI's own context (cdk.json, -c) still takes precedence.
app = cdk.App(context=json.loads((ROOT / "cdk.json").read_text())["context"])
build(app)
app.synth()
