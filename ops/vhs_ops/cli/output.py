"""What the CLI prints: rich consoles, JSON for scripts, progress (a bar on a terminal, lines
on standard error otherwise), summary tables and timestamps. rich is imported only when a
command draws something."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from vhs.timestamps import stored_to_datetime

# Everything the CLI draws holds data: record ids, reasons, keys and producers' text, any of
# which may look like Rich markup ("x[/bold]" crashes a markup parser, "[link=...]" makes a
# link) or emoji codes. So no console interprets strings: styles are given as Text styles.
_PLAIN = {"markup": False, "emoji": False, "highlight": False}


# Tables written to a file or a pipe are drawn this wide at most: wide enough for any row
# (rich would otherwise take 80 columns and cut times and hashes to fit). COLUMNS, when set,
# is the width wherever the table goes.
UNCUT_WIDTH = 1000


def console() -> Any:
    """A console on standard output: a terminal's width on a terminal, else never cut."""
    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else UNCUT_WIDTH
    return Console(width=width, **_PLAIN)


def console_err() -> Any:
    from rich.console import Console

    return Console(stderr=True, **_PLAIN)


def emit_json(value: Any, file: Any = None) -> None:
    """`value` as one JSON document on standard output (or `file`)."""
    print(json.dumps(value, indent=2, default=json_value, ensure_ascii=False), file=file)


def json_value(value: Any) -> str:
    """Times as RFC 3339 (`2026-11-01T09:00:00+00:00`) in every command's JSON, as `get`
    writes them; anything else as its text."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def now() -> str:
    return datetime.now(UTC).isoformat()


def cli_time(stored: str | None) -> str | None:
    """A time in the store's form (`2026-11-01T09:00:00.000000Z`, timestamps.py: what the
    change feed and checkpoints hold) in the CLI's one form, `2026-11-01T09:00:00+00:00`."""
    return None if stored is None else stored_to_datetime(stored).isoformat()


def plural(count: int, noun: str) -> str:
    """`1 file`, `2 files`, `1,000 lines`."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def progress(
    *,
    console: Any,
    disable: bool,
    time_remaining: bool = True,
    rate: str | None = None,
    transfer: bool = False,
) -> Any:
    """A progress bar (description, bar, done of total and, unless told not to, the time
    remaining) drawn on `console`. With `rate` (a unit, e.g. "msg"), also the rate of the
    last 30 s and a task's `status` field (add_task/update(status=...)): what it waits on.
    With `transfer`, the amounts are bytes: done of total in kB, MB, ..., and bytes/s."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text("" if task.speed is None else f"{task.speed:,.0f} {rate}/s")

    amounts = (DownloadColumn(), TransferSpeedColumn()) if transfer else (MofNCompleteColumn(),)
    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        *amounts,
        *((Rate(),) if rate else ()),
        *((TimeRemainingColumn(),) if time_remaining else ()),
        *((TextColumn("{task.fields[status]}", markup=False),) if rate else ()),
    )
    return Progress(*columns, console=console, disable=disable)


# Without a terminal to draw a bar on (a log, --json), a command's progress is a line on
# standard error this often.
PROGRESS_LINE_SECONDS = 10.0


class ProgressLines:
    """Progress as lines on standard error, every `every` seconds (0: never): the amount done
    (of the total, when known), the time since the start, the rate since the last line, and
    whether the command is waiting on a queue."""

    def __init__(
        self,
        total: int | None,
        *,
        every: float,
        unit: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.every, self.unit, self.clock = total, every, unit, clock
        self.started = clock()
        self.done = 0
        self.last_at, self.last_done = self.started, 0
        self.held: int | None = None

    def advance(self, n: int) -> None:
        self.done += n
        self._maybe_print()

    def update(self, done: int, total: int | None) -> None:
        self.done, self.total = done, total
        self._maybe_print()

    def waiting(self, held: int | None) -> None:
        self.held = held
        self._maybe_print()

    def _amount(self, n: float) -> str:
        if self.unit == "bytes":
            from rich.filesize import decimal

            return decimal(int(n))
        return f"{n:,.0f}"

    def _maybe_print(self) -> None:
        now = self.clock()
        if not self.every or now - self.last_at < self.every:
            return
        rate = (self.done - self.last_done) / (now - self.last_at)
        per_second = f"{self._amount(rate)}/s" if self.unit == "bytes" else f"{rate:,.1f}/s"
        queue = "" if self.held is None else f"; waiting: the queue holds {self.held:,}"
        of = "" if self.total is None else f" of {self._amount(self.total)}"
        unit = "" if self.unit == "bytes" else f" {self.unit}"
        print(
            f"progress: {self._amount(self.done)}{of}{unit} at {now - self.started:.0f}s "
            f"({per_second}{queue})",
            file=sys.stderr,
            flush=True,
        )
        self.last_at, self.last_done = now, self.done


class Tracked:
    """One task's progress, told once: to the bar (drawn on a terminal) and to the lines
    (written when it is not)."""

    def __init__(self, bar: Any, task: Any, lines: ProgressLines) -> None:
        self.bar, self.task, self.lines = bar, task, lines

    def advance(self, n: int = 1) -> None:
        self.bar.advance(self.task, n)
        self.lines.advance(n)

    def update(self, done: int, total: int | None) -> None:
        self.bar.update(self.task, completed=done, total=total)
        self.lines.update(done, total)

    def waiting(self, held: int | None, status: str) -> None:
        self.bar.update(self.task, status=status)
        self.lines.waiting(held)


@contextlib.contextmanager
def tracking(
    description: str,
    *,
    total: int | None,
    unit: str,
    json: bool,
    console: Any = None,
    **columns: Any,
) -> Iterator[Tracked]:
    """A command's progress: a bar on standard error when it is a terminal (and not --json),
    else a line there every PROGRESS_LINE_SECONDS. `unit` names what is counted ("lines",
    "shards", "items"; "bytes" is shown in kB, MB, ...); `columns`: see `progress`."""
    from rich.markup import escape

    drawn = not json and sys.stderr.isatty()
    lines = ProgressLines(total, every=0 if drawn else PROGRESS_LINE_SECONDS, unit=unit)
    with progress(console=console or console_err(), disable=not drawn, **columns) as bar:
        # The description column reads markup: a file name is data.
        task = bar.add_task(escape(description), total=total, status="")
        yield Tracked(bar, task, lines)


def print_counts(title: str, rows: Iterable[tuple[str, int]]) -> None:
    """A two-column table of counts, a name and a right-aligned number, on standard output."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    table.add_column("", justify="right")
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    console().print(table)


def print_env(env: dict[str, str], *, as_json: bool) -> None:
    """The local stack's environment: one JSON object, or a shell's export lines."""
    if as_json:
        emit_json(env)
    else:
        for name, value in env.items():
            print(f"export {name}={value}")
