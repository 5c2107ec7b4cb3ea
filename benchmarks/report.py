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

from vhs import Retention

from . import pricing, workload
from .measure import MixCost, OperationCost, Storage, WallTime
from .pricing import Bill
from .scenarios import meets_floor

VHS = "VHS"
PEERS = ("pynamodb_mate", "Wellcome 2018")
FLOOR = "raw floor"
DELTA_OFF = "VHS, delta history off"  # diagnostic and "before": blind writes, whole history
NO_HISTORY = "VHS, versions=0"  # diagnostic: VHS with Retention(versions=0)
RAW_VHS = "raw, VHS's requests"  # diagnostic: VHS's requests without VHS's code
VHS_SYSTEMS = (VHS, DELTA_OFF, NO_HISTORY)  # run the garbage collector before storage counts
COST_GOAL = 0.2  # the two-version mix: VHS's $ per million puts at most this x the cheaper peer's
STEADY_GOAL = 0.25  # the steady-state mix (every record put `puts` times): the same, at most
STEADY_FLOOR_GOAL = 1.25  # a small update at retention full: at most this x the raw floor's $
CREATE_GOAL = 1.05  # creates: at most this x the blind mode's (delta history off) $
WALL_GOAL = 1.2  # VHS's wall time at most this multiple of the raw floor's
STEADY_ROW_PREFIX = "small put (update, versions"

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
    met: bool | None  # None: reported, with no target to meet


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


def verdict(met: bool | None) -> str:
    if met is None:
        return "reported (no target)"
    return "met" if met else "NOT met"


# --- Table 1: requests and cost per operation ----------------------------------------------------


def bill_cell(bill: Bill) -> str:
    """Requests, capacity and price of one operation: "UI · 3 WU · $1.875"."""
    return f"{requests_cell(bill)} · {units_cell(bill)} · {dollars(bill.per_million())}"


