"""The store benchmark's figures (benchmarks/store.py), as Markdown tables."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vhs import Retention

from . import pricing, workload
from .common import table
from .measure import STEADY_NAME, MixCost, OperationCost, Storage, WallTime, meets_floor
from .pricing import Bill

VHS = "VHS"
PEERS = ("pynamodb_mate", "Wellcome 2018")
FLOOR = "raw floor"
DELTA_OFF = "VHS, delta history off"  # diagnostic and "before": blind writes, whole history
TEXT_LAYOUT = "VHS, text layout"  # the item layout before the compact one: its "before"
RAW_VHS = "raw, VHS's requests"  # diagnostic: VHS's requests without VHS's code
COST_GOAL = 0.2  # the two-version mix: VHS's $ per million puts at most this x the cheaper peer's
STEADY_GOAL = 0.25  # the steady-state mix (every record put `puts` times): the same, at most
STEADY_FLOOR_GOAL = 0.75  # a small update at retention full: at most this x the raw floor's $
CREATE_GOAL = 1.05  # creates: at most this x the blind mode's (delta history off) $
WALL_GOAL = 1.2  # VHS's wall time at most this multiple of the raw floor's
ABBREVIATIONS = {"GetItem": "GI", "PutItem": "PI", "UpdateItem": "UI", "DeleteItem": "DI",
                 "PutObject": "PUT", "GetObject": "GET", "HeadObject": "HEAD",
                 "DeleteObject": "DEL", "DeleteObjects": "DELS"}  # fmt: skip
TWO_VERSIONS = ("1", "2")


@dataclass(frozen=True)
class StorageResult:
    """What each system holds after the mix, and VHS's systems before their collector ran."""

    records: int
    after: dict[str, Storage]
    before: dict[str, Storage]

    def dollars(self, system: str) -> float:
        """$ per month for a million records held as the mix's are."""
        dynamodb, s3 = self.after[system].gb_month(self.records)
        p = pricing.PRICES
        return (dynamodb * p.dynamodb_storage_per_gb_month + s3 * p.s3_storage_per_gb_month) * 1e6


def _count(n: float) -> str:
    if n == int(n):
        return f"{n:g}"
    return "<0.01" if n < 0.005 else f"{n:.2f}"  # a request in some puts, rarely: not "0.00"


def requests_cell(bill: Bill) -> str:
    """Requests per operation, such as "HEAD PUT GI UI DELS" or "1.5xUI"."""
    order = list(ABBREVIATIONS)
    ops = sorted(bill.requests, key=lambda o: order.index(o) if o in order else 99)
    cells = [(bill.per_operation(op), ABBREVIATIONS.get(op, op)) for op in ops]
    return " ".join(name if n == 1 else f"{_count(n)}x{name}" for n, name in cells) or "none"


def units_cell(bill: Bill) -> str:
    wu, ru = bill.write_units / bill.operations, bill.read_units / bill.operations
    return " ".join([f"{_count(wu)} WU"] * bool(wu) + [f"{_count(ru)} RU"] * bool(ru)) or "0"


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
    return "reported (no target)" if met is None else "met" if met else "NOT met"


def bill_cell(bill: Bill) -> str:
    return f"{requests_cell(bill)} · {units_cell(bill)} · {dollars(bill.per_million())}"


def operations(costs: Sequence[OperationCost], systems: Sequence[str]) -> str:
    against = (*PEERS, FLOOR)
    headers = ["Operation", *systems, *(f"VHS ÷ {p}" for p in against), "VHS at the floor?"]
    rows, outcomes = [], []
    for cost in costs:
        vhs, floor = cost.bills[VHS], cost.operation.floor
        at_floor = "-" if floor is None else "yes" if meets_floor(vhs, floor) else "NO"
        rows.append([cost.operation.name, *(bill_cell(cost.bills[s]) for s in systems),
                     *(ratio(vhs.per_million() / cost.bills[p].per_million()) for p in against),
                     at_floor])  # fmt: skip
        if cost.operation.name.startswith(("duplicate", "stale")):
            outcomes.append([cost.operation.name, *(cost.outcomes[s] for s in systems)])
    return "\n\n".join([
        table(headers, rows),
        "What each system did with the puts that should change nothing:",
        table(["Operation", *systems], outcomes),
    ])  # fmt: skip


