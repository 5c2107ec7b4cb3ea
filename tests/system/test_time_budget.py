"""The suite's time budget (vhs_testing/budget.py): a test over the limit fails unless
tests/slow.txt lists it with a reason; each test's CPU counts the processes it started; the
summary gives the suite's CPU and the slowest tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vhs_testing.budget import SlowListError, allowance, read_slow_list

# A test file run by a pytest of its own. Its tests spend wall time on purpose (the time is
# what is measured, not a wait for something), and one spends CPU in a child process, which
# writes the CPU seconds it used where the test can read them.
TIMED = """
import subprocess, sys, time

def test_quick():
    pass

def test_slow():
    time.sleep(1.0)

def test_child_spends_cpu(tmp_path_factory):
    burn = "import time; sum(range(20_000_000)); print(time.process_time())"
    spent = subprocess.run([sys.executable, "-c", burn], capture_output=True, text=True)
    (tmp_path_factory.getbasetemp() / "child-cpu").write_text(spent.stdout)
"""


PYTEST = [sys.executable, "-m", "pytest", "-p", "vhs_testing.budget", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def budget_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, list[dict], float]:
    """The timed file under the budget with a 0.5 s limit: pytest's result, the budget's
    report (--budget-report) and the child's own CPU seconds."""
    tmp_path = tmp_path_factory.mktemp("budget")
    (tmp_path / "test_timed.py").write_text(TIMED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    base, report = tmp_path / "base", tmp_path / "report.json"
    result = subprocess.run(
        [*PYTEST, f"--budget-report={report}", f"--basetemp={base}", "-q"],
        cwd=tmp_path,
        env={**os.environ, "VHS_TEST_TIME_LIMIT": "0.5"},  # --time-limit's default
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, json.loads(report.read_text()), float((base / "child-cpu").read_text())


def test_a_test_over_the_limit_fails_and_says_how_to_allow_it(budget_run) -> None:
    result, _, _ = budget_run
    assert result.returncode == 1, result.stdout
    # test_slow fails at its teardown (an error); test_quick is well within the limit.
    errors = [line for line in result.stdout.splitlines() if line.startswith("ERROR ")]
    assert any(line.startswith("ERROR test_timed.py::test_slow - ") for line in errors)
    assert not any("test_quick" in line for line in errors)
    assert "test_timed.py::test_slow took" in result.stdout
    assert "over the 0.5 s one test may take" in result.stdout
    assert "tests/slow.txt" in result.stdout


def test_the_summary_gives_the_suites_cpu_and_the_slowest_first(budget_run) -> None:
    result, timings, _ = budget_run
    summary = result.stdout[result.stdout.index("time budget") :].splitlines()
    assert summary[1].startswith("3 tests: ") and "s of CPU in" in summary[1]
    slowest = [line.split()[-1] for line in summary[3:6]]
    assert slowest[0] == "test_timed.py::test_slow"
    walls = {timing["nodeid"]: timing["wall"] for timing in timings}
    assert walls["test_timed.py::test_slow"] >= 1.0 > walls["test_timed.py::test_quick"]


def test_a_tests_cpu_counts_the_processes_it_started(budget_run) -> None:
    _, timings, child_cpu = budget_run
    (cpu,) = [t["cpu"] for t in timings if t["nodeid"].endswith("test_child_spends_cpu")]
    assert child_cpu > 0.1  # (the child did spend some)
    assert cpu >= child_cpu - 0.02  # (the budget counts clock ticks: 0.01 s)


def slow_list(tmp_path: Path, text: str) -> Path:
    """A slow list at tests/slow.txt of a checkout in tmp_path that has tests/x/test_a.py."""
    (tmp_path / "tests" / "x").mkdir(parents=True)
    (tmp_path / "tests" / "x" / "test_a.py").touch()
    path = tmp_path / "tests" / "slow.txt"
    path.write_text(text)
    return path


def test_a_listed_test_has_its_reason_and_covers_its_parameters(tmp_path: Path) -> None:
    path = slow_list(tmp_path, "# header\n\n# it replays\n# a day\ntests/x/test_a.py::test_b\n")
    listed = read_slow_list(path)
    assert listed == {"tests/x/test_a.py::test_b": "it replays a day"}
    assert allowance("tests/x/test_a.py::test_b[fast]", listed) == "it replays a day"
    assert allowance("tests/x/test_a.py::test_b", listed) == "it replays a day"
    assert allowance("tests/x/test_a.py::test_bc", listed) is None


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("tests/x/test_a.py::test_b\n", "listed without a reason"),
        ("# why\n\ntests/x/test_a.py::test_b\n", "listed without a reason"),
        ("# why\ntests/x/test_gone.py::test_b\n", "names no test file"),
        ("# why\ntests/x/test_a.py\n", "names no test file"),
    ],
    ids=["no reason", "its reason cut off by a blank line", "no such file", "no test"],
)
def test_an_entry_without_a_reason_or_a_test_is_refused(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(SlowListError, match=complaint):
        read_slow_list(slow_list(tmp_path, text))


def test_the_projects_slow_list_reads() -> None:
    read_slow_list()  # a bad entry would stop every pytest run with a usage error
