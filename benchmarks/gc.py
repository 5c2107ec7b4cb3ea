"""`make bench`: the garbage collector's throughput and peak memory at 10k and 100k objects.

    .venv/bin/python benchmarks/gc.py                              print the table
    .venv/bin/python benchmarks/gc.py --write docs/benchmarks.md   ... and update its GC section
    .venv/bin/python benchmarks/gc.py --quick                      smoke run (2k and 10k objects)
    .venv/bin/python benchmarks/gc.py --json                       results as JSON on stdout

The claim under test (docs/gc.md): the collector works a listing page at a time, so its memory
is bounded by a page, not by the bucket. Each size gets a table and bucket of its own on one
moto server, filled with referenced bodies and orphans of three kinds (a crashed create, a
crashed update, a version beyond retention). The collector then runs in a child process of
its own, configured from the environment as the Lambda is, so the peak RSS measured is the
collector's alone: not moto's, not the population's.

The pieces, in the order a run uses them:

* gc_process.py: the moto server (in this process) and the collector's child process;
* gc_dataset.py: the data set of referenced bodies and orphans, and populating a store;
* gc_measure.py: one size measured and checked, and the fixed cost of a collector process;
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
from benchmarks.gc_measure import measure_baseline, measure_size  # noqa: E402
from benchmarks.gc_process import InProcessServer  # noqa: E402
from benchmarks.report import Progress, stdout_console  # noqa: E402

FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (2_000, 10_000)


def run_metadata(args: argparse.Namespace, seconds: float, sizes: Sequence[int]) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "duration": f"{seconds:.0f} s",
        "sizes": list(sizes),
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
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    progress = Progress(Console(stderr=True))
    with InProcessServer() as server:
        progress(f"moto server on {server.endpoint} (in this process)")
        baseline = measure_baseline(server)
        progress(
            f"baseline: idle {baseline['idle']['peak_rss_mb']:.1f} MB, "
            f"empty bucket {baseline['empty']['peak_rss_mb']:.1f} MB"
        )
        results = [measure_size(server, n, args.orphans, progress) for n in sizes]
    meta = run_metadata(args, progress.elapsed, sizes)
    if args.json:
        print(json.dumps(gc_report.as_json(results, baseline, meta), indent=2))
    else:
        gc_report.print_report(stdout_console(width=160), results, baseline)
    if args.write:
        markdown = gc_report.markdown(results, baseline, meta)
        sections.write_section(args.write, gc_report.SECTION, markdown)
        progress(f"wrote the {gc_report.SECTION} section of {args.write}")
    failed = gc_report.problems(results)
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
