"""`make bench`: VHS against its peers and the raw floor, on one moto server, in one run.

    .venv/bin/python benchmarks/run.py                 print the tables
    .venv/bin/python benchmarks/run.py --write PATH    ... and write them as Markdown to PATH
    .venv/bin/python benchmarks/run.py --quick         smoke mode (about a minute)
    .venv/bin/python benchmarks/run.py --json          results as JSON on stdout

Four measurements (measure.py): requests and cost per operation, cost per million puts on a
catalogue-like size mix (every record put 10 times: the two-version mix is its first two puts),
the storage the mix leaves behind, and wall time per operation as a ratio to the raw floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

# Run as a script: make the repository (for `benchmarks`) and lambdas/ (for `vhs`) importable.
ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "lambdas"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from rich.console import Console  # noqa: E402

from benchmarks import document, measure, report, scenarios, sections, workload  # noqa: E402
from benchmarks.peers.pynamodb_mate_peer import PynamodbMateStore  # noqa: E402
from benchmarks.peers.raw_floor import RawFloor  # noqa: E402
from benchmarks.peers.raw_vhs_requests import RawVhsRequests  # noqa: E402
from benchmarks.peers.wellcome2018 import Wellcome2018Store  # noqa: E402
from benchmarks.systems import System, VhsSystem  # noqa: E402
from vhs.local.stack import MotoServer, client  # noqa: E402

SEED = 2018


@dataclass(frozen=True)
class Settings:
    mode: str
    mix_records: int
    mix_puts: int  # puts of every record in the mix: a create, then edits (2: the two-version mix)
    small_rounds: tuple[int, int]  # (warm-up, measured) rounds for small bodies
    large_rounds: tuple[int, int]  # the same for 1 MB bodies, which are slow on moto
    wall_peers: bool  # time the peers too (context), not only VHS and the floor


FULL = Settings(
    "full",
    mix_records=1000,
    mix_puts=10,
    small_rounds=(3, 40),
    large_rounds=(2, 12),
    wall_peers=True,
)
QUICK = Settings(
    "quick",
    mix_records=100,
    mix_puts=3,
    small_rounds=(1, 8),
    large_rounds=(1, 3),
    wall_peers=False,
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="write the report as Markdown to PATH")
    parser.add_argument("--quick", action="store_true", help="smoke mode: small mix, few rounds")
    parser.add_argument("--json", action="store_true", help="print results as JSON, not tables")
    parser.add_argument(
        "--only",
        choices=["parts"],
        help="run one scenario alone: parts (a record with two parts, benchmarks/parts.py)",
    )
    return parser.parse_args(argv)


def build_systems(endpoint: str) -> dict[str, Any]:
    """Every system with fresh clients and its own table and bucket on the one server."""
    probe = client("dynamodb", endpoint)  # un-metered: reads item sizes for billing

    def clients() -> tuple[Any, Any]:
        return client("s3", endpoint), client("dynamodb", endpoint)

    systems: list[System | RawVhsRequests] = [
        VhsSystem(*clients(), probe, table="bench-vhs", bucket="bench-vhs"),
        PynamodbMateStore(
            client("s3", endpoint), endpoint, probe, table="bench-pm", bucket="bench-pm"
        ),
        Wellcome2018Store(*clients(), probe, table="bench-wellcome", bucket="bench-wellcome"),
        RawFloor(*clients(), probe, table="bench-raw", bucket="bench-raw"),
        # VHS as every put was before delta history (issue 12): blind one-request writes, the
        # history kept whole, a trim write every `versions // 2` updates. The "before" of the
        # creates goal, and a diagnostic beside VHS.
        VhsSystem(
            *clients(),
            probe,
            table="bench-vhs-blind",
            bucket="bench-vhs-blind",
            name=report.DELTA_OFF,
            delta_history=False,
        ),
        # A diagnostic, outside the goals: VHS's requests without VHS's code (wall time).
        RawVhsRequests(*clients(), probe, scratch=clients(), table="bench-raw-vhs"),
    ]
    return {s.name: s for s in systems}


def measure_storage(
    systems: Sequence[Any], endpoint: str, records: int, puts: int, progress: report.Progress
) -> report.StorageResult:
    """What each system keeps after the mix, from its table and bucket (the mix runs first, so
    they hold the mix's records only). VHS's systems are measured before and after a run of
    their garbage collector, which at steady state removes what retention no longer keeps."""
    s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)  # un-metered

    def stored(system: Any) -> measure.Storage:
        return measure.stored(s3, dynamodb, table=system.table, bucket=system.bucket)

    before = {s.name: stored(s) for s in systems if s.name in report.VHS_SYSTEMS}
    for system in systems:
        if system.name in report.VHS_SYSTEMS:
            progress(f"storage: {system.name}'s garbage collector")
            system.collect_garbage(client("s3", endpoint), client("dynamodb", endpoint))
    after = {s.name: stored(s) for s in systems}
    return report.StorageResult(records, puts, after, before)


def run(settings: Settings, progress: report.Progress) -> dict[str, Any]:
    progress(f"generating the workload ({settings.mix_records} records, seed {SEED})")
    samples = scenarios.Samples.build(SEED)
    bodies = workload.size_mix(settings.mix_records, SEED)
    with MotoServer() as server:
        progress(f"moto server on {server.endpoint}")
        systems = build_systems(server.endpoint)
        main = [
            systems[name] for name in (report.VHS, report.DELTA_OFF, *report.PEERS, report.FLOOR)
        ]
        for_mix = [systems[name] for name in (report.VHS, *report.PEERS, report.DELTA_OFF)]
        timed = [systems[report.VHS], systems[report.FLOOR]]
        if settings.wall_peers:
            timed += [systems[name] for name in (report.RAW_VHS, *report.PEERS)]

        # The mix first, so that the tables and buckets hold its records only when the
        # storage they take is measured.
        mix = measure.cost_of_mix(for_mix, bodies, SEED, settings.mix_puts, progress)
        storage = measure_storage(
            for_mix, server.endpoint, len(bodies), settings.mix_puts, progress
        )
        progress("cost per operation")
        costs = measure.cost_per_operation(main, samples)

        def rounds(operation: scenarios.Operation) -> tuple[int, int]:
            return settings.large_rounds if "large" in operation.name else settings.small_rounds

        walls = measure.wall_times(timed, samples, report.FLOOR, rounds, progress)
    return {
        "samples": samples,
        "costs": costs,
        "mix": mix,
        "storage": storage,
        "walls": walls,
        "cost_systems": [s.name for s in main],
        "mix_systems": [s.name for s in for_mix],
        "wall_systems": [s.name for s in timed],
    }


def run_metadata(settings: Settings, samples: scenarios.Samples, seconds: float) -> dict[str, str]:
    versions = {name: metadata.version(name) for name in ("boto3", "moto", "pynamodb_mate")}
    small, large = (len(workload.canonical(v[0])) for v in (samples.small, samples.large))
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": settings.mode,
        "duration": f"{seconds:.0f} s",
        "pynamodb_mate": versions["pynamodb_mate"],
        "environment": (
            f"Python {platform.python_version()}, boto3 {versions['boto3']}, "
            f"moto {versions['moto']} (server mode), {platform.system()} {platform.machine()}"
        ),
        "cpus": str(os.cpu_count()),
        "rounds": (
            f"{settings.small_rounds[1]} measured rounds after {settings.small_rounds[0]} "
            f"warm-up rounds for small bodies, {settings.large_rounds[1]} after "
            f"{settings.large_rounds[0]} for large ones"
        ),
        "mix_puts": str(settings.mix_puts),
        "steady_updates": str(scenarios.STEADY_STATE_UPDATES),
        "steady_prior": str(scenarios.STEADY_STATE_PRIOR_VERSIONS),
        "small_size": str(small),
        "large_size": str(large),
    }


def found_goals(results: dict[str, Any]) -> list[report.Goal]:
    return report.goals(
        results["costs"],
        results["mix"],
        results["walls"],
        results["mix_systems"],
        results["storage"],
    )


def grids(results: dict[str, Any]) -> list[report.Grid]:
    mix = results["mix"]
    return [
        report.operations_grid(results["costs"], results["cost_systems"]),
        report.outcomes_grid(results["costs"], results["cost_systems"]),
        report.mix_grid(mix, results["mix_systems"]),
        report.mix_class_grid(mix, results["mix_systems"], report.TWO_VERSIONS),
        report.mix_class_grid(mix, results["mix_systems"], report.all_puts(mix)),
        report.storage_grid(results["storage"], results["mix_systems"]),
        report.wall_grid(results["walls"], results["wall_systems"]),
        report.goals_grid(found_goals(results)),
    ]


def as_json(results: dict[str, Any], meta: dict[str, str]) -> dict[str, Any]:
    def bill(b: Any) -> dict[str, Any]:
        return {
            "requests_per_operation": {op: b.per_operation(op) for op in b.requests},
            "write_units": b.write_units / b.operations,
            "read_units": b.read_units / b.operations,
            "dollars_per_million": b.per_million(),
        }

    mix = results["mix"]
    storage = results["storage"]
    return {
        "meta": meta,
        "operations": [
            {
                "operation": c.operation.name,
                "systems": {n: {**bill(b), "outcome": c.outcomes[n]} for n, b in c.bills.items()},
            }
            for c in results["costs"]
        ],
        "mix": {
            label: {s: bill(mix.total(s, passes)) for s in results["mix_systems"]}
            for label, passes, _goal in report.mix_rows(mix)
        },
        "storage": {
            s: {
                "records": storage.records,
                "after_collection": vars(storage.after[s]),
                "before_collection": vars(storage.before[s]) if s in storage.before else None,
                "gb_month_per_record": sum(storage.after[s].gb_month(storage.records)),
                "dollars_per_million_records_month": storage.dollars(s),
            }
            for s in results["mix_systems"]
        },
        "wall": [
            {
                "operation": w.operation.name,
                "median_seconds": {s: w.median(s) for s in w.seconds},
                "ratio_to_floor": {s: w.ratio(s) for s in w.seconds},
            }
            for w in results["walls"]
        ],
        "goals": [
            {"goal": g.name, "measured": g.measured, "met": g.met} for g in found_goals(results)
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only == "parts":
        from benchmarks import parts

        return parts.main(
            [*(["--write", args.write] if args.write else []), *(["--json"] if args.json else [])]
        )
    settings = QUICK if args.quick else FULL
    errors = Console(stderr=True)
    from benchmarks.report import Progress

    progress = Progress(errors)
    results = run(settings, progress)
    meta = run_metadata(settings, results["samples"], progress.elapsed)
    if args.json:
        print(json.dumps(as_json(results, meta), indent=2))
    else:
        console = report.stdout_console(width=180)
        for grid in grids(results):
            report.print_grid(console, grid)
    if args.write:
        text = document.render(
            costs=results["costs"],
            mix=results["mix"],
            storage=results["storage"],
            walls=results["walls"],
            cost_systems=results["cost_systems"],
            mix_systems=results["mix_systems"],
            wall_systems=results["wall_systems"],
            meta=meta,
        )
        # Other scripts (pipeline.py, gc.py) own marked sections of the same file: keep them.
        Path(args.write).write_text(sections.keep_sections(text, args.write))
        progress(f"wrote {args.write}")
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
