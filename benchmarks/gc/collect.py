"""docs/benchmarks.md, "Garbage collection: throughput and memory", and a hot id."""

from __future__ import annotations

import argparse
import gc
import random
from collections import Counter
from typing import Any

from vhs import shapes
from vhs.index.codec import (
    CONDEMNATION_BYTES,
    ITEM_LIMIT,
    MAX_CONDEMNED,
    MAX_CONDEMNED_HELD,
    condemnation_of,
)
from vhs.index.size import item_size
from vhs.keys import shard_of
from vhs.maintenance.gc import RESERVE_MS
from vhs_ops.local.stack import client

from .. import workload
from ..common import Progress, Report, run_line, table
from ..systems import new_store
from .child import CLOCK_AHEAD, InProcessServer, collect
from .dataset import ORPHAN_SHARE, Dataset, Record, bodies, build, populate, seed_objects

OPTIONS = {
    "--sizes": (str, "10000,100000", "2000,10000", "object counts, comma-separated"),
    "--orphans": (float, ORPHAN_SHARE, ORPHAN_SHARE, "orphans' share"),
    "--hot": (int, 5_600, 1_500, "orphans of the hot id (0: none)"),
    "--hot-only": (bool, False, False, "the hot id alone"),
}
HOT_ID = "b9999999-hot"
MARGIN = 60.0  # how far past a condemnation's expiry the next pass's clock is
SPARE_PASSES = 3
BUDGET_SECONDS = shapes.GC.function_timeout_seconds - RESERVE_MS / 1000  # one invocation


def new_collectable_store(server: InProcessServer, name: str) -> tuple[Any, Any]:
    dynamodb = client("dynamodb", server.endpoint)
    # inline_threshold 0: every body goes to S3, so there is something to collect.
    return new_store(client("s3", server.endpoint), dynamodb, name, inline_threshold=0), dynamodb


def measure_size(server: InProcessServer, objects: int, share: float, progress: Progress) -> dict:
    """A store of `objects`: a dry run under tracemalloc, then the collection, untraced."""
    dataset = build(objects, share)
    name = f"vhs-gc-{objects}"
    store, dynamodb = new_collectable_store(server, name)
    seconds = populate(dataset, store, dynamodb)
    gc.collect()
    gc.freeze()  # moto's objects live in this process: keep the cycle collector off them
    progress(f"{objects:,} objects: populated in {seconds:.1f}s; a dry run under tracemalloc")
    dry = collect(server.endpoint, name, "dry-run", trace=True)
    problems = [f"dry run: {p}" for p in check_report(dataset, dry["report"], dry_run=True)]
    real = collect(server.endpoint, name, "collect")
    progress(f"{objects:,} objects: collected in {real['seconds']:.1f}s")
    problems += check_report(dataset, real["report"], dry_run=False)
    problems += check_after(dataset, store)
    gc.unfreeze()
    InProcessServer.drop_store(name, dynamodb)
    return {"objects": objects, "orphans": dataset.orphans, "kinds": dataset.kinds, "dry": dry,
            "real": real, "problems": problems}  # fmt: skip


def check_report(dataset: Dataset, found: dict[str, Any], *, dry_run: bool) -> list[str]:
    expected = {
        "listed": dataset.objects,
        "referenced": dataset.referenced,
        "orphaned": dataset.orphans,
        "deleted": 0 if dry_run else dataset.orphans,
        "bytes_reclaimed": dataset.orphan_bytes,
        "skipped": 0,
        "young": 0,
        "unrecognised": 0,
    }
    return [f"{k}: {found[k]}, expected {v}" for k, v in expected.items() if found[k] != v]


def check_after(dataset: Dataset, store: Any) -> list[str]:
    """What is left is exactly the referenced objects, and a sample of versions reads back."""
    problems = []
    left = set(InProcessServer.s3_backend().get_bucket(store.bucket_name).keys.keys())
    keep = dataset.referenced_keys(store.body_key)
    if left != keep:
        problems.append(f"{len(left - keep)} objects left, {len(keep - left)} missing")
    sample = random.Random(workload.SEED).sample(dataset.records, min(100, len(dataset.records)))
    for record in sample + [r for r in dataset.records if r.via_api][:20]:
        for version in range(record.expired + 1, len(record.bodies) + 1):
            if store.get(record.id, version).body != record.bodies[version - 1].data:
                problems.append(f"{record.id} version {version} reads back wrong")
    return problems


def measure_baseline(server: InProcessServer) -> dict[str, Any]:
    """The fixed cost of a collector process: idle, and over an empty bucket."""
    new_collectable_store(server, "vhs-gc-empty")
    return {
        "idle": collect(server.endpoint, "vhs-gc-empty", "idle"),
        "empty": collect(server.endpoint, "vhs-gc-empty", "collect"),
        "empty_dry": collect(server.endpoint, "vhs-gc-empty", "dry-run", trace=True),
    }


