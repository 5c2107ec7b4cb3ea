"""The GC benchmark's report: its tables (report.Grid, rendered by report.py for the terminal
and for the docs), the prose computed from the numbers, its section of docs/benchmarks.md and
its JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from .gc_measure import SizeResult
from .report import Grid, markdown_table, print_grid, ratio

SECTION = "gc"  # its section of docs/benchmarks.md (sections.py)
FLAT = 1.10  # peak memory within 10% across sizes: flat


def ratios(results: Sequence[SizeResult]) -> dict[str, float]:
    small, large = results[0], results[-1]
    return {
        "objects": large.objects / small.objects,
        "peak_rss": large.real["peak_rss_mb"] / small.real["peak_rss_mb"],
        "traced_peak": large.dry["traced_peak_mb"] / small.dry["traced_peak_mb"],
    }


def is_flat(results: Sequence[SizeResult]) -> bool:
    return ratios(results)["peak_rss"] <= FLAT


def verdict(results: Sequence[SizeResult], baseline: dict[str, Any]) -> str:
    """What the numbers say about the claim, computed from them."""
    small, large = results[0], results[-1]
    found = ratios(results)
    idle = baseline["idle"]["peak_rss_mb"]
    per_shard = [r.objects / 256 for r in (small, large)]
    text = (
        f"**Peak memory {'stays flat' if is_flat(results) else 'grows'}** "
        f"(flat: within {FLAT - 1:.0%}). With {found['objects']:.0f}x the objects "
        f"({small.objects:,} to {large.objects:,}), the collector process's peak RSS goes from "
        f"{small.real['peak_rss_mb']:.1f} to {large.real['peak_rss_mb']:.1f} MB "
        f"({ratio(found['peak_rss'])}); {idle:.1f} MB of it is the fixed cost of the process "
        "(Python, vhs and botocore imported, the S3 and DynamoDB clients built). What the "
        "collector allocates while it runs (tracemalloc) peaks at "
        f"{small.dry['traced_peak_mb']:.1f} and {large.dry['traced_peak_mb']:.1f} MB "
        f"({ratio(found['traced_peak'])}): it holds one listing page and the items of that "
        "page's ids, and a shard's page holds about "
        f"{per_shard[0]:,.0f} objects at {small.objects:,} and {per_shard[1]:,.0f} at "
        f"{large.objects:,}."
    )
    if per_shard[1] < 1000:
        text += (
            " No page holds more than 1,000 objects, so that part stops growing at about "
            "256,000 objects (1,000 per shard), however large the bucket."
        )
    else:
        text += " Pages are full at the larger size: beyond it, that part cannot grow."
    return text


def throughput(results: Sequence[SizeResult]) -> str:
    """Where the collection's time goes, computed."""
    parts = [f"{r.objects_per_second:,.0f} objects/s at {r.objects:,}" for r in results]
    own = [f"{r.real['cpu_seconds'] / r.objects * 1e6:,.0f}" for r in results]
    large = results[-1]
    return (
        f"**Throughput**: {' and '.join(parts)}, the collector's own CPU "
        f"{' and '.join(own)} µs per object. The rest of the wall time is moto's: at "
        f"{large.objects:,} objects its server spent {large.real['moto_cpu_seconds']:.0f} s of "
        f"CPU on the collection's requests against the collector's "
        f"{large.real['cpu_seconds']:.0f} s, part of it on listings that scan the whole bucket "
        "for every shard's prefix (S3 does not). Each orphan costs two requests, the "
        "condemnation (UpdateItem) and the DeleteObject; a referenced object a share of one "
        "listing and one BatchGetItem."
    )


def grid(results: Sequence[SizeResult]) -> Grid:
    rows = [
        [
            f"{r.objects:,}",
            f"{r.orphans:,}",
            f"{r.real['report']['deleted']:,}",
            f"{r.real['seconds']:.1f}",
            f"{r.objects_per_second:,.0f}",
            f"{r.real['report']['deleted'] / r.real['seconds']:,.0f}",
            f"{r.real['cpu_seconds']:.1f}",
            f"{r.real['moto_cpu_seconds']:.1f}",
            f"{r.real['peak_rss_mb']:.1f}",
            f"{r.dry['traced_peak_mb']:.1f}",
        ]
        for r in results
    ]
    found = ratios(results)
    memory = [ratio(found["peak_rss"]), ratio(found["traced_peak"])]
    rows.append([f"ratio ({found['objects']:.0f}x objects)", *[""] * 7, *memory])
    return Grid(
        "garbage collection: throughput and peak memory",
        [
            "Objects",
            "Orphans",
            "Deleted",
            "Seconds",
            "Objects/s",
            "Deleted/s",
            "Collector CPU (s)",
            "moto CPU (s)",
            "Peak RSS (MB)",
            "tracemalloc peak (MB)",
        ],
        rows,
        "Seconds: wall time of the collection. CPU: the collector process's, and the moto "
        "server's while it served it. tracemalloc: a dry run of the same objects.",
    )


