"""The GC benchmark's report: its tables (report.Grid, rendered by report.py for the terminal
and for the docs), the prose computed from the numbers, its section of docs/benchmarks.md and
its JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from vhs.item import CONDEMNATION_BYTES, MAX_CONDEMNED, MAX_CONDEMNED_HELD

from .gc_hot import BUDGET_SECONDS, DYNAMODB_ITEM_LIMIT, MARGIN, HotResult
from .gc_measure import SizeResult
from .report import Grid, markdown_table, print_grid, ratio

SECTION = "gc"  # its section of docs/benchmarks.md (sections.py)
FLAT = 1.10  # peak memory within 10% across sizes: flat
# Objects/s of the collection before issue 11 (an attribute per condemned body, a condemnation
# per orphan), by size: the committed run of 2026-11-22 06:00 UTC, same settings and data set.
BEFORE_ISSUE_11 = {10_000: 696, 100_000: 857}
BEFORE_ISSUE_11_DATE = "2026-11-22"
# The order requests are listed in: the order a collection makes them in.
OPERATIONS = ["ListObjectsV2", "HeadObject", "BatchGetItem", "UpdateItem", "DeleteObject"]


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


def by_operation(requests: dict[str, int]) -> list[tuple[str, int]]:
    """Requests by operation, in the order a collection makes them."""
    order = {name: n for n, name in enumerate(OPERATIONS)}
    return sorted(requests.items(), key=lambda item: (order.get(item[0], 99), item[0]))


def requests_text(requests: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {name}" for name, n in by_operation(requests))


def before_text(results: Sequence[SizeResult]) -> str:
    known = [r for r in results if r.objects in BEFORE_ISSUE_11]
    if not known:
        return ""
    parts = [f"{BEFORE_ISSUE_11[r.objects]:,} at {r.objects:,}" for r in known]
    return f" (before issue 11, run of {BEFORE_ISSUE_11_DATE}: {' and '.join(parts)})"


def throughput(results: Sequence[SizeResult]) -> str:
    """Where the collection's time goes, computed."""
    parts = [f"{r.objects_per_second:,.0f} objects/s at {r.objects:,}" for r in results]
    own = [f"{r.real['cpu_seconds'] / r.objects * 1e6:,.0f}" for r in results]
    large = results[-1]
    requests = large.real["requests"]
    condemnations, orphans = requests.get("UpdateItem", 0), large.orphans
    if condemnations < orphans:
        condemned = (
            f"fewer than the orphans: {condemnations:,} UpdateItem for {orphans:,} orphans "
            "(before issue 11, one per orphan)"
        )
    else:
        condemned = (
            f"so as many condemnations as orphans ({condemnations:,} UpdateItem for "
            f"{orphans:,} orphans), as before issue 11, when each orphan had one of its own"
        )
    return (
        f"**Throughput**: {' and '.join(parts)}{before_text(results)}, the collector's own "
        f"CPU {' and '.join(own)} µs per object. The rest of the wall time is moto's: at "
        f"{large.objects:,} objects its server spent {large.real['moto_cpu_seconds']:.0f} s of "
        f"CPU on the collection's requests against the collector's "
        f"{large.real['cpu_seconds']:.0f} s, part of it on listings that scan the whole bucket "
        "for every shard's prefix (S3 does not). The collection sent "
        f"{sum(requests.values()):,} requests: {requests_text(requests)}. Each id with "
        "orphans on a listing page costs one condemnation (UpdateItem) and each orphan a "
        "DeleteObject; a referenced object a share of one listing and one BatchGetItem. No id "
        f"in this data set has more than one orphan, {condemned}."
    )