def operations_grid(costs: Sequence[OperationCost], systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = ["Operation", *systems, *(f"VHS ÷ {p}" for p in peers)]
    if FLOOR in systems:
        headers.append(f"VHS ÷ {FLOOR}")
    headers.append("VHS at the floor?")
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
                *([ratio(vhs / cost.bills[FLOOR].per_million())] if FLOOR in systems else []),
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

# The two-version mix: every record created, then updated once (puts 1 and 2 of the mix).
PASSES = (
    ("creates", ("1",)),
    ("updates", ("2",)),
    ("creates + updates", ("1", "2")),
)
TWO_VERSIONS = PASSES[2][1]


def all_puts(mix: MixCost) -> tuple[str, ...]:
    return tuple(str(n) for n in range(1, mix.puts + 1))


def full_retention_puts(mix: MixCost) -> tuple[str, ...]:
    """The puts made once VHS's default retention is full (the item holds `versions` earlier
    versions before each): puts `versions + 2` onwards."""
    first = Retention().versions + 2
    return tuple(str(n) for n in range(first, mix.puts + 1))


def puts_label(passes: Sequence[str]) -> str:
    return f"put {passes[0]}" if len(passes) == 1 else f"puts {passes[0]}-{passes[-1]}"


def mix_rows(mix: MixCost) -> list[tuple[str, tuple[str, ...], float | None]]:
    """The mix table's rows: (label, puts, goal as a multiple of the cheaper peer, if any)."""
    rows: list[tuple[str, tuple[str, ...], float | None]] = [
        (f"two-version mix: {label} ({puts_label(passes)})", passes, COST_GOAL)
        for label, passes in PASSES
    ]
    if mix.puts > 2:
        everything = all_puts(mix)
        rows.append(
            (f"steady-state mix: every put ({puts_label(everything)})", everything, STEADY_GOAL)
        )
        full = full_retention_puts(mix)
        if full:
            rows.append((f"steady-state mix: retention full ({puts_label(full)})", full, None))
    return rows


def cheaper_peer(mix: MixCost, passes: Sequence[str], systems: Sequence[str]) -> str:
    peers = [p for p in PEERS if p in systems]
    return min(peers, key=lambda p: mix.total(p, passes).per_million())


def mix_grid(mix: MixCost, systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = ["Puts", *(f"{s}: $/M puts" for s in systems)]
    headers += [f"VHS ÷ {p}" for p in peers] + ["goal (x the cheaper peer)", "verdict"]
    title = (
        f"Cost per million puts, catalogue size mix ({len(mix.bodies)} records, each put "
        f"{mix.puts} times)"
    )
    grid = Grid(title, headers)
    for label, passes, goal in mix_rows(mix):
        totals = {s: mix.total(s, passes).per_million() for s in systems}
        ratios = [totals[VHS] / totals[p] for p in peers]
        grid.rows.append(
            [
                label,
                *(dollars(totals[s]) for s in systems),
                *(goal_ratio(r, goal) if goal else ratio(r, 3) for r in ratios),
                f"≤ {goal}x" if goal else "-",
                verdict(all(r <= goal for r in ratios)) if goal else "-",
            ]
        )
    return grid


def mix_class_grid(mix: MixCost, systems: Sequence[str], passes: Sequence[str]) -> Grid:
    headers = ["Size class", "Records", "Mean size", "zlib ratio", "VHS bodies in S3", *systems]
    grid = Grid(
        f"The size mix by class, {puts_label(passes)}: requests, capacity and $ per million puts",
        headers,
    )
    for size_class, _share, _range in workload.SIZE_MIX:
        bodies = [b for b in mix.bodies if b.size_class == size_class]
        bills = {s: mix.by_class(s, size_class, passes) for s in systems}
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


# --- Table 3: storage at steady state ------------------------------------------------------------


@dataclass(frozen=True)
class StorageResult:
    """What each system holds after the steady-state mix (`after`), and for VHS's systems
    what they held before their garbage collector ran (`before`)."""

    records: int
    puts: int
    after: dict[str, Storage]
    before: dict[str, Storage]

    def dollars(self, system: str) -> float:
        """$ per month for a million records held as the mix's are."""
        return self.after[system].dollars_per_million_records(self.records)


def bytes_text(n: float) -> str:
    return f"{n:,.0f} B"


def storage_grid(storage: StorageResult, systems: Sequence[str]) -> Grid:
    peers = [p for p in PEERS if p in systems]
    headers = [
        "System",
        "items",
        "DynamoDB bytes per record",
        "S3 objects per record",
        "S3 bytes per record",
        "S3 bytes per record before the collector",
        "GB-month per record (DynamoDB + S3)",
        "$ per million records per month",
        *(f"÷ {p}" for p in peers),
    ]
    n = storage.records
    grid = Grid(
        f"Storage after the steady-state mix ({n} records, each put "
        f"{storage.puts} times), as scanned and listed",
        headers,
    )
    for system in systems:
        after = storage.after[system]
        before = storage.before.get(system)
        dynamodb, s3 = after.gb_month(n)
        grid.rows.append(
            [
                system,
                str(after.items),
                bytes_text(after.item_bytes / n),
                f"{after.objects / n:.2f}",
                bytes_text(after.object_bytes / n),
                bytes_text(before.object_bytes / n) if before else "-",
                f"{dynamodb:.2e} + {s3:.2e}",
                dollars(storage.dollars(system)),
                *(ratio(storage.dollars(system) / storage.dollars(p)) for p in peers),
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


# --- Table 4: wall time --------------------------------------------------------------------------


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


def _cost_of(costs: Sequence[OperationCost], prefix: str) -> OperationCost:
    return next(c for c in costs if c.operation.name.startswith(prefix))


def _increase(now: float, before: float) -> str:
    return f"{dollars(now)} against {dollars(before)} ({now / before - 1:+.2%})"


def goals(
    costs: Sequence[OperationCost],
    mix: MixCost,
    walls: Sequence[WallTime],
    systems: Sequence[str],
    storage: StorageResult | None = None,
) -> list[Goal]:
    """Every goal with its verdict: issue 12's first (steady state), then the earlier ones."""
    found = []
    # The mixes: at most a fraction of the cheaper peer.
    for label, passes, goal in mix_rows(mix):
        if goal is None:
            continue
        peer = cheaper_peer(mix, passes, systems)
        r = mix.total(VHS, passes).per_million() / mix.total(peer, passes).per_million()
        found.append(
            Goal(
                f"Mix ≤ {goal}x the cheaper peer ({peer}): {label}",
                goal_ratio(r, goal),
                r <= goal,
            )
        )
    # A small update at retention full: dollars against the raw floor's.
    steady = _cost_of(costs, STEADY_ROW_PREFIX)
    if FLOOR in steady.bills:
        vhs, floor = steady.bills[VHS].per_million(), steady.bills[FLOOR].per_million()
        r = vhs / floor
        found.append(
            Goal(
                f"{steady.operation.name} ≤ {STEADY_FLOOR_GOAL}x the raw floor's $",
                f"{goal_ratio(r, STEADY_FLOOR_GOAL)} ({dollars(vhs)} against {dollars(floor)})",
                r <= STEADY_FLOOR_GOAL,
            )
        )
    # Creates: no dearer than the blind mode (what every put was before delta history).
    if DELTA_OFF in systems:
        now, before = (mix.total(s, ("1",)).per_million() for s in (VHS, DELTA_OFF))
        found.append(
            Goal(
                f"Creates ≤ {CREATE_GOAL}x delta history off: size mix, put 1",
                _increase(now, before),
                now <= CREATE_GOAL * before,
            )
        )
    new = _cost_of(costs, "small put (new id)")
    if DELTA_OFF in new.bills:
        now, before = (new.bills[s].per_million() for s in (VHS, DELTA_OFF))
        found.append(
            Goal(
                f"Creates ≤ {CREATE_GOAL}x delta history off: small put (new id)",
                _increase(now, before),
                now <= CREATE_GOAL * before,
            )
        )
    # Uploads that cannot win are not sent.
    for name in ("duplicate put (large)", "stale put (large)"):
        bill = _cost_of(costs, name).bills[VHS]
        found.append(
            Goal(
                f"No S3 PUT when the current entry is known: {name}",
                requests_cell(bill),
                bill.per_operation("PutObject") == 0,
            )
        )
    if storage is not None:
        peer = min((p for p in PEERS if p in storage.after), key=storage.dollars)
        dynamodb, s3 = storage.after[VHS].gb_month(storage.records)
        found.append(
            Goal(
                "Storage at steady state: GB-month per record (DynamoDB + S3), against the "
                "cheaper peer",
                f"{dynamodb + s3:.2e} GB-month, {dollars(storage.dollars(VHS))}/M records-month "
                f"({ratio(storage.dollars(VHS) / storage.dollars(peer))} {peer})",
                None,
            )
        )
    for cost in costs:
        if cost.operation.floor is not None:
            used = _mean(cost.bills[VHS])
            measured = requests_cell(cost.bills[VHS])
            wanted = requests_cell(Bill(requests=cost.operation.floor))
            note = f": {cost.operation.floor_note}" if cost.operation.floor_note else ""
            found.append(
                Goal(
                    f"Requests at the floor: {cost.operation.name} (floor {wanted}{note})",
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
