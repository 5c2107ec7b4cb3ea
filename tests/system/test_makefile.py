"""`make test` runs its phases side by side, with one synth (the suite alone takes most of the
project's 15-minute budget on a 2-core machine: run one after the other, the phases went over
it). `make -n` on a copy of the Makefile: it prints what would run, and runs nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("lint", "unit", "unit-lowest", "infra-check", "audit")


@pytest.fixture
def dry_run(tmp_path: Path) -> list[str]:
    """`make -n test`'s commands, as on a checkout whose installs are done."""
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
