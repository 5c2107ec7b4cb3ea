"""What the `vhs` commands print as they run and when they stop: progress without a
terminal, SIGTERM as Ctrl-C, one form of time, bodies on a terminal, plurals, parts' content
types, and what a stale put reports."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import signal
import subprocess
import time
from pathlib import Path

import pytest

from vhs_ops.cli import main, output
from vhs_testing.cli import VHS, assert_documented, json_of, local_env, vhs

__all__ = ["local_env"]


def lines_file(path: Path, count: int, prefix: str) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"{prefix}{n}", "updated_at": "2026-01-01T00:00:00Z", "record": n})
            + "\n"
            for n in range(count)
        )
    )
    return path


# --- progress ---------------------------------------------------------------------------------


def test_progress_lines_come_every_interval_with_the_rate_since_the_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = [100.0]
    lines = output.ProgressLines(1000, every=10, unit="lines", clock=lambda: now[0])
    lines.advance(5)  # too soon: nothing
    now[0] += 10
    lines.advance(95)
    now[0] += 4
    lines.waiting(1000)  # too soon again
    now[0] += 16
    lines.advance(200)
    assert capsys.readouterr().err.splitlines() == [
        "progress: 100 of 1,000 lines at 10s (10.0/s)",
        "progress: 300 of 1,000 lines at 30s (10.0/s; waiting: the queue holds 1,000)",
    ]
    as_bytes = output.ProgressLines(None, every=10, unit="bytes", clock=lambda: now[0])
    now[0] += 10
    as_bytes.advance(2_500_000)
    assert capsys.readouterr().err == "progress: 2.5 MB at 10s (250.0 kB/s)\n"


@pytest.fixture
def in_process(local_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The local stack's environment in this process, and a progress line at every step."""
    for name, value in local_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(output, "PROGRESS_LINE_SECONDS", 1e-9)