def measure_hot_id(server: InProcessServer, orphans: int, progress: Progress) -> dict[str, Any]:
    """One id's current version and `orphans` orphans of it, collected pass after pass (each
    clock past the previous condemnation's expiry) until none is left."""
    store, dynamodb = new_collectable_store(server, "vhs-gc-hot")
    current, *crashed = bodies(HOT_ID, range(1, orphans + 2))
    record = Record(HOT_ID, [], crashed=crashed)
    store.put(HOT_ID, current.data, updated_at=record.stamp(1), content_type=current.content_type)
    seed_objects([record], store)
    keep = {store.body_key(HOT_ID, current.sha256)}
    bucket = InProcessServer.s3_backend().get_bucket("vhs-gc-hot")

    def item() -> dict[str, Any]:
        key = {"id": {"S": HOT_ID}}
        return dynamodb.get_item(TableName="vhs-gc-hot", Key=key, ConsistentRead=True)["Item"]

    hot: dict[str, Any] = {"orphans": orphans, "item_before": item_size(item()), "passes": []}
    ahead, problems = CLOCK_AHEAD, []
    for number in range(1, SPARE_PASSES + 2):
        done = collect(server.endpoint, "vhs-gc-hot", "collect", shards=[shard_of(HOT_ID)],
                       clock_ahead=ahead)  # fmt: skip
        standing = condemnation_of(raw := item())
        left = set(bucket.keys.keys()) - keep
        condemned = len(standing.bodies) if standing else 0
        done |= {"item_bytes": item_size(raw), "condemned": condemned, "left": len(left)}
        hot["passes"].append(done)
        progress(f"hot id: pass {number} deleted {done['report']['deleted']:,}, {len(left):,} left")
        if done["report"]["failed"] or done["report"]["failed_shards"]:
            problems.append(f"hot id: pass {number} failed: {done['report']}")
        if not left:
            break
        ahead += done["expiry"] + MARGIN
    passes = hot["passes"]
    hot["requests"] = sum((Counter(p["requests"]) for p in passes), Counter())
    hot["seconds"] = sum(p["seconds"] for p in passes)
    hot["deleted"] = sum(p["report"]["deleted"] for p in passes)
    hot["largest_item"] = max((p["item_bytes"] for p in passes if p["condemned"]), default=0)
    if len(passes) != 1 or passes[0]["left"]:
        problems.append(f"hot id: {len(passes)} passes, not one, collected it")
    if passes[0]["seconds"] > BUDGET_SECONDS:
        problems.append(f"hot id: one pass took {passes[0]['seconds']:.0f} s, over the budget")
    if hot["deleted"] != orphans or hot["largest_item"] >= ITEM_LIMIT:
        problems.append(f"hot id: deleted {hot['deleted']}, item {hot['largest_item']:,} bytes")
    if store.get(HOT_ID).body != current.data:
        problems.append("hot id: its current version reads back wrong")
    hot["problems"] = problems
    InProcessServer.drop_store("vhs-gc-hot", dynamodb)
    return hot


FLAT = 1.10  # peak memory within 10% across sizes: flat
# Objects/s before (docs/benchmarks.md): the committed run of 2026-11-22 06:00 UTC.
BEFORE = {10_000: 696, 100_000: 857}
OPERATIONS = ["ListObjectsV2", "HeadObject", "BatchGetItem", "UpdateItem", "DeleteObject"]


def operations(*requests: dict[str, int]) -> list[str]:
    """The operations in `requests`, in the order a collection makes them."""
    found = {name for r in requests for name in r}
    return sorted(found, key=lambda n: (OPERATIONS.index(n) if n in OPERATIONS else 99, n))


