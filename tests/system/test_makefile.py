"""`make test` runs its phases side by side, with one synth (the suite alone takes most of the
project's 15-minute budget on a 2-core machine: run one after the other, the phases went over
it). `make -n` on a copy of the Makefile: it prints what would run, and runs nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("lint", "unit", "infra-check", "audit")


@pytest.fixture
def dry_run(tmp_path: Path) -> list[str]:
    """`make -n test`'s commands, as on a checkout whose installs are done."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on PATH")
    shutil.copy(ROOT / "Makefile", tmp_path)
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-audit.txt"):
        (tmp_path / name).touch()
    for name in ("pyproject.toml", "package.json", "package-lock.json"):
        (tmp_path / name).touch()
    (tmp_path / "tests" / "harness").mkdir(parents=True)
    (tmp_path / "tests" / "harness" / "pyproject.toml").touch()
    for stamp in (".venv/.installed", ".venv-audit/.installed", "node_modules/.installed"):
        (tmp_path / stamp).parent.mkdir(exist_ok=True)
        (tmp_path / stamp).touch()
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
