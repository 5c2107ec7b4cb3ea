"""The `vhs` command as a user runs it: `vhs local up` in one process, commands in others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

VHS = [sys.executable, "-m", "vhs.cli"]


@pytest.fixture(scope="module")
def local_env() -> Iterator[dict[str, str]]:
    from vhs.local import free_port

    process = subprocess.Popen(
        [*VHS, "local", "up", "--port", str(free_port())],
        stdout=subprocess.PIPE,
        text=True,
    )
    env: dict[str, str] = {}
    assert process.stdout
    for line in process.stdout:  # blocks until the stack prints; no sleeping
        line = line.strip()
        if line == "ready":
            break
        assert line.startswith("export "), line
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value
    yield {**os.environ, **env}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0


def vhs(env: dict[str, str], *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*VHS, *args], env=env, input=stdin, capture_output=True, timeout=60)


def test_local_up_exports_the_documented_environment(local_env):
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "VHS_TABLE_NAME",
        "VHS_BUCKET_NAME",
    ):
        assert local_env[name]
    assert local_env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")


def test_put_get_history_delete_round_trip(local_env, tmp_path: Path):
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"title": "Moby-Dick"}))
    put = vhs(
        local_env, "--json", "put", "cli-1", str(record), "--updated-at", "2026-01-01T00:00:00Z"
    )
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["outcome"] == "stored"

    again = vhs(
        local_env,
        "put",
        "cli-1",
        "-",
        "--updated-at",
        "2025-01-01T00:00:00Z",
        stdin=b'{"title": "older"}',
    )
    assert again.returncode == 0 and b"stale" in again.stdout

    got = vhs(local_env, "get", "cli-1", "--json")
    assert json.loads(got.stdout)["record"] == {"title": "Moby-Dick"}

    history = vhs(local_env, "history", "cli-1", "--json")
    assert [v["version"] for v in json.loads(history.stdout)] == [1]

    deleted = vhs(local_env, "delete", "cli-1", "--deleted-at", "2026-02-01T00:00:00Z")
    assert deleted.returncode == 0 and b"deleted" in deleted.stdout
    missing = vhs(local_env, "get", "cli-1")
    assert missing.returncode == 3
    assert b"not found" in missing.stderr


def test_bad_input_exits_non_zero_with_the_field_named(local_env, tmp_path: Path):
    record = tmp_path / "r.json"
    record.write_text("{}")
    result = vhs(local_env, "put", "ok", str(record), "--updated-at", "2026-01-01T00:00:00")
    assert result.returncode == 2
    assert b"updated_at" in result.stderr


def test_raw_bodies(local_env, tmp_path: Path):
    blob = tmp_path / "scan.bin"
    blob.write_bytes(bytes(range(256)) * 100)
    put = vhs(local_env, "put", "scan", str(blob), "--raw", "--content-type", "image/tiff")
    assert put.returncode == 0, put.stderr
    got = vhs(local_env, "get", "scan")
    assert got.stdout == blob.read_bytes()
    not_json = vhs(local_env, "put", "scan", str(blob))
    assert not_json.returncode == 2 and b"--raw" in not_json.stderr
