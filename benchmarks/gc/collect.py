"""`make bench`: the garbage collector's throughput and peak memory at 10k and 100k objects,
and a hot id with 5,600 orphans.

    .venv/bin/python benchmarks/gc.py                              print the tables
    .venv/bin/python benchmarks/gc.py --write docs/benchmarks.md   ... and update its GC section
    .venv/bin/python benchmarks/gc.py --quick                      smoke run (2k and 10k objects)
    .venv/bin/python benchmarks/gc.py --hot-only                   the hot id alone
    .venv/bin/python benchmarks/gc.py --json                       results as JSON on stdout

The claim under test (docs/gc.md): the collector works a listing page at a time, so its memory
is bounded by a page, not by the bucket. Each size gets a table and bucket of its own on one
moto server, filled with referenced bodies and orphans of three kinds (a crashed create, a
crashed update, a version beyond retention). The collector then runs in a child process of
its own, configured from the environment as the Lambda is, so the peak RSS measured is the
collector's alone: not moto's, not the population's.

The hot id (issue 11): one record id with thousands of orphans, more than one condemnation
may name, collected by successive passes, each a collector process whose clock is past the
previous condemnation's expiry, as scheduled runs would be: the seconds, the requests by
operation, the passes, and the item's largest size while condemned against DynamoDB's 400 KB.

The pieces, in the order a run uses them:

* gc_process.py: the moto server (in this process) and the collector's child process;
* gc_dataset.py: the data set of referenced bodies and orphans, and populating a store;
* gc_measure.py: one size measured and checked, and the fixed cost of a collector process;
* gc_hot.py: the hot id, populated, collected pass by pass and checked;
* gc_report.py: the tables, the prose computed from them, the Markdown section and JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

# Run as a script: make the repository (for `benchmarks`) and lambdas/ (for `vhs`) importable.
ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "lambdas"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from rich.console import Console  # noqa: E402

from benchmarks import gc_report, sections  # noqa: E402
from benchmarks.gc_dataset import API_OBJECTS, ORPHAN_SHARE, mean_body_size  # noqa: E402
from benchmarks.gc_hot import HOT_ORPHANS, measure_hot_id  # noqa: E402
from benchmarks.gc_measure import measure_baseline, measure_size  # noqa: E402
from benchmarks.gc_process import InProcessServer  # noqa: E402
from benchmarks.report import Progress, stdout_console  # noqa: E402

FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (2_000, 10_000)
QUICK_HOT_ORPHANS = 1_500


def run_metadata(
    args: argparse.Namespace, seconds: float, sizes: Sequence[int], hot: int
) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "duration": f"{seconds:.0f} s",
        "sizes": list(sizes),
        "hot_orphans": hot,
        "orphan_share": args.orphans,
        "api_objects": API_OBJECTS,
        "body_size": int(round(mean_body_size(args.orphans), -1)),
        "environment": (
            f"Python {platform.python_version()}, botocore {metadata.version('botocore')}, "
            f"moto {metadata.version('moto')}, {platform.system()} {platform.machine()}"
        ),
        "cpus": os.cpu_count(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="update the GC section of PATH")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2k and 10k objects")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument(
        "--sizes", help="object counts, comma-separated (default: 10000,100000; quick: 2000,10000)"
    )
    parser.add_argument(
        "--orphans", type=float, default=ORPHAN_SHARE, help="share of objects that are orphans"
    )
    parser.add_argument(
        "--hot",
        type=int,
        metavar="N",
        help=f"orphans of the hot id (default: {HOT_ORPHANS}; quick: {QUICK_HOT_ORPHANS}; 0: none)",
    )
    parser.add_argument(
        "--hot-only", action="store_true", help="measure the hot id alone, not the sizes"
    )
    args = parser.parse_args(argv)
    if args.write and (args.hot_only or args.hot == 0):
        parser.error("--write needs the sizes and the hot id: leave out --hot-only and --hot 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.hot_only:
        sizes = ()
    hot_orphans = args.hot if args.hot is not None else HOT_ORPHANS
    if args.quick and args.hot is None:
        hot_orphans = QUICK_HOT_ORPHANS
    progress = Progress(Console(stderr=True))
    baseline: dict[str, Any] = {}
    hot = None
    with InProcessServer() as server:
        progress(f"moto server on {server.endpoint} (in this process)")
        if sizes:
            baseline = measure_baseline(server)
            progress(
                f"baseline: idle {baseline['idle']['peak_rss_mb']:.1f} MB, "
                f"empty bucket {baseline['empty']['peak_rss_mb']:.1f} MB"
            )
        results = [measure_size(server, n, args.orphans, progress) for n in sizes]
        if hot_orphans:
            hot = measure_hot_id(server, hot_orphans, progress)
    meta = run_metadata(args, progress.elapsed, sizes, hot_orphans)
    if args.json:
        print(json.dumps(gc_report.as_json(results, baseline, meta, hot), indent=2))
    else:
        gc_report.print_report(stdout_console(width=160), results, baseline, hot)
    if args.write:
        assert hot is not None and results
        markdown = gc_report.markdown(results, baseline, meta, hot)
        sections.write_section(args.write, gc_report.SECTION, markdown)
        progress(f"wrote the {gc_report.SECTION} section of {args.write}")
    failed = gc_report.problems(results, hot)
    for problem in failed:
        progress(f"[bold red]check failed[/]: {problem}")
    progress("done")
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip tearing down moto's in-memory state object by object: 15 s at 100k objects.
    os._exit(code)
