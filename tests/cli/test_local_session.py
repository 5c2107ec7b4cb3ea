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
from vhs_ops.local import owner
from vhs_ops.local.stack import free_port
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


# --- whose a stack is -------------------------------------------------------------------------


def test_local_up_in_the_foreground_refuses_a_port_a_stack_holds(tmp_path: Path):
    """`vhs local up` on a port another directory's stack holds: one line naming that stack,
    exit 1; it never says `ready`, nor that what it held is gone."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    env = session_env(first)
    port = env[settings.LOCAL_PORT]
    try:
        assert shell("vhs local up --detach --no-pipeline", first, env).returncode == 0
        result = subprocess.run(
            [*VHS, "local", "up", "--port", port, "--no-pipeline"],
            cwd=second,
            env=env,
            capture_output=True,
            text=True,
            timeout=RETURNS_WITHIN,
        )
    finally:
        shell("vhs local down", first, env)
    assert result.returncode == 1, result.stderr
    assert "ready" not in result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: the local stack did not start (port {port} is held by ")
    assert f"started in the background from {first} (pid " in line


def test_two_detached_stacks_in_two_directories_keep_their_own_records(tmp_path: Path):
    """A second directory's `up --detach` on the port the first holds is refused, naming the
    first; on another port it starts a stack of its own. Each directory's commands reach its
    own stack, `status` says which runs where, and `down` in one leaves the other serving."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    env = session_env(first)
    port, other_port = env[settings.LOCAL_PORT], str(free_port())
    up = 'eval "$(vhs local up --detach --no-pipeline)"\n'
    try:
        a = shell(f'{up}echo \'{{"d": "a"}}\' | vhs put a1 - >&2\nvhs local status', first, env)
        assert a.returncode == 0, a.stderr
        assert a.stdout.startswith(f"running: the local stack from {first} (pid ")
        assert f"on http://127.0.0.1:{port} (port {port}), since " in a.stdout
        taken = shell("vhs local up --detach --no-pipeline || echo exit=$?", second, env)
        assert taken.stdout.strip() == "exit=1"
        [line] = [x for x in taken.stderr.splitlines() if x.startswith("error:")]
        assert line.startswith(
            f"error: the local stack did not start (port {port} is held by the local stack "
            f"started in the background from {first} (pid "
        )
        status = shell("vhs --json local status || echo exit=$?", second, env)
        document, exit_line = status.stdout.rsplit("\n", 2)[0], status.stdout.split("\n")[-2]
        assert exit_line == "exit=3"
        held = json.loads(document)
        assert held["running"] is False
        assert f"from {first} (pid " in held["default_port_held_by"]
        env_b = {**env, settings.LOCAL_PORT: other_port}
        b = shell(
            f'{up}echo \'{{"d": "b"}}\' | vhs put b1 - >&2\n'
            "vhs get b1; echo\nvhs get a1 || echo exit=$?",
            second,
            env_b,
        )
        assert b.returncode == 0, b.stderr
        assert b.stdout.splitlines() == ['{"d":"b"}', "exit=3"]
        down_b = shell("vhs local down", second, env_b)
        assert down_b.returncode == 0, down_b.stderr
        still = shell(f"{up}vhs get a1; echo\nvhs get b1 || echo exit=$?", first, env)
        assert still.stdout.splitlines() == ['{"d":"a"}', "exit=3"], still.stderr
    finally:
        for directory in (first, second):
            shell("vhs local down", directory, env)


