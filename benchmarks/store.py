"""Tables 1-4 of docs/benchmarks.md: VHS against its peers and the raw floor, in one run."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from vhs.index.layouts import Layout
from vhs_ops.local.stack import MotoServer, client

from . import measure, pricing, report, systems, workload
from .common import Progress, Report, environment, now, table
from .report import DELTA_OFF, FLOOR, PEERS, RAW_VHS, TEXT_LAYOUT, VHS
from .systems import PynamodbMateStore, RawFloor, RawVhsRequests, VhsSystem, Wellcome2018Store


@dataclass(frozen=True)
class Settings:
    mode: str
    mix_records: int
    mix_puts: int  # puts of every record in the mix: a create, then edits (2: two versions)
    small_rounds: tuple[int, int]  # (warm-up, measured) rounds for small bodies
    large_rounds: tuple[int, int]  # the same for 1 MB bodies, which are slow on moto
    wall_peers: bool  # time the peers too (context), not only VHS and the floor


SETTINGS = {
    False: Settings("full", 1000, 10, (3, 40), (2, 12), wall_peers=True),
    True: Settings("quick", 100, 3, (1, 8), (1, 3), wall_peers=False),
}


def build_systems(endpoint: str, *, prefix: str = "bench",
                  vhs: Mapping[str, Mapping[str, Any]] | None = None,
                  diagnostics: bool = True) -> dict[str, Any]:  # fmt: skip
    """VHS in each configuration of `vhs` (name -> VersionedHybridStore options; by default VHS
    with its defaults), the peers, the raw floor and, with `diagnostics`, the three diagnostics
    of docs/benchmarks.md: each with fresh clients and its own table and bucket (`prefix-...`)
    on the one server."""
    probe = client("dynamodb", endpoint)  # un-metered: reads item sizes for billing

    def clients() -> tuple[Any, Any]:
        return client("s3", endpoint), client("dynamodb", endpoint)

    configurations = {VHS: {}} if vhs is None else vhs
    systems: list[Any] = [
        VhsSystem(*clients(), probe, table=f"{prefix}-vhs{f'-{n}' if n else ''}", name=name,
                  **options)
        for n, (name, options) in enumerate(configurations.items())
    ]  # fmt: skip
    systems += [
        PynamodbMateStore(client("s3", endpoint), endpoint, probe, table=f"{prefix}-pm"),
        Wellcome2018Store(*clients(), probe, table=f"{prefix}-wellcome"),
        RawFloor(*clients(), probe, table=f"{prefix}-raw"),
    ]
    if diagnostics:
        systems += [
            VhsSystem(*clients(), probe, table=f"{prefix}-vhs-blind", name=DELTA_OFF,
                      delta_history=False),
            VhsSystem(*clients(), probe, table=f"{prefix}-vhs-text", name=TEXT_LAYOUT,
                      layout=Layout.TEXT),
            RawVhsRequests(*clients(), probe, scratch=clients(), table=f"{prefix}-raw-vhs"),
        ]  # fmt: skip
    return {s.name: s for s in systems}


def measure_storage(systems: Sequence[Any], endpoint: str, records: int,
                    progress: Any) -> report.StorageResult:  # fmt: skip
    """What each system keeps after the mix; VHS's before and after its garbage collector."""
    s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)  # un-metered

    def stored(system: Any) -> measure.Storage:
        return measure.stored(s3, dynamodb, table=system.table, bucket=system.bucket)

    vhs = [s for s in systems if isinstance(s, VhsSystem)]
    before = {s.name: stored(s) for s in vhs}
    for system in vhs:
        progress(f"storage: {system.name}'s garbage collector")
        system.collect_garbage(client("s3", endpoint), client("dynamodb", endpoint))
    after = {s.name: stored(s) for s in systems}
    return report.StorageResult(records, after, before)


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    settings = SETTINGS[args.quick]
    samples = workload.Samples.build()
    bodies = workload.size_mix(settings.mix_records)
    with MotoServer() as server:
        systems = build_systems(server.endpoint)
        main = [systems[name] for name in (VHS, TEXT_LAYOUT, DELTA_OFF, *PEERS, FLOOR)]
        for_mix = [systems[name] for name in (VHS, TEXT_LAYOUT, *PEERS, DELTA_OFF)]
        timed = [systems[VHS], systems[FLOOR]]
        timed += [systems[name] for name in (RAW_VHS, *PEERS)] if settings.wall_peers else []
        # The mix first: storage is measured while the tables and buckets hold its records only.
        mix = measure.cost_of_mix(for_mix, bodies, workload.SEED, settings.mix_puts, progress)
        stored = measure_storage(for_mix, server.endpoint, len(bodies), progress)
        progress("cost per operation")
        costs = measure.cost_per_operation(main, samples)

        def rounds(operation: systems.Operation) -> tuple[int, int]:
            return settings.large_rounds if "large" in operation.name else settings.small_rounds

        walls = measure.wall_times(timed, samples, FLOOR, rounds, progress)
    names = [s.name for s in main], [s.name for s in for_mix], [s.name for s in timed]
    goals = report.goals(costs, mix, walls, stored)
    judged = [g for g in goals if g[2] is not None]
    small, large = (len(workload.canonical(v[0])) for v in (samples.small, samples.large))
    (warm, small_rounds), (large_warm, large_rounds) = settings.small_rounds, settings.large_rounds
    sections = {
        "store-run": f"Run {now()}, {settings.mode} mode, {progress.elapsed:.0f} s; "
        f"pynamodb_mate {metadata.version('pynamodb_mate')}. Goals met: "
        f"**{sum(bool(g[2]) for g in judged)} of {len(judged)}** (and "
        f"{len(goals) - len(judged)} reported with no target).",
        "store-goals": table(
            ["Goal", "Measured", "Verdict"], [[g, m, report.verdict(v)] for g, m, v in goals]
        ),
        "store-operations": report.operations(costs, names[0]),
        "store-dearer": report.dearer(costs),
        "store-mix": report.mix(mix, names[1]),
        "store-storage": report.storage(
            stored,
            {s: mix.total(s, report.all_puts(mix)).per_million() for s in names[1]},
            names[1],
        ),
        "store-wall": report.wall(walls, names[2]),
        "store-settings": f"This run: {len(bodies)} records, each put {settings.mix_puts} times; "
        f"table 1's steady-state row bills {measure.STEADY_STATE_UPDATES} updates of an id "
        f"with {measure.STEADY_STATE_PRIOR_VERSIONS} versions; wall time: {small_rounds} "
        f"measured rounds after {warm} warm-up rounds for small bodies, {large_rounds} after "
        f"{large_warm} for large ones. {environment()}.",
        "store-workload": report.workload_table(mix) + f"\n\nTable 1 uses a "
        f"{report.size_text(small)} record and a {report.size_text(large)} record, each with "
        "a second version.",
        "store-prices": table(["Item", "Price", "Rule"], pricing.PRICE_ROWS),
    }
    data = {
        "operations": {c.operation.name: c.bills for c in costs},
        "mix": {
            label: {s: mix.total(s, p) for s in names[1]} for label, p, _ in report.mix_rows(mix)
        },
        "storage": stored,
        "wall_seconds": {w.operation.name: w.seconds for w in walls},
        "goals": goals,
    }
    return Report(sections, data)
