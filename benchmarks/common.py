"""What every benchmark shares; `write_sections` writes figures between `<!-- NAME:start -->`
and `<!-- NAME:end -->` in docs/benchmarks.md, never the prose around them."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Report:
    """A benchmark's figures by section name, its raw results (`--json`), its failed checks."""

    sections: dict[str, str]
    data: Any
    problems: list[str] = field(default_factory=list)


class Progress:
    """Says on stderr what the run is doing, with the seconds since it started."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, message: str) -> None:
        print(f"{self.elapsed:7.1f}s {message}", file=sys.stderr, flush=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: int = 0) -> str:
    """A Markdown table; the columns from `right` on are right-aligned (0: none)."""

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    align = ["---:" if right and n >= right else "---" for n in range(len(headers))]
    return "\n".join([line(headers), line(align), *(line(r) for r in rows)])


def goals_table(goals: Sequence[Sequence[Any]]) -> str:
    rows = [[*goal[:3], "met" if goal[3] else "not met"] for goal in goals]
    return table(["goal", "target", "measured", ""], rows)


def now() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def environment() -> str:
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("boto3", "moto"))
    return (
        f"Python {platform.python_version()}, {versions}, {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work"
    )


def run_line(mode: str, seconds: float) -> str:
    return f"Run {now()}, {mode} mode, {seconds:.0f} s; {environment()}."


def run_child(module: str, *args: str, stdin: str | None = None, **kw: Any) -> dict[str, Any]:
    """`module.child(*args)` in a fresh interpreter (`python -m benchmarks --child`), whose
    memory is its own; the JSON it printed last."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--child", module, *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        **kw,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident set (VmHWM: its own since exec, unlike ru_maxrss)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]


def write_sections(path: str | Path, sections: dict[str, str]) -> None:
    """Replace the figures of each section in `path` (appended where it has none)."""
    text = Path(path).read_text() if Path(path).exists() else ""
    for name, body in sections.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        new = f"{start}\n{body.strip(chr(10))}\n{end}"
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            text = pattern.sub(lambda _, new=new: new, text, count=1)
        else:
            text = (text.rstrip("\n") + "\n\n" if text else "") + new + "\n"
    Path(path).write_text(text)