def dearer(costs: Sequence[OperationCost]) -> str:
    """Where VHS costs more than a peer, and what delta history changes against the blind mode."""
    rows, changed = [], []
    for cost in costs:
        name, vhs = cost.operation.name, cost.bills[VHS].per_million()
        for peer in PEERS:
            theirs = cost.bills[peer].per_million()
            if vhs > theirs:
                rows.append([name, dollars(vhs), peer, dollars(theirs), ratio(vhs / theirs)])
        if abs(cost.bills[DELTA_OFF].per_million() - vhs) > 1e-9:
            changed.append([name, bill_cell(cost.bills[DELTA_OFF]), bill_cell(cost.bills[VHS])])
    return "\n\n".join([
        table(["Operation", "VHS $/M", "peer", "peer $/M", "VHS ÷ peer"], rows),
        f"Against **{DELTA_OFF}**, the operations whose price delta history changes:",
        table(["Operation", DELTA_OFF, VHS], changed),
    ])  # fmt: skip


def all_puts(mix: MixCost, first: int = 1) -> tuple[str, ...]:
    return tuple(str(n) for n in range(first, mix.puts + 1))


def puts_label(passes: Sequence[str]) -> str:
    return f"put {passes[0]}" if len(passes) == 1 else f"puts {passes[0]}-{passes[-1]}"


def mix_rows(mix: MixCost) -> list[tuple[str, tuple[str, ...], float | None]]:
    """The mix table's rows: (label, puts, goal as a multiple of the cheaper peer, if any)."""
    parts = (("creates", ("1",)), ("updates", ("2",)), ("creates + updates", TWO_VERSIONS))
    rows = [(f"two-version mix: {label} ({puts_label(p)})", p, COST_GOAL) for label, p in parts]
    if mix.puts > 2:
        rows.append((f"steady-state mix: every put ({puts_label(all_puts(mix))})",
                     all_puts(mix), STEADY_GOAL))  # fmt: skip
        # The puts made once the default retention is full: puts `versions + 2` onwards.
        if full := all_puts(mix, Retention().versions + 2):
            rows.append((f"steady-state mix: retention full ({puts_label(full)})", full, None))
    return rows


def cheaper_peer(mix: MixCost, passes: Sequence[str]) -> str:
    return min(PEERS, key=lambda p: mix.total(p, passes).per_million())


def size_text(n: float) -> str:
    return f"{n / workload.MB:.2f} MB" if n >= 1000 * workload.KB else f"{n / workload.KB:.1f} KB"


def mix(mix: MixCost, systems: Sequence[str]) -> str:
    headers = ["Puts", *(f"{s}: $/M puts" for s in systems), *(f"VHS ÷ {p}" for p in PEERS)]
    rows, breakdown = [], []
    for label, passes, goal in mix_rows(mix):
        totals = {s: mix.total(s, passes).per_million() for s in systems}
        ratios = [totals[VHS] / totals[p] for p in PEERS]
        rows.append([label, *(dollars(totals[s]) for s in systems),
                     *(goal_ratio(r, goal) if goal else ratio(r, 3) for r in ratios),
                     f"≤ {goal}x" if goal else "-",
                     verdict(all(r <= goal for r in ratios)) if goal else "-"])  # fmt: skip
        if goal:
            peer = cheaper_peer(mix, passes)
            target, operations = goal * totals[peer], mix.total(VHS, passes).operations
            share = [dollars(mix.by_class(VHS, c, passes).dollars() / operations * 1e6)
                     for c, _, _ in workload.SIZE_MIX]  # fmt: skip
            gap = totals[VHS] - target
            breakdown.append([label, dollars(totals[VHS]), *share, f"{goal}x {peer}",
                              dollars(target),
                              f"{gap:+.3f} ({totals[VHS] / target - 1:+.1%})"])  # fmt: skip
    classes = [c for c, _, _ in workload.SIZE_MIX]
    parts = [table([*headers, "goal (x the cheaper peer)", "verdict"], rows)]
    for passes in (TWO_VERSIONS, all_puts(mix)):
        parts.append(f"By size class, {puts_label(passes)}:")
        parts.append(class_table(mix, systems, passes))
    parts.append("Where VHS's dollars go, against each goal:")
    parts.append(table(["Puts", "VHS $/M", *classes, "goal", "goal $/M", "VHS - goal"], breakdown))
    return "\n\n".join(parts)


