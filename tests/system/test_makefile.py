"""`make test` runs its phases side by side, with one synth (the suite alone takes most of the
project's 12-minute budget on a 2-core machine: run one after the other, the phases went over
it). `make -n` on a copy of the Makefile: it prints what would run, and runs nothing. And
`make test` itself on a copy whose tools are stand-ins: pytest's progress shows while it runs,
and a failing phase fails the whole."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("lint", "unit", "unit-lowest", "infra-check", "audit")


def installed_checkout(tmp_path: Path) -> str:
    """A copy of the Makefile in `tmp_path`, with what it reads, as on a checkout whose
    installs are done; returns make's path."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on PATH")
    shutil.copy(ROOT / "Makefile", tmp_path)
    for name in (
        "requirements.txt",
        "requirements-dev.txt",
        "requirements-audit.txt",
        "requirements-lowest.txt",
    ):
        (tmp_path / name).touch()
    (tmp_path / "infra").mkdir()
    shutil.copy(ROOT / "infra" / "config.py", tmp_path / "infra")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for name in ("package.json", "package-lock.json"):
        (tmp_path / name).touch()
    (tmp_path / "tests" / "harness").mkdir(parents=True)
    (tmp_path / "tests" / "harness" / "pyproject.toml").touch()
    shutil.copy(ROOT / "tests" / "lowest.txt", tmp_path / "tests")
    stamps = (".venv-lowest/.installed", ".venv-audit/.installed", "node_modules/.installed")
    for stamp in stamps:
        (tmp_path / stamp).parent.mkdir(exist_ok=True)
        (tmp_path / stamp).touch()
    # .venv on the runtime's Python, as `make setup` leaves it (a link to this interpreter).
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / ".venv" / ".installed").touch()
    return make