def grid(results: Sequence[SizeResult]) -> Grid:
    rows = [
        [
            f"{r.objects:,}",
            f"{r.orphans:,}",
            f"{r.real['report']['deleted']:,}",
            f"{r.real['seconds']:.1f}",
            f"{r.objects_per_second:,.0f}",
            f"{BEFORE_ISSUE_11[r.objects]:,}" if r.objects in BEFORE_ISSUE_11 else "",
            f"{r.real['report']['deleted'] / r.real['seconds']:,.0f}",
            f"{sum(r.real['requests'].values()):,}",
            f"{r.real['cpu_seconds']:.1f}",
            f"{r.real['moto_cpu_seconds']:.1f}",
            f"{r.real['peak_rss_mb']:.1f}",
            f"{r.dry['traced_peak_mb']:.1f}",
        ]
        for r in results
    ]
    found = ratios(results)
    memory = [ratio(found["peak_rss"]), ratio(found["traced_peak"])]
    rows.append([f"ratio ({found['objects']:.0f}x objects)", *[""] * 9, *memory])
    return Grid(
        "garbage collection: throughput and peak memory",
        [
            "Objects",
            "Orphans",
            "Deleted",
            "Seconds",
            "Objects/s",
            "Objects/s before issue 11",
            "Deleted/s",
            "Requests",
            "Collector CPU (s)",
            "moto CPU (s)",
            "Peak RSS (MB)",
            "tracemalloc peak (MB)",
        ],
        rows,
        "Seconds: wall time of the collection. Before issue 11: the committed run of "
        f"{BEFORE_ISSUE_11_DATE} (a condemnation per orphan: on this data set the same "
        "requests), at another time on the same shared machine: seconds vary with its load, "
        "requests do not. Requests: the collection's, every operation. CPU: the collector "
        "process's, and the moto server's while it served it. tracemalloc: a dry run of the "
        "same objects.",
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


def hot_text(hot: HotResult) -> str:
    """What the hot id's numbers say, computed."""
    requests = hot.requests
    collected = "every one is collected" if hot.left == 0 else f"{hot.left:,} are left"
    largest = hot.largest_item
    passes = "one pass" if len(hot.passes) == 1 else f"{len(hot.passes)} passes"
    return (
        f"**A hot id** (issues 11 and 25): of {hot.orphans:,} orphans of one record id, beside "
        f"its current version, {collected} in {passes} of the collector "
        f"({MAX_CONDEMNED:,} more named a condemnation at most, `vhs.item.MAX_CONDEMNED`; the run "
        "renews it while the id has orphans and time), in "
        f"{hot.seconds:.1f} s of collection (the GC Lambda's budget: {BUDGET_SECONDS:.0f} s an "
        f"invocation) and {sum(requests.values()):,} requests: {requests_text(requests)}. While "
        f"condemned the item is at most {largest:,} bytes ({largest / DYNAMODB_ITEM_LIMIT:.1%} "
        f"of DynamoDB's 400 KB; {hot.item_before:,} bytes uncondemned; a condemnation holds at "
        f"most {MAX_CONDEMNED_HELD:,} names, `vhs.item.CONDEMNATION_BYTES` = "
        f"{CONDEMNATION_BYTES:,} bytes). Before issue 11 every condemned body was an attribute "
        "of the item: with 5,600 orphans it passed 400 KB, after which every condemnation and "
        "every put to the id failed; until issue 25 one run stopped at one condemnation and "
        "reported the other 4,600 as skipped, so the id took six scheduled runs."
    )


def hot_grid(hot: HotResult) -> Grid:
    operations = [name for name, _ in by_operation(hot.requests)]
    rows = []
    for each in hot.passes:
        report = each["report"]
        rows.append(
            [
                str(each["pass_number"]),
                f"{report['orphaned']:,}",
                f"{report['deleted']:,}",
                f"{each['orphans_left']:,}",
                f"{each['seconds']:.1f}",
                *[f"{each['requests'].get(name, 0):,}" for name in operations],
                f"{each['item_bytes']:,}",
                f"{each['condemned']:,}",
            ]
        )
    largest = hot.largest_item
    rows.append(
        [
            f"all {len(hot.passes)}",
            "",
            f"{hot.deleted:,}",
            f"{hot.left:,}",
            f"{hot.seconds:.1f}",
            *[f"{hot.requests[name]:,}" for name in operations],
            f"largest {largest:,} ({largest / DYNAMODB_ITEM_LIMIT:.1%} of 400 KB)",
            "",
        ]
    )
    return Grid(
        f"a hot id: {hot.orphans:,} orphans of one record",
        [
            "Pass",
            "Orphans found",
            "Deleted",
            "Orphans left",
            "Seconds",
            *operations,
            "Item after the pass (bytes)",
            "Bodies condemned",
        ],
        rows,
        "Each pass a collector process over the id's shard, its clock past the previous "
        "condemnation's expiry. Requests: the collector's, by operation. Item: its size as "
        "DynamoDB counts it, from a GetItem after the pass; bodies condemned: the standing "
        "condemnation's `gcs`.",
    )


def print_report(
    console: Console,
    results: Sequence[SizeResult],
    baseline: dict[str, Any],
    hot: HotResult | None,
) -> None:
    """The tables and the prose, for the terminal."""
    if results:
        print_grid(console, grid(results))
        print_grid(console, baseline_grid(baseline))
        console.print(verdict(results, baseline).replace("**", ""))
        console.print(throughput(results).replace("**", ""))
    if hot is not None:
        print_grid(console, hot_grid(hot))
        console.print(hot_text(hot).replace("**", ""))


def as_json(
    results: Sequence[SizeResult],
    baseline: dict[str, Any],
    meta: dict[str, Any],
    hot: HotResult | None,
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
                "objects_per_second_before_issue_11": BEFORE_ISSUE_11.get(r.objects),
                "collect": r.real,
                "dry_run_traced": r.dry,
                "problems": r.problems,
            }
            for r in results
        ],
        "ratios": ratios(results) if results else {},
        "flat": is_flat(results) if results else None,
        "hot": hot.as_dict() if hot is not None else None,
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

