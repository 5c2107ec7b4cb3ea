"""The suite's time budget, as a pytest plugin (tests/conftest.py loads it).

Every test is timed from the start of its setup to the end of its teardown, so a module or
session fixture's cost lands on the test that pays it. Each test's CPU time is that of the
process running it and of every process it started (the servers included: they live in child
processes), so a test that waits on a busy server is not mistaken for a cheap one.

At the end the plugin prints the suite's CPU time (every xdist worker's, with their children's)
and its slowest tests. A test whose wall time exceeds the limit (`--time-limit`, 30 s: what one
test may take on CI's two-core machine) fails at its teardown, unless tests/slow.txt lists it
under a comment that says why it needs longer.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

SLOW_LIST = Path(__file__).resolve().parents[2] / "slow.txt"
DEFAULT_LIMIT = 30.0
SHOWN = 25


class SlowListError(ValueError):
    """tests/slow.txt holds an entry that does not say why, or names no test file."""


def read_slow_list(path: Path = SLOW_LIST) -> dict[str, str]:
    """The tests allowed to exceed the limit, each with its reason: a comment block (the
    reason), then one test id a line (`file::test`, all its parameters, or `file::test[id]`)."""
    listed: dict[str, str] = {}
    reason: list[str] = []
    if not path.is_file():
        return listed
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line:
            reason = []
        elif line.startswith("#"):
            reason.append(line.lstrip("#").strip())
        else:
            if not any(reason):
                raise SlowListError(f"{path.name}:{number}: {line} is listed without a reason")
            if "::" not in line or not (path.parents[1] / line.partition("::")[0]).is_file():
                raise SlowListError(f"{path.name}:{number}: {line} names no test file")
            listed[line] = " ".join(reason)
    return listed


def allowance(nodeid: str, listed: dict[str, str]) -> str | None:
    """Why `nodeid` may take longer (None: it may not)."""
    for entry, reason in listed.items():
        if nodeid == entry or nodeid.startswith(entry + "["):
            return reason
    return None


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as file:
                found.extend(int(child) for child in file.read().split())
        except OSError:
            continue
    return found


def _stat_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid`, in clock ticks (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            fields = file.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command's closing parenthesis: state is field 0, utime field 11 (stat's 14th).
    return float(sum(int(value) for value in fields[11:15]))


def tree_cpu() -> float:
    """CPU seconds used so far by this process, the children it has waited for, and every
    process still running beneath it (and what they waited for). Off Linux: this process and
    its waited-for children only."""
    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    if not os.path.isdir("/proc/self/task"):
        return total
    ticks = 0.0
    pending = _children(os.getpid())
    seen: set[int] = set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        ticks += _stat_cpu(pid)
        pending.extend(_children(pid))
    return total + ticks / _ticks()


@dataclass
class Timing:
    nodeid: str
    wall: float
    cpu: float


class Budget:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.limit: float = config.getoption("--time-limit")
        self.listed = read_slow_list()
        self.started: dict[str, tuple[float, float]] = {}
        self.timings: list[Timing] = []
        self.start_cpu = tree_cpu()
        self.start_wall = time.monotonic()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        self.started[item.nodeid] = (time.monotonic(), tree_cpu())
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if call.when != "teardown" or item.nodeid not in self.started:
            return report
        wall0, cpu0 = self.started.pop(item.nodeid)
        report.vhs_wall = time.monotonic() - wall0
        report.vhs_cpu = tree_cpu() - cpu0
        if report.vhs_wall > self.limit and report.passed:
            reason = allowance(item.nodeid, self.listed)
            if reason is None:
                report.outcome = "failed"
                report.longrepr = (
                    f"{item.nodeid} took {report.vhs_wall:.1f} s of wall time "
                    f"({report.vhs_cpu:.1f} s of CPU), over the {self.limit:g} s one test may "
                    f"take (--time-limit): make it cheaper, or list it in tests/slow.txt "
                    f"under a comment that says why it needs longer"
                )
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        wall = getattr(report, "vhs_wall", None)
        if report.when == "teardown" and wall is not None:
            self.timings.append(Timing(report.nodeid, wall, report.vhs_cpu))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.timings:
            return
        report = self.config.getoption("--budget-report")
        if report:
            Path(report).write_text(
                json.dumps([asdict(t) for t in self.timings], indent=0), encoding="utf-8"
            )
        write = terminalreporter.write_line
        # xdist's workers are this process's children: running or waited for, their CPU (and
        # their servers') is in this process's tree.
        cpu = tree_cpu() - self.start_cpu
        wall = time.monotonic() - self.start_wall
        terminalreporter.section("time budget")
        write(
            f"{len(self.timings)} tests: {cpu:.0f} s of CPU in {wall:.0f} s of wall time "
            f"(the tests' own: {sum(t.cpu for t in self.timings):.0f} s of CPU)"
        )
        write(f"slowest tests (setup to teardown; limit {self.limit:g} s, tests/slow.txt):")
        for timing in sorted(self.timings, key=lambda t: t.wall, reverse=True)[:SHOWN]:
            note = " (listed)" if allowance(timing.nodeid, self.listed) else ""
            write(f"{timing.wall:7.1f} s wall {timing.cpu:7.1f} s CPU  {timing.nodeid}{note}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--time-limit",
        type=float,
        default=float(os.environ.get("VHS_TEST_TIME_LIMIT", DEFAULT_LIMIT)),
        help="fail a test whose setup, call and teardown take longer (seconds of wall time) "
        "unless tests/slow.txt lists it with why; default 30 (VHS_TEST_TIME_LIMIT)",
    )
    parser.addoption(
        "--budget-report",
        metavar="PATH",
        help="also write every test's wall and CPU seconds to PATH (JSON)",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.pluginmanager.register(Budget(config), "vhs-budget")
    except SlowListError as error:
        raise pytest.UsageError(str(error)) from None
