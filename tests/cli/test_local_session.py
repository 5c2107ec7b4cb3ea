"""`vhs local up --detach` and `vhs local down`: the documented way to load the local stack's
environment returns, and is what every missing-configuration hint suggests; `vhs local up`
says when it stops."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from vhs import settings
from vhs.local.stack import free_port
from vhs_testing.cli import VHS

# Long enough for a stack to start on a busy machine; a command that hangs fails here.
RETURNS_WITHIN = 60


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"set -e -o pipefail\n{command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RETURNS_WITHIN,
        stdin=subprocess.DEVNULL,
    )


def session_env(tmp_path: Path) -> dict[str, str]:
    """A shell environment with `vhs` on the path (this checkout), no stack configured, and
    a free port for the one it starts."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "vhs").write_text(f'#!/bin/sh\nexec {" ".join(VHS)} "$@"\n')
    (tools / "vhs").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VHS_", "AWS_"))}
    return {
        **env,
        "PATH": f"{tools}{os.pathsep}{env['PATH']}",
        settings.LOCAL_PORT: str(free_port()),
    }


@pytest.mark.parametrize(
    "command",
    ["get b1", "send records.jsonl", "dlq list", "reindex", "gc --dry-run", "verify"],
)
def test_every_missing_configuration_hints_at_the_command_that_returns(tmp_path: Path, command):
    (tmp_path / "records.jsonl").write_text('{"id": "b1"}\n')
    result = shell(f"vhs {command} || echo exit=$?", tmp_path, session_env(tmp_path))
    assert result.stdout.splitlines()[-1] == "exit=2"
    assert settings.LOCAL_ENV_HINT in result.stderr


def test_the_hint_of_a_missing_configuration_loads_the_stack_and_returns(tmp_path: Path):
    """Without configuration, `vhs get` suggests a command; run as written, it returns with
    the stack's environment loaded, and the command then works. Run again, it loads the same
    stack's environment; with other options it refuses; `vhs local down` stops it."""
    env = session_env(tmp_path)
    missing = shell("vhs get b1 || echo exit=$?", tmp_path, env)
    assert settings.LOCAL_ENV_HINT in missing.stderr
    hint = settings.LOCAL_ENV_HINT.removeprefix("try: ")
    port = env[settings.LOCAL_PORT]
    try:
        loaded = shell(
            f"{hint}\n"
            'echo "$AWS_ENDPOINT_URL"\n'
            "echo '{\"n\": 1}' | vhs put b1 - >&2\n"
            f"{hint}\n"  # again, as in a new shell: the same stack, what it holds
            "vhs --json get b1\n"
            "vhs local up --detach --watch-queue || echo exit=$?",
            tmp_path,
            env,
        )
        assert loaded.returncode == 0, loaded.stderr
        endpoint, *rest = loaded.stdout.splitlines()
        assert endpoint == f"http://127.0.0.1:{port}"
        assert json.loads("\n".join(rest[:-1]))["record"] == {"n": 1}
        assert rest[-1] == "exit=2"
        assert "a local stack with other options is running here" in loaded.stderr
        note = json.loads((tmp_path / ".vhs" / "local-up.json").read_text())
    finally:
        down = shell("vhs --json local down", tmp_path, env)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout) == {"stopped": note["pid"]}
    assert not (tmp_path / ".vhs" / "local-up.json").exists()
    with (tmp_path / ".vhs" / "logs" / "local-up.log").open() as log:
        assert any(line.startswith("stopped: the local stack on ") for line in log)
    again = shell("vhs --json local down", tmp_path, env)
    assert json.loads(again.stdout) == {"stopped": None}


def test_a_stack_that_cannot_start_is_one_line_and_exit_1(tmp_path: Path):
    """The port is taken: --detach returns at once, saying so, instead of waiting."""
    env = session_env(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env[settings.LOCAL_PORT] = str(taken.getsockname()[1])
        result = shell("vhs local up --detach || echo exit=$?", tmp_path, env)
    assert result.stdout.strip() == "exit=1"
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: the local stack did not start (")
    assert not (tmp_path / ".vhs" / "local-up.json").exists()


def test_local_up_says_when_it_stops(tmp_path: Path):
    process = subprocess.Popen(
        [*VHS, "local", "up", "--no-pipeline", "--port", str(free_port())],
        cwd=tmp_path,
        env=session_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout and process.stderr
    for line in process.stdout:  # blocks until the stack prints; no sleeping
        if line.strip() == "ready":
            break
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    assert process.stderr.read().splitlines()[-1].startswith("stopped: the local stack on ")
