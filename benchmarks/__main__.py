"""`python -m benchmarks NAME [--quick] [--json] [--write PATH] [options]`: run one benchmark
(`all`: every one that `make bench` runs, each in a process of its own)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

from benchmarks.common import ROOT, Progress, write_sections

BENCHMARKS = {
    "store": "benchmarks.store",
    "pipeline": "benchmarks.pipeline",
    "gc": "benchmarks.gc.collect",
    "ingest-budget": "benchmarks.ingest_budget",
    "hot-keys": "benchmarks.hot_keys",
    "read-api": "benchmarks.read_api",
    "reindex": "benchmarks.reindex",
    "bulk-import": "benchmarks.bulk_import",
    "import-reading": "benchmarks.import_reading",
    "parts": "benchmarks.parts",
    "time-travel": "benchmarks.time_travel",
    "item-layout": "benchmarks.item_layout",
    "volume": "benchmarks.volume",
    "real-data": "benchmarks.real_data",
    "atomicity": "benchmarks.atomicity",
}
ALL = [name for name in BENCHMARKS if name != "atomicity"]  # atomicity: figures for a report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:  # a measured child process: benchmarks.common.run_child
        module = importlib.import_module(argv[1])
        print(json.dumps(module.child(*argv[2:])))
        return 0
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--write", metavar="PATH", help="rewrite its figures in PATH")
    common.add_argument("--json", action="store_true", help="print the results as JSON")
    common.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    top = argparse.ArgumentParser("python -m benchmarks", description=__doc__, add_help=False,
                                  parents=[common])  # fmt: skip
    top.add_argument("name", nargs="?", choices=[*BENCHMARKS, "all"])
    top.add_argument("-h", "--help", action="store_true", help="this help, or NAME's")
    args, rest = top.parse_known_args(argv)
    module = importlib.import_module(BENCHMARKS[args.name]) if args.name in BENCHMARKS else None
    options = argparse.ArgumentParser(f"python -m benchmarks {args.name}", parents=[common])
    # A benchmark's OPTIONS: {flag: (type, default, default with --quick, help)}.
    for flag, (kind, full, quick, text) in getattr(module, "OPTIONS", {}).items():
        if kind is bool:
            options.add_argument(flag, action="store_true", help=text)
        else:
            text += f" (default {full}; quick: {quick})"
            options.add_argument(flag, type=kind, default=quick if args.quick else full, help=text)
    if args.help or not args.name:
        (options if module else top).print_help()
        return 0 if args.help else 2
    if args.name == "all":
        flags = [arg for arg in argv if arg != "all"]
        command = [sys.executable, "-m", "benchmarks"]
        failed = [n for n in ALL if subprocess.run([*command, n, *flags], cwd=ROOT).returncode]
        print(f"failed: {', '.join(failed)}" if failed else "all done", file=sys.stderr)
        return 1 if failed else 0
    progress = Progress()
    report = module.run(args, options.parse_args(rest), progress)
    if args.json:
        print(json.dumps(report.data, default=lambda v: getattr(v, "__dict__", str(v)), indent=2))
    else:
        print("\n\n".join(report.sections.values()))
    if args.write:
        write_sections(args.write, report.sections)
        progress(f"wrote {', '.join(report.sections)} in {args.write}")
    for problem in report.problems:
        progress(f"check failed: {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip tearing down moto's in-memory state object by object (15 s at 100k objects).
    os._exit(code)
