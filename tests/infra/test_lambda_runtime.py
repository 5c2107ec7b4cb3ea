"""The functions on the runtime they deploy on.

The CDK app deploys every function on Lambda's Python LAMBDA_PYTHON_VERSION (infra/config.py),
and `make setup` makes the project's venv on that Python (tools/runtime_python.py): a test
here fails if the two differ. Then the Lambda asset, as the CDK app synthesizes it, is
imported whole and each handler invoked once on a sample event, in a process of that Python
with only the asset, the runtime's own packages (boto3) and the Powertools layer's on its
path, as `vhs invoke` runs them: against the local stack, with its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from infra_support import Synthesized
from packaging.requirements import Requirement

from infra.config import LAMBDA_PYTHON_VERSION
from vhs import settings
from vhs.settings import FUNCTIONS
from vhs_testing.cli import local_env
from vhs_testing.events import EVENTS

__all__ = ["local_env"]  # the fixture: `vhs local up` for this module

ROOT = Path(__file__).resolve().parents[2]
# What Lambda's Python runtime provides beside the standard library, and what the managed
# Powertools layer ships (Powertools with its parser extra: the read API validates with it).
RUNTIME = ("boto3",)
LAYER = ("aws-lambda-powertools[parser]",)

# One sample event a function (events/README.md), and what its response must show.
SAMPLES = {
    "ingest": "sam-sqs-receive-message.json",
    "changes": "sam-dynamodb-update.json",
    "gc": "sam-cloudwatch-scheduled-event.json",
    "read-api": "sam-read-api-get.json",
    "reindex": "reindex-segment.json",
    "import": None,  # a plan of an empty prefix (below): events/ has no import event
}
IMPORT_PLAN = {"plan": {"prefix": "imports/runtime-check/", "format": "jsonl"}, "execution": "rt"}


def test_the_venv_runs_the_python_the_functions_deploy_on(app: Synthesized) -> None:
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == LAMBDA_PYTHON_VERSION
    stacks = [getattr(app.stacks, name) for name in vars(app.stacks) if name != "config"]
    runtimes = {
        resource["Properties"]["Runtime"]
        for stack in stacks
        for resource in app.template_json(stack)["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    assert runtimes == {f"python{LAMBDA_PYTHON_VERSION}"}
    # The Makefile reads the version from the same line (RUNTIME_VERSION).
    makefile = (ROOT / "Makefile").read_text()
    assert "LAMBDA_PYTHON_VERSION" in makefile and "infra/config.py" in makefile


def closure(requirements: tuple[str, ...]) -> set[str]:
    """The installed distributions `requirements` need, with their extras, transitively."""
    found: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = requirement.name.lower().replace("_", "-")
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in found:
            continue
        found.add(key)
        for text in metadata.requires(name) or ():
            needed = Requirement(text)
            environments = [{"extra": extra} for extra in requirement.extras or {""}]
            if needed.marker is None or any(needed.marker.evaluate(e) for e in environments):
                pending.append(needed)
    return {key.partition("[")[0] for key in found}


def top_level(distribution: str) -> set[str]:
    """The top-level modules and packages a distribution installs (their names on disk)."""
    names = set()
    for file in metadata.distribution(distribution).files or ():
        head = file.parts[0]
        if head.endswith((".dist-info", ".data")) or head in ("__pycache__", "..", "bin"):
            continue
        names.add(head)
    return names


@pytest.fixture(scope="module")
def runtime_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of links to exactly the runtime's and the layer's packages, from this venv
    (the same pins: requirements.txt)."""
    folder = tmp_path_factory.mktemp("runtime-packages")
    site = Path(metadata.distribution("boto3").locate_file(""))
    for distribution in sorted(closure(RUNTIME + LAYER)):
        for name in top_level(distribution):
            (folder / name).symlink_to(site / name)
    return folder