def test_import_without_a_terminal_writes_progress_lines(
    in_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = lines_file(tmp_path / "some.jsonl", 3, "progress-")
    size = source.stat().st_size
    report = tmp_path / "report.jsonl"
    assert main(["--json", "import", str(source), "--report", str(report)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stored"] == 3
    progress = [line for line in captured.err.splitlines() if line.startswith("progress: ")]
    assert progress and progress[-1].startswith(f"progress: {size} bytes of {size} bytes at ")


def test_gc_without_a_terminal_writes_progress_lines(
    in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--json", "gc", "--dry-run", "--shard", "00", "--shard", "01"]) == 0
    progress = [line for line in capsys.readouterr().err.splitlines() if "progress" in line]
    assert progress[-1].startswith("progress: 2 of 2 shards at "), progress


def test_verify_counts_a_missing_id_as_looked_up(
    in_process: None, local_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The progress of `verify ID...` reaches the number of ids, a missing one included."""
    assert vhs(local_env, "put", "verify-there", "-", stdin=b"{}").returncode == 0
    assert main(["--json", "verify", "verify-there", "verify-missing"]) == 1
    progress = [line for line in capsys.readouterr().err.splitlines() if "progress" in line]
    assert progress[-1].startswith("progress: 2 of 2 items at "), progress


# --- SIGTERM, as Ctrl-C -----------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [True, False])
def test_import_on_sigterm_prints_its_summary_and_exits_as_on_ctrl_c(
    as_json: bool, local_env: dict[str, str], tmp_path: Path
) -> None:
    source = lines_file(tmp_path / "many.jsonl", 1000, f"term-{as_json}-")
    report = tmp_path / "report.jsonl"
    checkpoint = report.with_name(report.name + ".checkpoint.json")
    command = ["import", str(source), "--report", str(report)]
    slowly = ["--chunk-lines", "5", "--workers", "1"]  # a checkpoint every 5 lines
    importing = subprocess.Popen(
        [*VHS, *(["--json"] if as_json else []), *command, *slowly],
        env=local_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not checkpoint.exists():  # a chunk is settled: the import is under way
        assert time.monotonic() < deadline and importing.poll() is None
        time.sleep(0.05)
    importing.send_signal(signal.SIGTERM)
    out, err = importing.communicate(timeout=60)
    assert importing.returncode == 130, err
    assert b"Traceback" not in err
    if as_json:
        summary = json.loads(out)
        assert_documented("vhs import", summary)
        assert summary["interrupted"] and 0 < summary["lines"] < 1000
    else:
        assert out.decode().startswith("imported ")
        assert b"interrupted: run again with --resume to continue" in err
    [saved] = json.loads(checkpoint.read_text())["files"].values()  # where --resume starts
    assert not saved["done"] and 1 < saved["line"] <= 1000


# --- one form of time -------------------------------------------------------------------------


def test_reindex_writes_its_selection_in_the_cli_form_of_time(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    """The selection is kept in the store's form (…000000Z) in the checkpoint; the command's
    JSON writes it as every other time (json_of checks each)."""
    assert vhs(local_env, "put", "time-1", "-", stdin=b"{}").returncode == 0
    checkpoint = tmp_path / "run.json"
    summary = json_of(
        local_env,
        "reindex",
        "time-1",
        "--since",
        "2026-01-01T02:00:00+02:00",
        "--checkpoint",
        str(checkpoint),
    )
    assert summary["selection"]["since"] == "2026-01-01T00:00:00+00:00"
    assert json.loads(checkpoint.read_text())["selection"]["since"].endswith("Z")


# --- records ----------------------------------------------------------------------------------


def on_a_terminal(env: dict[str, str], *args: str) -> bytes:
    """What `vhs ARGS` writes to standard output when it is a terminal (as the terminal sends
    it: a newline is CR LF)."""
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [*VHS, *args], env=env, stdout=follower, stderr=subprocess.PIPE, timeout=60
        )
        assert result.returncode == 0, result.stderr
        os.close(follower)
        follower = -1
        read = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal is closed and drained
                break
            if not chunk:
                break
            read += chunk
        return read
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_get_ends_a_body_with_a_newline_on_a_terminal_only(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    assert vhs(local_env, "put", "tty-1", "-", "--raw", stdin=b"no newline").returncode == 0
    assert vhs(local_env, "put", "tty-2", "-", "--raw", stdin=b"a line\n").returncode == 0
    assert vhs(local_env, "get", "tty-1").stdout == b"no newline"  # a pipe: the bytes exactly
    assert on_a_terminal(local_env, "get", "tty-1") == b"no newline\r\n"
    assert on_a_terminal(local_env, "get", "tty-2") == b"a line\r\n"  # never a second one


def test_import_summary_counts_in_the_singular_and_the_plural(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    one = lines_file(tmp_path / "one.jsonl", 1, "plural-one-")
    result = vhs(local_env, "import", str(one), "--report", str(tmp_path / "r1.jsonl"))
    assert result.returncode == 0 and result.stdout.startswith(b"imported 1 line of 1 file in ")
    two = lines_file(tmp_path / "two.jsonl", 2, "plural-two-")
    result = vhs(local_env, "import", str(one), str(two), "--report", str(tmp_path / "r2.jsonl"))
    assert result.returncode == 0 and result.stdout.startswith(b"imported 3 lines of 2 files in ")


def test_a_part_takes_its_content_type_after_the_file(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    files = {"scan": tmp_path / "scan;1.tiff", "notes": tmp_path / "notes.txt"}
    for name, path in files.items():
        path.write_bytes(name.encode() * 100)
    parts = ["--part", f"scan={files['scan']};type=image/tiff", "--part", f"notes={files['notes']}"]
    put = json_of(local_env, "put", "typed-1", "-", *parts, stdin=b"{}")
    assert put["parts"]["scan"]["content_type"] == "image/tiff"
    got = json_of(local_env, "get", "typed-1")
    assert got["parts"]["scan"]["content_type"] == "image/tiff"
    assert got["parts"]["notes"]["content_type"] == "application/octet-stream"
    part = vhs(local_env, "get", "typed-1", "--part", "scan")
    assert part.stdout == files["scan"].read_bytes()  # a ';' in the file's name is the name's


def test_a_stale_put_reports_no_location(local_env: dict[str, str]) -> None:
    """A put older than a delete is refused: nothing is stored, so it has no location; its
    version is the delete's, and its hash the refused body's (docs/cli.md)."""
    stored = json_of(
        local_env, "put", "stale-1", "-", "--updated-at", "2026-01-02T00:00:00Z", stdin=b"{}"
    )
    assert stored["location"] == "inline"
    deleted = json_of(local_env, "delete", "stale-1", "--deleted-at", "2026-02-01T00:00:00Z")
    body = b'{"late": true}'
    late = ("put", "stale-1", "-", "--raw", "--updated-at", "2026-01-03T00:00:00Z")
    stale = json_of(local_env, *late, stdin=body)
    assert_documented("vhs put", stale)
    assert (stale["outcome"], stale["version"], stale["location"]) == (
        "stale",
        deleted["version"],
        None,
    )
    assert stale["content_hash"] == hashlib.sha256(body).hexdigest()
    plain = vhs(local_env, *late, stdin=body)
    assert plain.stdout == b"stale-1: stale, version 2\n"


def test_a_reader_that_stops_reading_stops_the_command_silently(
    local_env: dict[str, str],
) -> None:
    """`vhs get ID | head -c 10`: no `error: Broken pipe`, no traceback; 141, as a shell
    reports a command SIGPIPE stopped."""
    assert vhs(local_env, "put", "pipe-1", "-", "--raw", stdin=os.urandom(200_000)).returncode == 0
    reading = subprocess.Popen(
        [*VHS, "get", "pipe-1"], env=local_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert reading.stdout and reading.stderr
    reading.stdout.close()  # before it writes a byte: it starts in a fresh interpreter
    assert reading.wait(timeout=60) == 141
    assert reading.stderr.read() == b""