def sizes_figures(results: list[dict[str, Any]], baseline: dict[str, Any], run: str) -> str:
    rows = []
    for r in results:
        real, deleted = r["real"], r["real"]["report"]["deleted"]
        rows.append([
            f"{r['objects']:,}", f"{r['orphans']:,}", f"{deleted:,}", f"{real['seconds']:.1f}",
            f"{r['objects'] / real['seconds']:,.0f}", f"{BEFORE.get(r['objects'], '')}",
            f"{deleted / real['seconds']:,.0f}", f"{sum(real['requests'].values()):,}",
            f"{real['cpu_seconds'] / r['objects'] * 1e6:,.0f}", f"{real['cpu_seconds']:.1f}",
            f"{real['moto_cpu_seconds']:.1f}", f"{real['peak_rss_mb']:.1f}",
            f"{r['dry']['traced_peak_mb']:.1f}",
        ])  # fmt: skip
    small, large = results[0], results[-1]
    rss = large["real"]["peak_rss_mb"] / small["real"]["peak_rss_mb"]
    traced = large["dry"]["traced_peak_mb"] / small["dry"]["traced_peak_mb"]
    rows.append([f"ratio ({large['objects'] / small['objects']:.0f}x objects)", *[""] * 10,
                 f"{rss:.2f}x", f"{traced:.2f}x"])  # fmt: skip
    headers = ["Objects", "Orphans", "Deleted", "Seconds", "Objects/s", "Objects/s before",
               "Deleted/s", "Requests", "Collector CPU µs/object", "Collector CPU (s)",
               "moto CPU (s)", "Peak RSS (MB)", "tracemalloc peak (MB)"]  # fmt: skip
    names = operations(*(r["real"]["requests"] for r in results))
    by_operation = [[f"{r['objects']:,}", *(f"{r['real']['requests'].get(n, 0):,}" for n in names)]
                    for r in results]  # fmt: skip
    fixed = [
        ["idle: Python, vhs and botocore imported, S3 and DynamoDB clients built",
         f"{baseline['idle']['peak_rss_mb']:.1f}", ""],
        ["collecting an empty bucket (256 shard listings)",
         f"{baseline['empty']['peak_rss_mb']:.1f}",
         f"{baseline['empty_dry']['traced_peak_mb']:.1f}"],
    ]  # fmt: skip
    per_page = [f"{r['objects'] / 256:,.0f} at {r['objects']:,}" for r in (small, large)]
    verdict = "flat" if rss <= FLAT else "NOT flat"
    return "\n\n".join([
        run,
        f"**Peak RSS {verdict}** (flat: within {FLAT - 1:.0%}): {rss:.2f}x with "
        f"{large['objects'] / small['objects']:.0f}x the objects. Objects per shard's listing "
        f"page: about {' and '.join(per_page)}.",
        table(headers, rows, right=1),
        "Requests of each collection, by operation:",
        table(["Objects", *names], by_operation, right=1),
        table(["Process", "Peak RSS (MB)", "tracemalloc peak (MB)"], fixed),
    ])  # fmt: skip


def hot_figures(hot: dict[str, Any]) -> str:
    names = operations(hot["requests"])
    rows = [
        [str(n), f"{p['report']['orphaned']:,}", f"{p['report']['deleted']:,}", f"{p['left']:,}",
         f"{p['seconds']:.1f}", *(f"{p['requests'].get(k, 0):,}" for k in names),
         f"{p['item_bytes']:,}", f"{p['condemned']:,}"]
        for n, p in enumerate(hot["passes"], start=1)
    ]  # fmt: skip
    largest = hot["largest_item"]
    rows.append([f"all {len(hot['passes'])}", "", f"{hot['deleted']:,}", "",
                 f"{hot['seconds']:.1f}", *(f"{hot['requests'][k]:,}" for k in names),
                 f"largest {largest:,} ({largest / ITEM_LIMIT:.1%} of 400 KB)", ""])  # fmt: skip
    headers = ["Pass", "Orphans found", "Deleted", "Orphans left", "Seconds", *names,
               "Item after the pass (bytes)", "Bodies condemned"]  # fmt: skip
    expiry = hot["passes"][0]["expiry"] + MARGIN
    return "\n\n".join([
        f"{hot['orphans']:,} orphans of one id; the GC Lambda's budget {BUDGET_SECONDS:.0f} s an "
        f"invocation; item uncondemned {hot['item_before']:,} bytes; a condemnation names "
        f"{MAX_CONDEMNED:,} more bodies at a time (`vhs.index.codec.MAX_CONDEMNED`) and holds "
        f"at most {MAX_CONDEMNED_HELD:,} (`vhs.index.codec.CONDEMNATION_BYTES` = "
        f"{CONDEMNATION_BYTES:,} "
        f"bytes); a next pass would come {expiry:.0f} s after a condemnation.",
        table(headers, rows, right=1),
    ])  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    sizes = [] if options.hot_only else [int(s) for s in options.sizes.split(",")]
    results, baseline, hot = [], {}, None
    with InProcessServer() as server:
        if sizes:
            baseline = measure_baseline(server)
        results = [measure_size(server, n, options.orphans, progress) for n in sizes]
        if options.hot:
            hot = measure_hot_id(server, options.hot, progress)
    problems = [p for r in results for p in r["problems"]] + (hot["problems"] if hot else [])
    mode = "quick" if args.quick else "full"
    sections = {}
    if results:
        sections["gc"] = sizes_figures(results, baseline, run_line(mode, progress.elapsed))
    if hot:
        sections["gc.hot"] = hot_figures(hot)
    data = {"sizes": results, "baseline": baseline, "hot": hot}
    return Report(sections, data, problems=problems)
