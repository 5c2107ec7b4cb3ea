"""Fixtures for the CDK app's tests: the app is synthesized once per session (the first jsii
call in a process costs about 3 s; later stacks 0.2-0.4 s), and its templates are read from
that one synthesis."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The infra package lives at the repository root, which pytest does not put on sys.path.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra_support import Synthesized, synthesize  # noqa: E402


@pytest.fixture(scope="session")
def default_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """The app as `cdk synth` builds it from cdk.json (stage dev, cdk-nag on), plus an
    alarm email so the subscription is synthesized too."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk.out"),
        context={"stage": "prod", "alarmEmail": "oncall@example.com"},
    )


@pytest.fixture(scope="session")
def app(default_app: Synthesized) -> Synthesized:
    return default_app


@pytest.fixture(scope="session")
def store(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.store)


@pytest.fixture(scope="session")
def ingest(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.ingest)


@pytest.fixture(scope="session")
def changes(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.changes)


@pytest.fixture(scope="session")
def gc(app: Synthesized) -> dict[str, Any]:
    return app.template_json(app.stacks.maintenance)
