"""What the CLI prints: rich consoles, JSON for scripts, progress bars, summary tables and
timestamps. rich is imported only when a command draws something."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

# Everything the CLI draws holds data: record ids, reasons, keys and producers' text, any of
# which may look like Rich markup ("x[/bold]" crashes a markup parser, "[link=...]" makes a
# link) or emoji codes. So no console interprets strings: styles are given as Text styles.
_PLAIN = {"markup": False, "emoji": False, "highlight": False}


def console() -> Any:
    from rich.console import Console

    return Console(**_PLAIN)


def console_err() -> Any:
    from rich.console import Console

    return Console(stderr=True, **_PLAIN)


def emit_json(value: Any, file: Any = None) -> None:
    """`value` as one JSON document on standard output (or `file`)."""
    print(json.dumps(value, indent=2, default=json_value, ensure_ascii=False), file=file)


def json_value(value: Any) -> str:
    """Times as RFC 3339 (`2026-11-01T09:00:00+00:00`) in every command's JSON, as `get` and
    the change feed write them; anything else as its text."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def now() -> str:
    return datetime.now(UTC).isoformat()


def progress(
    *, console: Any, disable: bool, time_remaining: bool = True, rate: str | None = None
) -> Any:
    """A progress bar (description, bar, done of total and, unless told not to, the time
    remaining) drawn on `console`. With `rate` (a unit, e.g. "msg"), also the rate of the
    last 30 s and a task's `status` field (add_task/update(status=...)): what it waits on."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text("" if task.speed is None else f"{task.speed:,.0f} {rate}/s")

    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        *((Rate(),) if rate else ()),
        *((TimeRemainingColumn(),) if time_remaining else ()),
        *((TextColumn("{task.fields[status]}", markup=False),) if rate else ()),
    )
    return Progress(*columns, console=console, disable=disable)


def print_counts(title: str, rows: Iterable[tuple[str, int]]) -> None:
    """A two-column table of counts, a name and a right-aligned number, on standard output."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    table.add_column("", justify="right")
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    console().print(table)