def test_two_detached_starts_at_once_in_one_directory_start_one_stack(tmp_path: Path):
    env = session_env(tmp_path)
    starts = [
        subprocess.Popen(
            [*VHS, "--json", "local", "up", "--detach", "--no-pipeline"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        results = [start.communicate(timeout=RETURNS_WITHIN) for start in starts]
        assert [start.returncode for start in starts] == [0, 0], results
        endpoints = {json.loads(out)["AWS_ENDPOINT_URL"] for out, _ in results}
        assert endpoints == {f"http://127.0.0.1:{env[settings.LOCAL_PORT]}"}
        assert sum("already running here" in err for _, err in results) == 1
    finally:
        down = shell("vhs --json local down", tmp_path, env)
    assert json.loads(down.stdout)["stopped"] is not None
    again = shell("vhs --json local down", tmp_path, env)
    assert json.loads(again.stdout) == {"stopped": None}
    assert not owner.listening(int(env[settings.LOCAL_PORT]))


def test_a_stack_killed_outright_leaves_no_server_and_down_signals_nothing(tmp_path: Path):
    """kill -9 of the detached stack: its moto server exits with it (the port is free
    again), and `down` removes the stale note without signalling the pid it names."""
    env = session_env(tmp_path)
    port = int(env[settings.LOCAL_PORT])
    assert shell("vhs local up --detach --no-pipeline", tmp_path, env).returncode == 0
    note = json.loads((tmp_path / ".vhs" / "local-up.json").read_text())
    os.kill(note["pid"], signal.SIGKILL)
    while owner.listening(port):  # bounded by the test's timeout; the server polls its parent
        pass
    down = shell("vhs local down", tmp_path, env)
    assert down.returncode == 0
    assert "no process was signalled" in down.stderr
    assert not (tmp_path / ".vhs" / "local-up.json").exists()


@pytest.fixture
def no_signals(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[int, int]]:
    """This test's directory as the current one, and every os.kill recorded, not sent: a
    wrong pid -1 must not reach every process."""
    sent: list[tuple[int, int]] = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "kill", lambda pid, signum: sent.append((pid, signum)))
    return sent


def down_with(note: dict, *, lock_held: bool) -> int:
    """`vhs local down` in the current directory, its stack's note being `note`, and its
    lock held (by this process: as a running stack would hold it) or free."""
    from vhs_ops.cli import local_session
    from vhs_ops.cli.app import main

    local_session.STATE.parent.mkdir(parents=True, exist_ok=True)
    local_session.STATE.write_text(json.dumps(note))
    lock = local_session._lock(local_session.LOCK) if lock_held else None
    try:
        return main(["local", "down"])
    finally:
        if lock is not None:
            os.close(lock)


@pytest.mark.parametrize("pid", ["missing", 0, -1, 1, "4211", True])
@pytest.mark.parametrize("lock_held", [True, False], ids=["lock held", "lock free"])
def test_down_signals_nothing_for_a_note_that_names_no_process(
    pid, lock_held, no_signals, capsys, tmp_path: Path
):
    """A note without a pid, or with 0, -1 (process groups, or every process, to kill(2)),
    1 or not an int, signals nothing. With the lock free no stack runs: the note is stale,
    removed, exit 0. With it held, `down` cannot prove which process to stop: exit 1."""
    note = {"env": {}, "log": "x"} | ({} if pid == "missing" else {"pid": pid})
    status = down_with(note, lock_held=lock_held)
    err = capsys.readouterr().err
    assert no_signals == []
    assert "please report" not in err
    if lock_held:
        assert status == 1
        assert "names no single process" in err and "nothing was signalled" in err
    else:
        assert status == 0
        assert "no process was signalled" in err
        assert not (tmp_path / ".vhs" / "local-up.json").exists()


@pytest.mark.parametrize("lock_held", [True, False], ids=["lock held", "lock free"])
def test_down_never_signals_a_process_that_took_the_pid_of_a_stack(
    lock_held, capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """The note's pid now belongs to another process (a stack that died uncleanly, its pid
    handed on): that process's start time and command are not the note's, so it lives."""
    monkeypatch.chdir(tmp_path)
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        stack = owner.process_identity(os.getpid())
        assert stack is not None
        note = {"pid": stranger.pid, "process": stack.as_dict(), "env": {}, "log": "x"}
        status = down_with(note, lock_held=lock_held)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    err = capsys.readouterr().err
    if lock_held:
        assert status == 1
        assert f"process {stranger.pid} is not the one" in err
    else:
        assert status == 0 and "no process was signalled" in err