_HOT_METHOD = """\
**Method (hot id).** A table and a bucket of their own on the same moto server: the id's \
current version written with `store.put`, and {orphans:,} bodies of the same id that no \
version references (a dying writer's uploads, catalogue records of about 250 bytes) put \
straight into moto's S3 backend. Each pass is a collector process of its own, built as above \
(grace 0), over the id's shard only; the first pass's clock is 2 hours ahead, and each next \
one's is a minute past the previous condemnation's expiry (the lease plus \
`collector.marker_expiry`: {expiry:.0f} s later), as the next scheduled run would be. Passes \
go on until only the current version's body is left. Seconds are the sum of the passes' \
`GarbageCollector.run()`; requests are counted in the collector process, per operation and \
attempt (`vhs.local.metering.RequestMeter`); the item's size is read with a strongly \
consistent GetItem after every pass (within a pass a condemnation only grows, and the next \
pass clears it before it condemns again) and counted as DynamoDB counts it: attribute names \
and values. Checked: nothing failed, every orphan was deleted, the current version reads \
back."""


def markdown(
    results: Sequence[SizeResult],
    baseline: dict[str, Any],
    meta: dict[str, Any],
    hot: HotResult,
) -> str:
    """The body of the GC section of docs/benchmarks.md."""
    expiry = hot.passes[0]["expiry"] if hot.passes else 0.0
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
        hot_text(hot),
        markdown_table(hot_grid(hot)),
        _HOT_METHOD.format(orphans=hot.orphans, expiry=expiry + MARGIN),
        "    .venv/bin/python benchmarks/gc.py --write docs/benchmarks.md   # this section\n"
        "    .venv/bin/python benchmarks/gc.py --quick                      # smoke run\n"
        f"    .venv/bin/python benchmarks/gc.py --hot-only --hot {hot.orphans:<12}"
        "# the hot id alone\n"
        "    .venv/bin/python benchmarks/gc.py --json                       # results as JSON",
    ]
    failed = problems(results, hot)
    if failed:
        parts.insert(3, "**Checks failed:** " + "; ".join(failed))
    return "\n\n".join(parts)


def problems(results: Sequence[SizeResult], hot: HotResult | None) -> list[str]:
    """Every check that failed, at every size and for the hot id."""
    return [p for r in results for p in r.problems] + (hot.problems if hot else [])