def class_table(mix: MixCost, systems: Sequence[str], passes: Sequence[str]) -> str:
    rows = []
    for size_class, _, _ in workload.SIZE_MIX:
        bodies = [b for b in mix.bodies if b.size_class == size_class]
        bills = {s: mix.by_class(s, size_class, passes) for s in systems}
        sample = bodies[:50]
        packed = sum(len(zlib.compress(workload.canonical(b.record), 6)) for b in sample)
        rows.append([size_class, len(bodies), size_text(sum(b.size for b in bodies) / len(bodies)),
                     f"{sum(b.size for b in sample) / packed:.1f}",
                     f"{bills[VHS].per_operation('PutObject'):.0%}",
                     *(bill_cell(bills[s]) for s in systems)])  # fmt: skip
    headers = ["Size class", "Records", "Mean size", "zlib ratio", "VHS bodies in S3", *systems]
    return table(headers, rows)


def storage(found: StorageResult, per_put: Mapping[str, float], systems: Sequence[str],
            puts: str = "steady-state puts") -> str:  # fmt: skip
    """Storage per record of each system, beside its $ per million `puts` (`per_put`)."""
    n, rows = found.records, []
    for system in systems:
        after, before = found.after[system], found.before.get(system)
        dynamodb, s3 = after.gb_month(n)
        reclaimed = f"{before.object_bytes / n:,.0f} B" if before else "-"
        rows.append([system, after.items, f"{after.item_bytes / n:,.0f} B",
                     f"{after.objects / n:.2f}",
                     f"{after.object_bytes / n:,.0f} B", reclaimed, f"{dynamodb:.2e} + {s3:.2e}",
                     dollars(found.dollars(system)),
                     f"{found.dollars(system) / per_put[system]:.2f}",
                     *(ratio(found.dollars(system) / found.dollars(p))
                       for p in PEERS)])  # fmt: skip
    headers = ["System", "items", "DynamoDB bytes per record", "S3 objects per record",
               "S3 bytes per record", "S3 bytes per record before the collector",
               "GB-month per record (DynamoDB + S3)", "$ per million records per month",
               f"a month's storage in {puts}", *(f"÷ {p}" for p in PEERS)]  # fmt: skip
    return table(headers, rows)


def wall(walls: Sequence[WallTime], systems: Sequence[str]) -> str:
    peers = [p for p in PEERS if p in systems]
    headers = ["Operation", "rounds", "raw floor: median", "VHS: median", "VHS ÷ raw floor",
               "per-round quartiles", f"goal ≤ {WALL_GOAL}x"]  # fmt: skip
    if RAW_VHS in systems:
        headers += [f"{RAW_VHS} ÷ raw floor", f"VHS ÷ {RAW_VHS}"]
    rows = []
    for w in walls:
        q1, q3 = w.paired_spread(VHS)
        row = [w.operation.name, len(w.seconds[VHS]), f"{w.median(FLOOR) * 1000:.1f} ms",
               f"{w.median(VHS) * 1000:.1f} ms", ratio(w.ratio(VHS)), f"{q1:.2f}-{q3:.2f}",
               verdict(w.ratio(VHS) <= WALL_GOAL)]  # fmt: skip
        if RAW_VHS in systems:
            row += [ratio(w.ratio(RAW_VHS)), ratio(w.median(VHS) / w.median(RAW_VHS))]
        rows.append(row + [ratio(w.ratio(p)) for p in peers])
    return table([*headers, *(f"{p} ÷ raw floor" for p in peers)], rows)


Goal = tuple[str, str, bool | None]  # goal, measured, met (None: reported, with no target)


