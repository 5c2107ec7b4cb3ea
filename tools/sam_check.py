"""`make sam-check`: the real AWS SAM CLI against the templates `make sam-synth` and `make synth`
write, as far as a machine without a container runtime allows.

Run with the SAM CLI's own venv (.venv-sam), which can import `samcli`:

* `vhs local up` (the project's venv) starts the local stack and writes its `--env-vars` file;
* for each function (ingest, changes, gc), SAM's own providers resolve it from
  cdk.out.sam/ by the name the docs use, with its handler, its code (which holds the handler
  module), its runtime and architecture, and its one layer (a local directory holding the
  pinned Powertools); and SAM's own environment resolution gives it the local stack's values
  from the `--env-vars` file, the endpoint a container reaches included;
* `sam local invoke NAME -t … -e … --env-vars …` gets as far as the container runtime (or,
  where there is one, runs);
* `sam validate --lint` passes on every deployed template (cdk.out/).

Exits non-zero, naming each failed check.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess  # nosec B404
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lambdas"))

from vhs import settings  # noqa: E402 - after the path

TEMPLATES = {
    "ingest": "Ingest",
    "changes": "Changes",
    "gc": "Maintenance",
    "read-api": "ReadApi",
    "reindex": "Reindex",
}
EVENTS = {
    "ingest": "events/sqs-small-record.json",
    "changes": "events/sam-dynamodb-update.json",
    "gc": "events/sam-cloudwatch-scheduled-event.json",
    "read-api": "events/sam-read-api-get.json",
    "reindex": "events/reindex-segment.json",
}


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, ok: bool, what: str, detail: Any = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
        if not ok:
            self.failed.append(what)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_local_stack(vhs: str, env_file: Path, port: int) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen(  # nosec B603
        [vhs, "local", "up", "--port", str(port), "--sam-env-vars", str(env_file), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tempfile.mkdtemp(prefix="vhs-sam-"),
    )
    if process.stdout is None:
        raise SystemExit("vhs local up: no output to read")
    printed = []
    for line in process.stdout:
        if line.strip() == "ready":  # after the environment, one JSON document (--json)
            text = "".join(printed)
            exported, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
            return process, exported
        printed.append(line)
    raise SystemExit(f"vhs local up exited with {process.wait()}")


def powertools_version(layer_dir: Path) -> str | None:
    version = layer_dir / "python" / "aws_lambda_powertools" / "shared" / "version.py"
    if not version.is_file():
        return None
    found = re.search(r'VERSION = "([^"]+)"', version.read_text())
    return found.group(1) if found else None


def check_function(
    checks: Checks, name: str, env_vars: dict, exported: dict, port: int, sam_out: Path
) -> None:
    from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
    from samcli.lib.providers.sam_function_provider import SamFunctionProvider
    from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

    template = sam_out / f"Vhs-dev-{TEMPLATES[name]}.template.json"
    stacks, _ = SamLocalStackProvider.get_stacks(str(template))
    provider = SamFunctionProvider(stacks)
    function = provider.get(name)
    checks.check(function is not None, f"{name}: SAM resolves the function by its name")
    if function is None:
        return
    spec = settings.FUNCTIONS[name]
    checks.check(function.handler == spec.handler, f"{name}: handler", function.handler)
    code = Path(function.codeuri)
    if not code.is_absolute():
        code = sam_out / code
    module = code / (spec.module.replace(".", "/") + ".py")
    checks.check(module.is_file(), f"{name}: its code holds {spec.module}", code)
    checks.check(function.runtime == "python3.14", f"{name}: runtime", function.runtime)
    checks.check(function.architectures == ["arm64"], f"{name}: arm64", function.architectures)
    layers = function.layers
    checks.check(len(layers) == 1, f"{name}: one layer", [layer.name for layer in layers])
    if layers:
        layer_dir = Path(layers[0].codeuri)
        if not layer_dir.is_absolute():
            layer_dir = sam_out / layer_dir
        pinned = re.search(
            r"^aws-lambda-powertools==(\S+)", (ROOT / "requirements.txt").read_text(), re.M
        )
        version = powertools_version(layer_dir)
        checks.check(
            pinned is not None and version == pinned.group(1),
            f"{name}: the layer is a local directory holding Powertools {version}",
            layer_dir,
        )

    runner = LocalLambdaRunner(
        local_runtime=None,  # type: ignore[arg-type] - resolving, not running
        function_provider=provider,
        cwd=str(sam_out),
        real_path=str(sam_out),
        aws_region="us-east-1",
        env_vars_values=env_vars,
    )
    environment = runner._make_env_vars(function).resolve()
    endpoint = f"http://host.docker.internal:{port}"
    checks.check(
        environment.get("AWS_ENDPOINT_URL") == endpoint,
        f"{name}: AWS_ENDPOINT_URL is the local stack as a container reaches it",
        environment.get("AWS_ENDPOINT_URL"),
    )
    given = env_vars["Parameters"]
    declared = {key for key in environment if key.startswith("VHS_")}
    wrong = {
        key: environment[key] for key in declared & given.keys() if environment[key] != given[key]
    }
    checks.check(
        bool(declared & given.keys()) and not wrong,
        f"{name}: the --env-vars file sets every VHS_* variable it names",
        wrong,
    )
    # The store's settings are the local stack's, unset ones included (empty: the library's
    # default), never the deployed template's (its body prefix, say).
    store = {key: environment.get(key) for key in settings.STORE_VARIABLES if key in declared}
    expected = {key: exported.get(key, "") for key in store}
    checks.check(
        store == expected,
        f"{name}: its store settings are the local stack's",
        {"function": store, "local stack": expected},
    )


def check_invoke(checks: Checks, sam: str, name: str, env_file: Path, sam_out: Path) -> None:
    template = sam_out / f"Vhs-dev-{TEMPLATES[name]}.template.json"
    command = [sam, "local", "invoke", name, "-t", str(template), "-e", EVENTS[name]]
    command += ["--env-vars", str(env_file)]
    environment = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    done = subprocess.run(  # nosec B603
        command, capture_output=True, text=True, cwd=ROOT, timeout=600, env=environment
    )
    output = done.stdout + done.stderr
    warnings = output.count("Cannot detect function id")
    if "requires a container runtime" not in output:
        checks.check(
            done.returncode == 0 and warnings == 0, f"sam local invoke {name}", output[-2000:]
        )
        return
    checks.check(
        warnings == 0,
        f"sam local invoke {name}: reaches the container runtime (none here), no path warnings",
        output[-1000:],
    )


def _absolute(path: str) -> str:
    return str(Path(path).resolve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Absolute: the local stack runs in a directory of its own (its .vhs/ files stay there).
    parser.add_argument("--vhs", default=str(ROOT / ".venv/bin/vhs"), type=_absolute)
    parser.add_argument("--sam", default=str(Path(sys.executable).parent / "sam"))
    parser.add_argument("--sam-out", default=str(ROOT / "cdk.out.sam"))
    parser.add_argument("--deployed", default=str(ROOT / "cdk.out"))
    args = parser.parse_args(argv)
    checks = Checks()
    sam_out = Path(args.sam_out)

    env_file = Path(tempfile.mkdtemp(prefix="vhs-sam-env-")) / "sam-env.json"
    port = free_port()
    process, exported = start_local_stack(args.vhs, env_file, port)
    try:
        env_vars = json.loads(env_file.read_text())
        for name in TEMPLATES:
            check_function(checks, name, env_vars, exported, port, sam_out)
        for name in TEMPLATES:
            check_invoke(checks, args.sam, name, env_file, sam_out)
    finally:
        process.terminate()
        process.wait(timeout=30)

    for template in sorted(Path(args.deployed).glob("*.template.json")):
        done = subprocess.run(  # nosec B603
            [args.sam, "validate", "--lint", "-t", str(template)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        checks.check(
            done.returncode == 0,
            f"sam validate --lint {template.name}",
            (done.stdout + done.stderr)[-1500:],
        )
    if checks.failed:
        print(f"{len(checks.failed)} check(s) failed", file=sys.stderr)
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
