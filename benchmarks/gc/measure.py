"""The GC benchmark's measurements: per size, a store filled with a data set, a dry run of the
collector under tracemalloc and the collection itself, each checked against the data set
(`measure_size`); and the fixed cost of a collector process (`measure_baseline`)."""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass
from typing import Any

from vhs import resources
from vhs.local.stack import client
from vhs.store import VersionedHybridStore

from .gc_dataset import SEED, Dataset, build_dataset, populate
from .gc_process import REGION, InProcessServer, run_child
from .report import Progress


@dataclass
class SizeResult:
    objects: int
    orphans: int
    kinds: dict[str, int]
    populate: dict[str, float]
    dry: dict[str, Any]  # a dry run under tracemalloc: Python's allocations, peak RSS
    real: dict[str, Any]  # the collection itself, untraced: wall time and peak RSS
    problems: list[str]

    @property
    def objects_per_second(self) -> float:
        return self.objects / self.real["seconds"]


def label(objects: int) -> str:
    return f"{objects // 1000}k" if objects % 1000 == 0 else str(objects)


def measure_size(
    server: InProcessServer, objects: int, orphan_share: float, progress: Progress
) -> SizeResult:
    dynamodb, s3 = client("dynamodb", server.endpoint), client("s3", server.endpoint)
    progress(f"{objects:,} objects: building the data set")
    dataset = build_dataset(objects, orphan_share)
    name = f"vhs-gc-{label(objects).lower()}"
    resources.create_store_resources(dynamodb, s3, table_name=name, bucket_name=name, region=REGION)
    # inline_threshold 0: every body goes to S3, so there is something to collect.
    store = VersionedHybridStore(
        name, name, s3_client=s3, dynamodb_client=dynamodb, inline_threshold=0
    )
    populated = populate(dataset, store, dynamodb)
    # moto's objects live in this process: keep Python's cycle collector off them while the
    # server answers the collector.
    gc.collect()
    gc.freeze()
    progress(
        f"{objects:,} objects: populated in {sum(populated.values()):.1f}s "
        f"({populated['api_seconds']:.1f}s through the API); dry run under tracemalloc"
    )
    # A dry run lists and reads every page as the collection does, but condemns and deletes
    # nothing, so the collection that follows sees the same objects. tracemalloc slows the
    # process it watches, so the collection's own time and RSS are taken untraced.
    dry = run_child(server.endpoint, name, name, mode="dry-run", trace=True)
    problems = [f"dry run: {p}" for p in check_report(dataset, dry["report"], dry_run=True)]
    progress(
        f"{objects:,} objects: dry run in {dry['seconds']:.1f}s, tracemalloc peak "
        f"{dry['traced_peak_mb']:.1f} MB, peak RSS {dry['peak_rss_mb']:.1f} MB; collecting"
    )
    real = run_child(server.endpoint, name, name, mode="collect", trace=False)
    progress(
        f"{objects:,} objects: collected in {real['seconds']:.1f}s "
        f"({objects / real['seconds']:,.0f} objects/s), peak RSS {real['peak_rss_mb']:.1f} MB"
    )
    problems += check_report(dataset, real["report"], dry_run=False)
    problems += check_after(dataset, store, SEED)
    gc.unfreeze()
    InProcessServer.drop_bucket(name)
    dynamodb.delete_table(TableName=name)
    return SizeResult(objects, dataset.orphans, dataset.kinds, populated, dry, real, problems)


def measure_baseline(server: InProcessServer) -> dict[str, Any]:
    name = "vhs-gc-empty"
    resources.create_store_resources(
        client("dynamodb", server.endpoint),
        client("s3", server.endpoint),
        table_name=name,
        bucket_name=name,
        region=REGION,
    )
    return {
        "idle": run_child(server.endpoint, name, name, mode="idle", trace=False),
        "empty": run_child(server.endpoint, name, name, mode="collect", trace=False),
        "empty_dry": run_child(server.endpoint, name, name, mode="dry-run", trace=True),
    }


# --- Checks ---------------------------------------------------------------------------------


def check_report(dataset: Dataset, report: dict[str, Any], *, dry_run: bool) -> list[str]:
    """Where the collector's report disagrees with what the data set holds."""
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
    return [
        f"{name}: {report[name]}, expected {value}"
        for name, value in expected.items()
        if report[name] != value
    ]


def check_after(dataset: Dataset, store: Any, seed: int) -> list[str]:
    """What is wrong after a collection: the objects left must be exactly the referenced ones,
    and a sample of retained versions must read back (every pointer still resolves)."""
    problems = []
    bucket = InProcessServer.s3_backend().get_bucket(store.bucket_name)
    left = set(bucket.keys.keys())
    keep = dataset.referenced_keys(store.body_key)
    if left != keep:
        problems.append(
            f"{len(left - keep)} objects left that should be gone, "
            f"{len(keep - left)} referenced objects missing"
        )
    rng = random.Random(seed)
    sample = rng.sample(dataset.records, min(100, len(dataset.records)))
    sample += [r for r in dataset.records if r.via_api][:20]
    for record in sample:
        for version in range(record.expired + 1, len(record.bodies) + 1):
            if store.get(record.id, version).body != record.bodies[version - 1].data:
                problems.append(f"{record.id} version {version} reads back wrong")
    return problems