# Runs in the child: only the asset, the runtime's and the layer's packages on sys.path.
DRIVER = r"""
import importlib, json, os, sys, time
asset, packages, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
samples = json.loads(sys.argv[4])
sys.path[:0] = [asset, packages]

class Context:
    def __init__(self, name, memory):
        self.function_name, self.memory_limit_in_mb = f"vhs-{name}", memory
        self.aws_request_id, self.function_version = "runtime-check", "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:vhs-{name}"
        self.log_group_name, self.log_stream_name = f"/aws/lambda/vhs-{name}", "runtime-check"
        self._deadline = time.monotonic() + 900
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.monotonic()) * 1000)

modules = []
for folder, _, files in os.walk(asset):
    for file in sorted(files):
        if file.endswith(".py"):
            relative = os.path.relpath(os.path.join(folder, file), asset)[:-3]
            name = relative.replace(os.sep, ".").removesuffix(".__init__")
            importlib.import_module(name)
            modules.append(name)
answers = {}
for name, (module, event_file, memory) in samples.items():
    event = plan if event_file is None else json.load(open(event_file))
    handler = importlib.import_module(module).handler
    answers[name] = handler(event, Context(name, memory))
foreign = sorted(
    name for name, module in sys.modules.items()
    if getattr(module, "__file__", None)
    and not module.__file__.startswith((asset, packages, sys.base_prefix))
)
print(json.dumps({"python": sys.version, "modules": modules, "answers": answers,
                  "foreign": foreign}, default=str))
"""


def import_environment(env: dict[str, str]) -> dict[str, str]:
    """What the Import stack gives its function, which `vhs local up` has no stack for: its
    files under a prefix of the local staging bucket."""
    return {
        settings.IMPORT_BUCKET: env[settings.STAGING_BUCKET],
        settings.IMPORT_PREFIX: "imports/",
        settings.IMPORT_RESULTS_PREFIX: "import-results/",
    }


def test_the_asset_imports_and_each_handler_runs_with_only_what_lambda_provides(
    app: Synthesized, runtime_path: Path, local_env: dict[str, str]
) -> None:
    from vhs_ops.local.invoke import configured_memory

    samples = {
        name: (
            FUNCTIONS[name].module,
            None if SAMPLES[name] is None else str(EVENTS / SAMPLES[name]),
            configured_memory(name),
        )
        for name in FUNCTIONS
    }
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=local_env["AWS_ENDPOINT_URL"],
        region_name=local_env["AWS_DEFAULT_REGION"],
    )
    s3.put_object(
        Bucket=local_env[settings.STAGING_BUCKET],
        Key=IMPORT_PLAN["plan"]["prefix"] + "records.jsonl",
        Body=b'{"id": "rt-1", "updated_at": "2026-01-01T00:00:00Z", "record": {}}\n',
    )
    # -I: no PYTHONPATH, no user site; -S: no site-packages, this venv's or the system's.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", DRIVER, str(app.asset), str(runtime_path),
         json.dumps(IMPORT_PLAN), json.dumps(samples)],
        env={**local_env, **import_environment(local_env)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["python"].startswith(f"{LAMBDA_PYTHON_VERSION}.")
    asset_modules = {
        ".".join(p.relative_to(app.asset).with_suffix("").parts).removesuffix(".__init__")
        for p in app.asset.rglob("*.py")
    }
    assert set(report["modules"]) == asset_modules and "handlers.ingest" in asset_modules
    assert report["foreign"] == []
    answers = report["answers"]
    assert set(answers) == set(FUNCTIONS)
    assert answers["ingest"] == {"batchItemFailures": []}  # "Hello from SQS!": dead-lettered
    assert answers["changes"] == {"batchItemFailures": []}  # images that are no VHS items
    assert answers["gc"]["shards"] == 256
    assert answers["read-api"]["statusCode"] == 404  # demo-1 is not on this stack
    assert answers["reindex"]["done"] is True and answers["reindex"]["segment"] == 0
    assert (answers["import"]["files"], answers["import"]["chunks"]) == (1, 1)
    assert os.path.isdir(runtime_path / "boto3") and not (runtime_path / "moto").exists()