def baseline_grid(baseline: dict[str, Any]) -> Grid:
    return Grid(
        "the fixed cost of a collector process",
        ["Process", "Peak RSS (MB)", "tracemalloc peak (MB)"],
        [
            [
                "idle: Python, vhs and botocore imported, S3 and DynamoDB clients built",
                f"{baseline['idle']['peak_rss_mb']:.1f}",
                "",
            ],
            [
                "collecting an empty bucket (256 shard listings)",
                f"{baseline['empty']['peak_rss_mb']:.1f}",
                f"{baseline['empty_dry']['traced_peak_mb']:.1f}",
            ],
        ],
    )


def print_report(console: Console, results: Sequence[SizeResult], baseline: dict[str, Any]) -> None:
    """The tables and the prose, for the terminal."""
    print_grid(console, grid(results))
    print_grid(console, baseline_grid(baseline))
    console.print(verdict(results, baseline).replace("**", ""))
    console.print(throughput(results).replace("**", ""))


def as_json(
    results: Sequence[SizeResult], baseline: dict[str, Any], meta: dict[str, Any]
) -> dict[str, Any]:
    return {
        "meta": meta,
        "baseline": baseline,
        "sizes": [
            {
                "objects": r.objects,
                "orphans": r.orphans,
                "orphan_kinds": r.kinds,
                "populate_seconds": r.populate,
                "objects_per_second": r.objects_per_second,
                "collect": r.real,
                "dry_run_traced": r.dry,
                "problems": r.problems,
            }
            for r in results
        ],
        "ratios": ratios(results),
        "flat": is_flat(results),
    }


_METHOD = """\
**Method.** One moto server (the local stack's: moto with atomic DynamoDB requests) holds a \
table and a bucket per size, filled with small catalogue records of about {body_size} bytes, \
every body in S3: records of 1 to 3 versions, and {share:.0%} orphans of three kinds (bodies \
of creates and of updates whose writer died between its upload and its index write, and \
versions beyond the default retention of 5 earlier versions). Orphans are few because a \
collector that runs on a schedule finds only what fell out of retention or crashed since its \
last run, and each costs two requests in sequence, so a larger share would mostly measure \
moto's request rate (`--orphans` sets it). About {api} objects per size \
are written through the store's API (`store.put`, and a dying writer's `store.bodies.put`); \
the rest are the same objects put straight into moto's S3 backend (the server runs in the \
benchmark's process) and the same items, in the store's format, written with BatchWriteItem: \
over HTTP moto spends about 3 ms of CPU on each PutObject, so uploading 100k objects would \
take longer than the whole benchmark may. The collector runs in a child process of its own, \
built from the environment as the Lambda builds it (`VersionedHybridStore.from_env()`, \
botocore clients, default settings; grace 0 and its clock 2 hours ahead), over all 256 \
shards, first as a dry run under tracemalloc (which slows it), then for real, untraced. \
Seconds are the wall time of `GarbageCollector.run()`; peak RSS is the child's high-water \
mark (VmHWM: interpreter, imports and clients included); tracemalloc counts Python's \
allocations during the dry run's `run()`, which lists and reads every page as the real run \
does but sends no condemnations or deletes. Both runs are checked: the reports' counts \
(deleted = orphans, referenced = the rest, bytes, nothing skipped), the objects left \
afterwards (exactly the referenced ones) and reads of a sample of retained versions. \
The collector sends its requests one after another, as `vhs gc` does (the Lambda can fan \
shards out over invocations), to a moto server that is one Python process on a shared \
machine: the throughput is moto's more than the collector's or S3's."""


def markdown(results: Sequence[SizeResult], baseline: dict[str, Any], meta: dict[str, Any]) -> str:
    """The body of the GC section of docs/benchmarks.md."""
    parts = [
        "## Garbage collection: throughput and memory",
        "Generated by `benchmarks/gc.py --write docs/benchmarks.md` (part of `make bench`), "
        f"which rewrites only this section. Run: {meta['date']}, {meta['mode']} mode, "
        f"{meta['duration']}; {meta['environment']}, {meta['cpus']} cores shared with other "
        "work.",
        verdict(results, baseline),
        markdown_table(grid(results)),
        throughput(results),
        markdown_table(baseline_grid(baseline)),
        _METHOD.format(
            body_size=meta["body_size"], share=meta["orphan_share"], api=meta["api_objects"]
        ),
        "    .venv/bin/python benchmarks/gc.py --write docs/benchmarks.md   # this section\n"
        "    .venv/bin/python benchmarks/gc.py --quick                      # smoke run\n"
        "    .venv/bin/python benchmarks/gc.py --json                       # results as JSON",
    ]
    failed = problems(results)
    if failed:
        parts.insert(3, "**Checks failed:** " + "; ".join(failed))
    return "\n\n".join(parts)


def problems(results: Sequence[SizeResult]) -> list[str]:
    """Every check that failed, at every size."""
    return [p for r in results for p in r.problems]