def goals(costs: Sequence[OperationCost], mix: MixCost, walls: Sequence[WallTime],
          found: StorageResult) -> list[Goal]:  # fmt: skip
    out: list[Goal] = []
    for label, passes, goal in mix_rows(mix):
        if goal is not None:
            peer = cheaper_peer(mix, passes)
            theirs = mix.total(peer, passes).per_million()
            r = mix.total(VHS, passes).per_million() / theirs
            before = _before(mix.total(TEXT_LAYOUT, passes).per_million() / theirs)
            out.append((f"Mix ≤ {goal}x the cheaper peer ({peer}): {label}",
                        goal_ratio(r, goal) + before, r <= goal))  # fmt: skip
    by_name = {c.operation.name: c for c in costs}
    steady = by_name[STEADY_NAME]
    vhs, floor = steady.bills[VHS].per_million(), steady.bills[FLOOR].per_million()
    r = goal_ratio(vhs / floor, STEADY_FLOOR_GOAL)
    text = steady.bills[TEXT_LAYOUT].per_million()
    measured = f"{r} ({dollars(vhs)} against {dollars(floor)}){_before(text / floor)}"
    out.append((f"{steady.operation.name} ≤ {STEADY_FLOOR_GOAL}x the raw floor's $", measured,
                vhs / floor <= STEADY_FLOOR_GOAL))  # fmt: skip
    small = by_name["small put (new id)"].bills
    creates = [
        ("size mix, put 1", *(mix.total(s, ("1",)).per_million() for s in (VHS, DELTA_OFF))),
        ("small put (new id)", small[VHS].per_million(), small[DELTA_OFF].per_million()),
    ]
    for label, now, before in creates:
        out.append((f"Creates ≤ {CREATE_GOAL}x delta history off: {label}",
                    f"{dollars(now)} against {dollars(before)} ({now / before - 1:+.2%})",
                    now <= CREATE_GOAL * before))  # fmt: skip
    text_creates = [
        ("size mix, put 1", *(mix.total(s, ("1",)).per_million() for s in (VHS, TEXT_LAYOUT))),
        ("small put (new id)", small[VHS].per_million(), small[TEXT_LAYOUT].per_million()),
    ]
    for label, now, before in text_creates:
        out.append((f"Creates no dearer than the text layout: {label}",
                    f"{dollars(now)} against {dollars(before)}", now <= before))  # fmt: skip
    for name in ("duplicate put (large)", "stale put (large)"):
        bill = by_name[name].bills[VHS]
        out.append((f"No S3 PUT when the current entry is known: {name}", requests_cell(bill),
                    bill.per_operation("PutObject") == 0))  # fmt: skip
    peer = min(PEERS, key=found.dollars)
    dynamodb, s3 = found.after[VHS].gb_month(found.records)
    text_bytes = found.after[TEXT_LAYOUT].item_bytes / found.records
    out.append(("Storage at steady state: GB-month per record (DynamoDB + S3), against the "
                "cheaper peer",
                f"{dynamodb + s3:.2e} GB-month, {dollars(found.dollars(VHS))}/M records-month "
                f"({ratio(found.dollars(VHS) / found.dollars(peer))} {peer}); DynamoDB "
                f"{found.after[VHS].item_bytes / found.records:,.0f} B per record (text layout: "
                f"{text_bytes:,.0f} B, {dollars(found.dollars(TEXT_LAYOUT))}/M records-month)",
                None))  # fmt: skip
    for cost in (c for c in costs if c.operation.floor is not None):
        wanted = requests_cell(Bill(requests=cost.operation.floor))
        note = f": {cost.operation.floor_note}" if cost.operation.floor_note else ""
        out.append((f"Requests at the floor: {cost.operation.name} (floor {wanted}{note})",
                    requests_cell(cost.bills[VHS]),
                    meets_floor(cost.bills[VHS], cost.operation.floor)))  # fmt: skip
    for w in walls:
        out.append((f"Wall time ≤ {WALL_GOAL}x raw floor: {w.operation.name}", ratio(w.ratio(VHS)),
                    w.ratio(VHS) <= WALL_GOAL))  # fmt: skip
    return out


def _before(r: float) -> str:
    """A ratio of the text layout's, beside the compact layout's."""
    return f"; text layout: {ratio(r, 3)}"


def workload_table(mix: MixCost) -> str:
    rows = [[c, f"{share:.0%}", f"{size_text(low)} to {size_text(high)}",
             sum(b.size_class == c for b in mix.bodies)]
            for c, share, (low, high) in workload.SIZE_MIX]  # fmt: skip
    return table(["Class", "Share", "Size", "Records in this run"], rows)