@pytest.fixture
def dry_run(tmp_path: Path) -> list[str]:
    """`make -n test`'s commands, as on a checkout whose installs are done."""
    make = installed_checkout(tmp_path)
    result = subprocess.run(
        [make, "-n", "test"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_make_test_runs_its_four_phases_in_one_parallel_make(dry_run: list[str]) -> None:
    (submake,) = [line for line in dry_run if line.split()[0].endswith("make")]
    words = submake.split()
    assert any(word.startswith(("--jobs=", "-j")) and word[-1].isdigit() for word in words)
    assert set(PHASES) <= set(words)


def test_one_synth_serves_infra_check_and_audit(dry_run: list[str]) -> None:
    assert sum("cdk synth" in line for line in dry_run) == 1
    assert any(line.startswith(".venv/bin/cfn-lint") for line in dry_run)
    assert any("checkov" in line and "cdk.out/" in line for line in dry_run)
    assert any("pytest" in line for line in dry_run)


def test_the_lowest_python_job_runs_the_listed_tests_on_its_own_venv(dry_run: list[str]) -> None:
    listed = [
        line
        for line in (ROOT / "tests" / "lowest.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    (run,) = [line for line in dry_run if line.startswith(".venv-lowest/bin/python -m pytest")]
    assert run.split()[-len(listed) :] == listed
    assert all((ROOT / path).is_file() for path in listed if not path.startswith("-"))


# --- make test itself, with stand-ins for the tools -------------------------------------------

# Each phase's tools: a line saying it ran, and its exit status from the environment
# (FAIL=ruff fails ruff). The pytest of .venv says it started, then (when $GATE is set) waits
# on that FIFO until the test opens it, then says it finished: a line seen before the test
# opens it was not held back.
STAND_IN = """#!/bin/sh
name="${0##*/}"
case "$1 $2" in
  "-c "*) exec "$REAL_PYTHON" "$@" ;;
  "-m pytest")
    if [ "$VENV" = .venv ]; then
      echo "pytest: started"
      [ -n "$GATE" ] && cat "$GATE" > /dev/null
      echo "pytest: finished"
      [ "$FAIL" = pytest ] && exit 1
      exit 0
    fi ;;
esac
echo "$VENV/$name ran"
[ "$FAIL" = "$name" ] && exit 1
exit 0
"""


@pytest.fixture
def make_test(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """make's path, and the environment that runs `make test` on stand-ins (with $GATE, the
    FIFO that the stand-in pytest waits on)."""
    make = installed_checkout(tmp_path)
    (tmp_path / ".venv" / "bin" / "python").unlink()
    tools = {
        ".venv": ("python", "ruff", "lint-imports", "cfn-lint"),
        ".venv-lowest": ("python",),
        ".venv-audit": ("python", "bandit", "checkov"),
        "path": ("npx",),
    }
    for venv, names in tools.items():
        (tmp_path / venv / "bin").mkdir(parents=True, exist_ok=True)
        for name in names:
            tool = tmp_path / venv / "bin" / name
            tool.write_text(STAND_IN.replace('"$VENV"', f'"{venv}"').replace("$VENV/", f"{venv}/"))
            tool.chmod(0o755)
    (tmp_path / ".venv-audit" / ".installed").touch()  # after requirements-audit.txt
    os.mkfifo(tmp_path / "gate")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'path' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "REAL_PYTHON": sys.executable,
        "GATE": str(tmp_path / "gate"),
    }
    env.pop("MAKEFLAGS", None)
    return make, env


def run_until_pytest_starts(
    make: str, env: dict[str, str], cwd: Path, timeout: float = 20
) -> tuple[subprocess.Popen, list[str], bytes]:
    """`make test` started, the lines it printed up to `pytest: started` (which fails the
    test if it does not come while pytest is still waiting: output held until pytest ends),
    and the start of a line read with them, which the rest of the output completes."""
    # A session of its own: on failure the stand-in pytest, still waiting on its gate, is
    # killed with make.
    process = subprocess.Popen(
        [make, "test"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    pending = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while "pytest: started" not in lines:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                process.stdout.close()
                pytest.fail(f"no `pytest: started` while pytest ran; make printed {lines}")
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"make ended before pytest started: {lines}"
            pending += chunk
            *complete, pending = pending.split(b"\n")
            lines += [line.decode() for line in complete]
    return process, lines, pending


def finish(process: subprocess.Popen, gate: Path, pending: bytes) -> tuple[int, list[str]]:
    """Let the stand-in pytest end; make's exit status and the rest of its output (from
    `pending`, the part of a line already read)."""
    with gate.open("w"):
        pass
    assert process.stdout is not None
    rest = (pending + process.stdout.read()).decode().splitlines()
    return process.wait(timeout=20), rest


def test_pytest_progress_shows_while_it_runs_and_the_other_phases_print_whole(
    make_test: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    make, env = make_test
    process, before, pending = run_until_pytest_starts(make, env, tmp_path)
    status, after = finish(process, tmp_path / "gate", pending)
    assert status == 0, before + after
    output = before + after
    assert output.index("pytest: started") < output.index("pytest: finished")
    # Every other phase ran, and printed whole (--output-sync): lint's three commands, each
    # with its line, together.
    ran = [line for line in output if line.endswith(" ran")]
    assert ".venv/ruff ran" in ran and ".venv-lowest/python ran" in ran
    assert ".venv/cfn-lint ran" in ran and ".venv-audit/checkov ran" in ran
    assert ".venv/bin/ruff check ." in output, output
    lint = output.index(".venv/bin/ruff check .")
    assert output[lint : lint + 6] == [
        ".venv/bin/ruff check .",
        ".venv/ruff ran",
        ".venv/bin/ruff format --check .",
        ".venv/ruff ran",
        "PYTHONPATH=lambdas .venv/bin/lint-imports --no-cache",
        ".venv/lint-imports ran",
    ]


@pytest.mark.parametrize(
    ("failing", "phase", "its_line"),
    [
        ("pytest", "unit", "pytest: finished"),
        ("ruff", "lint", ".venv/ruff ran"),
        ("checkov", "audit", ".venv-audit/checkov ran"),
    ],
)
def test_make_test_fails_when_any_phase_fails(
    failing: str,
    phase: str,
    its_line: str,
    make_test: tuple[str, dict[str, str]],
    tmp_path: Path,
) -> None:
    make, env = make_test
    env = {key: value for key, value in env.items() if key != "GATE"}
    result = subprocess.run(
        [make, "test"],
        cwd=tmp_path,
        env={**env, "FAIL": failing},
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert its_line in result.stdout.splitlines()
    assert f"{phase}] Error 1" in result.stderr
