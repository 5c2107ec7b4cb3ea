"""Turning measurements into tables: rich tables for the terminal, Markdown for the docs.

Each table is built once as plain rows (`Grid`) and rendered twice, so the terminal and
docs/benchmarks.md can never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from . import pricing, workload
from .measure import MixCost, OperationCost, WallTime
from .pricing import Bill
from .scenarios import meets_floor

VHS = "VHS"
PEERS = ("pynamodb_mate", "Wellcome 2018")
FLOOR = "raw floor"
NO_HISTORY = "VHS, versions=0"  # diagnostic: VHS with Retention(versions=0)
RAW_VHS = "raw, VHS's requests"  # diagnostic: VHS's requests without VHS's code
COST_GOAL = 0.2  # VHS's cost per million puts at most this fraction of each peer's
WALL_GOAL = 1.2  # VHS's wall time at most this multiple of the raw floor's

# Short names for requests, so a cell can list a whole operation.
ABBREVIATIONS = {
    "GetItem": "GI",
    "PutItem": "PI",
    "UpdateItem": "UI",
    "DeleteItem": "DI",
    "PutObject": "PUT",
    "GetObject": "GET",
    "HeadObject": "HEAD",
    "DeleteObject": "DEL",
    "DeleteObjects": "DELS",
}
# The order requests are listed in: the order the systems make them in, roughly.
_ORDER = list(ABBREVIATIONS)


@dataclass
class Grid:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""


@dataclass
class Goal:
    name: str
    measured: str
    met: bool


# --- Cells ---------------------------------------------------------------------------------------


def _count(n: float) -> str:
    return f"{n:g}" if n == int(n) else f"{n:.2f}"


def requests_cell(bill: Bill) -> str:
    """Requests per operation, such as "HEAD PUT GI UI DELS" or "1.5xUI"."""
    parts = []
    for op in sorted(bill.requests, key=lambda o: _ORDER.index(o) if o in _ORDER else 99):
        n = bill.per_operation(op)
        name = ABBREVIATIONS.get(op, op)
        parts.append(name if n == 1 else f"{_count(n)}x{name}")
    return " ".join(parts) or "none"


def units_cell(bill: Bill) -> str:
    parts = []
    if bill.write_units:
        parts.append(f"{_count(bill.write_units / bill.operations)} WU")
    if bill.read_units:
        parts.append(f"{_count(bill.read_units / bill.operations)} RU")
    return " ".join(parts) or "0"


def dollars(value: float) -> str:
    return f"${value:.3f}" if value < 10 else f"${value:.2f}"


def ratio(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}x"


def goal_ratio(value: float, goal: float) -> str:
    """A ratio next to its goal, with enough digits that a miss never prints as the goal."""
    digits = 3
    while digits < 6 and value != goal and round(value, digits) == goal:
        digits += 1
    return ratio(value, digits)


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


# --- Table 1: requests and cost per operation ----------------------------------------------------


def bill_cell(bill: Bill) -> str:
    """Requests, capacity and price of one operation: "UI · 3 WU · $1.875"."""
    return f"{requests_cell(bill)} · {units_cell(bill)} · {dollars(bill.per_million())}"


def operations_grid(costs: Sequence[OperationCost], systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = ["Operation", *systems, *(f"VHS ÷ {p}" for p in peers), "VHS at the floor?"]
    grid = Grid("Requests, capacity and $ per million operations", headers)
    for cost in costs:
        vhs = cost.bills[VHS].per_million()
        floor = cost.operation.floor
        at_floor = (
            "-"
            if floor is None
            else ("yes" if meets_floor(_mean(cost.bills[VHS]), floor) else "NO")
        )
        grid.rows.append(
            [
                cost.operation.name,
                *(bill_cell(cost.bills[name]) for name in systems),
                *(ratio(vhs / cost.bills[p].per_million()) for p in peers),
                at_floor,
            ]
        )
    return grid


def _mean(bill: Bill) -> dict[str, float]:
    return {op: bill.per_operation(op) for op in bill.requests}


def outcomes_grid(costs: Sequence[OperationCost], systems: Sequence[str]) -> Grid:
    """What each system did with the writes that should not change anything."""
    grid = Grid("What each system did", ["Operation", *systems])
    for cost in costs:
        if cost.operation.name.startswith(("duplicate", "stale")):
            grid.rows.append([cost.operation.name, *(cost.outcomes[s] for s in systems)])
    return grid


# --- Table 2: the size mix -----------------------------------------------------------------------

PASSES = (
    ("creates", ("create",)),
    ("updates", ("update",)),
    ("creates + updates", ("create", "update")),
)


def mix_grid(mix: MixCost, systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = ["Puts", *(f"{s}: $/M puts" for s in systems)]
    headers += [f"VHS ÷ {p}" for p in peers] + [f"goal ≤ {COST_GOAL}x"]
    grid = Grid(f"Cost per million puts, catalogue size mix ({len(mix.bodies)} records)", headers)
    for label, passes in PASSES:
        totals = {s: mix.total(s, passes).per_million() for s in systems}
        ratios = [totals[VHS] / totals[p] for p in peers]
        grid.rows.append(
            [
                label,
                *(dollars(totals[s]) for s in systems),
                *(goal_ratio(r, COST_GOAL) for r in ratios),
                verdict(all(r <= COST_GOAL for r in ratios)),
            ]
        )
    return grid


def mix_class_grid(mix: MixCost, systems: Sequence[str]) -> Grid:
    headers = ["Size class", "Records", "Mean size", "zlib ratio", "VHS bodies in S3", *systems]
    grid = Grid("The size mix by class: requests, capacity and $ per million puts", headers)
    for size_class, _share, _range in workload.SIZE_MIX:
        bodies = [b for b in mix.bodies if b.size_class == size_class]
        bills = {s: mix.by_class(s, size_class) for s in systems}
        in_s3 = bills[VHS].per_operation("PutObject")
        grid.rows.append(
            [
                size_class,
                str(len(bodies)),
                size_text(sum(b.size for b in bodies) / len(bodies)),
                f"{_zlib_ratio(bodies):.1f}",
                f"{in_s3:.0%}",
                *(bill_cell(bills[s]) for s in systems),
            ]
        )
    return grid


def size_text(n: float) -> str:
    if n >= 1000 * workload.KB:
        return f"{n / workload.MB:.2f} MB"
    return f"{n / workload.KB:.1f} KB"


def _zlib_ratio(bodies: Sequence[workload.Body]) -> float:
    import zlib

    raw = sum(b.size for b in bodies[:50])
    packed = sum(len(zlib.compress(workload.canonical(b.record), 6)) for b in bodies[:50])
    return raw / packed


# --- Table 3: wall time --------------------------------------------------------------------------


def wall_grid(walls: Sequence[WallTime], systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = ["Operation", "rounds", "raw floor: median", "VHS: median", "VHS ÷ raw floor"]
    headers += ["per-round quartiles", f"goal ≤ {WALL_GOAL}x"]
    if RAW_VHS in systems:
        headers += [f"{RAW_VHS} ÷ raw floor", f"VHS ÷ {RAW_VHS}"]
    headers += [f"{p} ÷ raw floor" for p in peers]
    grid = Grid("Wall time per operation, as a ratio to the raw floor (medians)", headers)
    for wall in walls:
        q1, q3 = wall.paired_spread(VHS)
        row = [
            wall.operation.name,
            str(len(wall.seconds[VHS])),
            f"{wall.median(FLOOR) * 1000:.1f} ms",
            f"{wall.median(VHS) * 1000:.1f} ms",
            ratio(wall.ratio(VHS)),
            f"{q1:.2f}-{q3:.2f}",
            verdict(wall.ratio(VHS) <= WALL_GOAL),
        ]
        if RAW_VHS in systems:
            row += [ratio(wall.ratio(RAW_VHS)), ratio(wall.median(VHS) / wall.median(RAW_VHS))]
        row += [ratio(wall.ratio(p)) for p in peers]
        grid.rows.append(row)
    return grid


# --- Goals ---------------------------------------------------------------------------------------


def goals(
    costs: Sequence[OperationCost], mix: MixCost, walls: Sequence[WallTime], systems: Sequence[str]
) -> list[Goal]:
    found = []
    for label, passes in PASSES:
        for peer in (p for p in PEERS if p in systems):
            r = mix.total(VHS, passes).per_million() / mix.total(peer, passes).per_million()
            found.append(
                Goal(
                    f"Mix cost ≤ {COST_GOAL}x {peer} ({label})",
                    goal_ratio(r, COST_GOAL),
                    r <= COST_GOAL,
                )
            )
    for cost in costs:
        if cost.operation.floor is not None:
            used = _mean(cost.bills[VHS])
            measured = requests_cell(cost.bills[VHS])
            wanted = Bill(requests=cost.operation.floor)
            found.append(
                Goal(
                    f"Requests at the floor: {cost.operation.name} (floor {requests_cell(wanted)})",
                    measured,
                    meets_floor(used, cost.operation.floor),
                )
            )
    for wall in walls:
        r = wall.ratio(VHS)
        found.append(
            Goal(
                f"Wall time ≤ {WALL_GOAL}x raw floor: {wall.operation.name}",
                ratio(r),
                r <= WALL_GOAL,
            )
        )
    return found


def goals_grid(found: Sequence[Goal]) -> Grid:
    grid = Grid("Goals", ["Goal", "Measured", "Verdict"])
    grid.rows = [[g.name, g.measured, verdict(g.met)] for g in found]
    return grid


def prices_grid() -> Grid:
    grid = Grid("Price table (AWS US East, on demand)", ["Item", "Price", "Rule"])
    grid.rows = [list(row) for row in pricing.price_rows()]
    return grid


# --- Rendering -----------------------------------------------------------------------------------


def print_grid(console: Console, grid: Grid) -> None:
    table = Table(title=grid.title, caption=grid.caption or None, show_lines=False)
    for header in grid.headers:
        table.add_column(header, overflow="fold")
    for row in grid.rows:
        table.add_row(*(_styled(cell) for cell in row))
    console.print(table)


def stdout_console(width: int) -> Console:
    """A console on stdout; `width` columns when piped, where rich would assume 80 and wrap
    every cell."""
    console = Console()
    return console if console.is_terminal else Console(width=width)


def _styled(cell: str) -> str:
    if cell in ("NOT met", "NO"):
        return f"[bold red]{cell}[/]"
    if cell in ("met", "yes"):
        return f"[green]{cell}[/]"
    return cell


def markdown_table(grid: Grid) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    lines = [line(grid.headers), line(["---"] * len(grid.headers))]
    lines += [line(row) for row in grid.rows]
    if grid.caption:
        lines += ["", grid.caption]
    return "\n".join(lines)


class Progress:
    """Says on stderr what the run is doing, with the seconds since it started."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.started = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, message: str) -> None:
        self.console.print(f"[dim]{self.elapsed:6.1f}s[/] {message}")
