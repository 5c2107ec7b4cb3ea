"""The garbage collector's throughput and peak memory at 10k and 100k objects, and a hot id
with 5,600 orphans collected in one pass (method: docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import gc
import random
from collections import Counter
from typing import Any

from vhs import resources
from vhs.item import ITEM_LIMIT, condemnation_of, item_size
from vhs.keys import shard_of
from vhs.local.stack import client
from vhs.maintenance.gc import RESERVE_MS
from vhs.store import VersionedHybridStore

from ..common import Progress, Report, run_line
from . import report
from .child import CLOCK_AHEAD, REGION, InProcessServer, collect
from .dataset import ORPHAN_SHARE, SEED, Dataset, Record, bodies, build, populate, seed_objects

SIZES = {False: (10_000, 100_000), True: (2_000, 10_000)}  # by --quick
HOT_ORPHANS = {False: 5_600, True: 1_500}
HOT_ID = "b9999999-hot"
MARGIN = 60.0  # how far past a condemnation's expiry the next pass's clock is
SPARE_PASSES = 3
BUDGET_SECONDS = resources.GC.function_timeout_seconds - RESERVE_MS / 1000  # one invocation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", help="object counts, comma-separated")
    parser.add_argument("--orphans", type=float, default=ORPHAN_SHARE, help="orphans' share")
    parser.add_argument("--hot", type=int, metavar="N", help="orphans of the hot id (0: none)")
    parser.add_argument("--hot-only", action="store_true", help="the hot id alone")


def new_store(server: InProcessServer, name: str) -> tuple[Any, Any]:
    dynamodb, s3 = client("dynamodb", server.endpoint), client("s3", server.endpoint)
    resources.create_store_resources(dynamodb, s3, table_name=name, bucket_name=name, region=REGION)
    # inline_threshold 0: every body goes to S3, so there is something to collect.
    kw = {"s3_client": s3, "dynamodb_client": dynamodb, "inline_threshold": 0}
    return VersionedHybridStore(name, name, **kw), dynamodb


def drop(name: str, dynamodb: Any) -> None:
    InProcessServer.drop_bucket(name)
    dynamodb.delete_table(TableName=name)


def measure_size(server: InProcessServer, objects: int, share: float, progress: Progress) -> dict:
    """A store of `objects`: a dry run under tracemalloc, then the collection, untraced."""
    dataset = build(objects, share)
    name = f"vhs-gc-{objects}"
    store, dynamodb = new_store(server, name)
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
    drop(name, dynamodb)
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
    """The objects left are exactly the referenced ones, and a sample of retained versions
    reads back."""
    problems = []
    left = set(InProcessServer.s3_backend().get_bucket(store.bucket_name).keys.keys())
    keep = dataset.referenced_keys(store.body_key)
    if left != keep:
        problems.append(f"{len(left - keep)} objects left, {len(keep - left)} missing")
    sample = random.Random(SEED).sample(dataset.records, min(100, len(dataset.records)))
    for record in sample + [r for r in dataset.records if r.via_api][:20]:
        for version in range(record.expired + 1, len(record.bodies) + 1):
            if store.get(record.id, version).body != record.bodies[version - 1].data:
                problems.append(f"{record.id} version {version} reads back wrong")
    return problems


def measure_baseline(server: InProcessServer) -> dict[str, Any]:
    """The fixed cost of a collector process: idle, and over an empty bucket."""
    new_store(server, "vhs-gc-empty")
    return {
        "idle": collect(server.endpoint, "vhs-gc-empty", "idle"),
        "empty": collect(server.endpoint, "vhs-gc-empty", "collect"),
        "empty_dry": collect(server.endpoint, "vhs-gc-empty", "dry-run", trace=True),
    }


def measure_hot_id(server: InProcessServer, orphans: int, progress: Progress) -> dict[str, Any]:
    """One id's current version and `orphans` bodies of it that no version references,
    collected pass after pass (each a process whose clock is past the previous
    condemnation's expiry, as the next scheduled run's would be) until none is left."""
    store, dynamodb = new_store(server, "vhs-gc-hot")
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
    drop("vhs-gc-hot", dynamodb)
    return hot


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    sizes = [int(s) for s in options.sizes.split(",")] if options.sizes else SIZES[args.quick]
    sizes = [] if options.hot_only else sizes
    orphans = HOT_ORPHANS[args.quick] if options.hot is None else options.hot
    results, baseline, hot = [], {}, None
    with InProcessServer() as server:
        if sizes:
            baseline = measure_baseline(server)
        results = [measure_size(server, n, options.orphans, progress) for n in sizes]
        if orphans:
            hot = measure_hot_id(server, orphans, progress)
    problems = [p for r in results for p in r["problems"]] + (hot["problems"] if hot else [])
    mode = "quick" if args.quick else "full"
    sections = {}
    if results:
        sections["gc"] = report.sizes(results, baseline, run_line(mode, progress.elapsed))
    if hot:
        sections["gc.hot"] = report.hot_id(hot, BUDGET_SECONDS)
    data = {"sizes": results, "baseline": baseline, "hot": hot}
    return Report(sections, data, problems=problems)
