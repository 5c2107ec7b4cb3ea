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

Only the standard library is imported at module level: the child runs this file too
(`--child`), and what it imports is part of what it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run as a script: make the repository (for `benchmarks`) and lambdas/ (for `vhs`) importable.
ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "lambdas"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

if TYPE_CHECKING:
    from benchmarks.report import Progress
    from vhs.codec import Body

SEED = 2018
SECTION = "gc"
FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (2_000, 10_000)
ORPHAN_SHARE = 0.05
# Objects written through the store's own API (store.put, and a crashed writer's upload) in
# each store; the rest are put straight into moto's backend (see InProcessServer).
API_OBJECTS = 250
POPULATION_THREADS = 8
# The collector's clock runs this far ahead, so every object is past any grace period.
CLOCK_AHEAD = 2 * 3600
# Versions of an expired-kind record: the current one and 6 earlier ones, one more than the
# default retention keeps (5) and one short of a writer's trim (at 2 expired entries).
EXPIRED_RECORD_VERSIONS = 7
REGION = "us-east-1"
FLAT = 1.10  # peak memory within 10% across sizes: flat
CHILD_TIMEOUT = 1800


# --- The collector, in a child process ------------------------------------------------------


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Run in the child: build the store from the environment (as the Lambda does), run the
    collector over every shard, and report its peak memory. `mode` "idle" builds the store
    and stops: the fixed cost of a collector process."""
    import tracemalloc

    from vhs.maintenance.gc import GarbageCollector
    from vhs.store import VersionedHybridStore

    store = VersionedHybridStore.from_env()
    result: dict[str, Any] = {}
    if config["mode"] != "idle":
        collector = GarbageCollector(
            store,
            grace=timedelta(0),
            dry_run=config["mode"] == "dry-run",
            clock=lambda: time.time() + CLOCK_AHEAD,
        )
        if config["trace"]:
            tracemalloc.start()
        cpu = os.times()
        started = time.perf_counter()
        report = collector.run()
        result["seconds"] = time.perf_counter() - started
        after = os.times()
        result["cpu_seconds"] = (after.user + after.system) - (cpu.user + cpu.system)
        if config["trace"]:
            result["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        result["report"] = report.as_dict()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def peak_rss_mb() -> float:
    """This process's peak resident set size. Not ru_maxrss: Linux carries that over exec
    from the forked copy of the parent, so a child of a big parent would report the parent's
    size. VmHWM belongs to the process's own memory since exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024


def run_child(endpoint: str, table: str, bucket: str, *, mode: str, trace: bool) -> dict[str, Any]:
    from vhs.local.stack import LOCAL_CREDENTIALS

    env = {
        **os.environ,
        **LOCAL_CREDENTIALS,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "VHS_TABLE_NAME": table,
        "VHS_BUCKET_NAME": bucket,
    }
    for name in ("VHS_PREFIX", "VHS_INLINE_THRESHOLD", "VHS_RETAIN_VERSIONS", "VHS_RETAIN_DAYS"):
        env.pop(name, None)
    config = json.dumps({"mode": mode, "trace": trace})
    import subprocess

    before = os.times()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", config],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"the collector process failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # This process does nothing but serve moto while it waits for the child.
    result["moto_cpu_seconds"] = (after.user + after.system) - (before.user + before.system)
    return result


# --- moto, in this process ------------------------------------------------------------------


class InProcessServer:
    """The local stack's moto server (vhs.local.motoserver: moto's app with atomic DynamoDB
    requests), served from a thread of this process rather than a child process, so that the
    bulk of the objects can be put straight into moto's S3 backend: over HTTP moto spends about
    3 ms of CPU on each PutObject, which would make populating 100k objects take longer than
    the whole benchmark may. The collector still reaches it over HTTP, from its own process."""

    def __init__(self) -> None:
        from vhs.local.stack import free_port

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: Any = None

    def __enter__(self) -> InProcessServer:
        import logging
        import threading

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        from vhs.local.motoserver import AtomicDynamoDB

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        app = AtomicDynamoDB(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)

    @classmethod
    def drop_bucket(cls, name: str) -> None:
        """Drop a bucket, disposing of its objects as moto's own reset does (moto warns about
        every object garbage-collected undisposed)."""
        bucket = cls.s3_backend().buckets.pop(name)
        for key in bucket.keys.values():
            key.dispose()
        bucket.keys.clear()

    @staticmethod
    def s3_backend() -> Any:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


# --- The objects ----------------------------------------------------------------------------


@dataclass
class Record:
    id: str
    bodies: list[Body]  # versions 1..n, oldest first
    expired: int = 0  # how many of the oldest are beyond retention: orphans
    crashed: list[Body] = field(default_factory=list)  # uploaded, never committed: orphans
    via_api: bool = False

    def stamp(self, version: int) -> str:
        return (datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=version)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )


@dataclass
class Dataset:
    objects: int
    records: list[Record]  # records with an item (and maybe crashed uploads or expired bodies)
    crashed_creates: list[Record]  # ids with no item: a body uploaded by a create that died
    kinds: dict[str, int]  # orphans by kind

    @property
    def orphans(self) -> int:
        return sum(self.kinds.values())

    @property
    def referenced(self) -> int:
        return self.objects - self.orphans

    @property
    def orphan_bytes(self) -> int:
        expired = sum(b.size for r in self.records for b in r.bodies[: r.expired])
        crashed = sum(b.size for r in [*self.records, *self.crashed_creates] for b in r.crashed)
        return expired + crashed

    def referenced_keys(self, key: Callable[[str, str], str]) -> set[str]:
        return {key(r.id, body.sha256) for r in self.records for body in r.bodies[r.expired :]}


def build_dataset(objects: int, orphan_share: float, seed: int = SEED) -> Dataset:
    """`objects` S3 objects: records of 1 to 3 versions, plus orphans split between crashed
    creates (no item), crashed updates (an item that never pointed at the body) and versions
    beyond retention (in the item's history, no longer retained). Bodies are small catalogue
    records (about 250 bytes of JSON)."""
    import random

    from benchmarks import workload
    from vhs.codec import encode_record

    rng = random.Random(seed)
    writer = workload._Writer(rng)

    def body(rid: str, version: int) -> Body:
        record = {
            "id": rid,
            "version": version,
            "title": writer.sentence(6, 12),
            "creator": writer.name(),
            "date": writer.dates(),
            "note": writer.sentence(12, 24),
        }
        return encode_record(record, None, max_size=2**20)

    orphans = round(objects * orphan_share)
    referenced = objects - orphans
    per_expired = EXPIRED_RECORD_VERSIONS - 1
    expired = min(orphans // 3, referenced // (2 * per_expired))
    updates = (orphans - expired) // 2
    creates = orphans - expired - updates
    records: list[Record] = []
    for n in range(expired):
        rid = f"b{n:07d}-x"
        versions = [body(rid, v) for v in range(1, EXPIRED_RECORD_VERSIONS + 1)]
        records.append(Record(rid, versions, expired=1))
    remaining = referenced - expired * per_expired
    n = 0
    while remaining > 0:
        rid = f"b{n:07d}"
        count = min(1 + n % 3, remaining)
        records.append(Record(rid, [body(rid, v) for v in range(1, count + 1)]))
        remaining -= count
        n += 1
    plain = [r for r in records if not r.expired]
    for k in range(updates):
        target = plain[k % len(plain)]
        target.crashed.append(body(target.id, len(target.bodies) + 1 + len(target.crashed)))
    crashed_creates = []
    for k in range(creates):
        rid = f"n{k:07d}"
        crashed_creates.append(Record(rid, [], crashed=[body(rid, 1)]))
    # A sample of every kind goes through the store's API, spread over the kinds.
    share = min(1.0, API_OBJECTS / objects)
    for group in (records[:expired], plain, crashed_creates):
        for record in group[: max(1, round(len(group) * share))]:
            record.via_api = True
    dataset = Dataset(
        objects,
        records,
        crashed_creates,
        {"crashed create": creates, "crashed update": updates, "beyond retention": expired},
    )
    total = sum(len(r.bodies) + len(r.crashed) for r in [*records, *crashed_creates])
    assert total == objects, (total, objects)
    return dataset


def populate(dataset: Dataset, store: Any, dynamodb: Any) -> dict[str, float]:
    """Write `dataset` into `store`: the records marked via_api through store.put (and a
    crashed writer's upload: store.bodies.put with no index write, as tests/test_gc.py does),
    the rest as the same objects put into moto's backend and the same items, in the store's
    format, with BatchWriteItem."""
    import base64
    import secrets
    from concurrent.futures import ThreadPoolExecutor

    from vhs.index import entry_to_dynamo
    from vhs.model import Entry
    from vhs.ordering import parse_timestamp
    from vhs.resources import TABLE

    everyone = [*dataset.records, *dataset.crashed_creates]
    started = time.perf_counter()

    def through_api(record: Record) -> None:
        for version, body in enumerate(record.bodies, start=1):
            store.put(
                record.id,
                body.data,
                updated_at=record.stamp(version),
                content_type=body.content_type,
            )
        for body in record.crashed:
            store.bodies.put(store.body_key(record.id, body.sha256), body, {})

    with ThreadPoolExecutor(POPULATION_THREADS) as pool:
        list(pool.map(through_api, [r for r in everyone if r.via_api]))
    api_seconds = time.perf_counter() - started

    started = time.perf_counter()
    backend = InProcessServer.s3_backend()
    bucket = backend.get_bucket(store.bucket_name)
    for record in everyone:
        if record.via_api:
            continue
        encoded_id = base64.urlsafe_b64encode(record.id.encode()).decode()
        uploads = [(v, b) for v, b in enumerate(record.bodies, start=1)]
        uploads += [(len(record.bodies) + 1, b) for b in record.crashed]
        for version, body in uploads:
            assert body.data is not None
            key = backend.put_object(
                store.bucket_name,
                store.body_key(record.id, body.sha256),
                body.data,
                checksum_value=base64.b64encode(bytes.fromhex(body.sha256)).decode(),
            )
            key.set_metadata(
                {
                    "Content-Type": body.content_type,
                    "x-amz-meta-vhs-id": encoded_id,
                    "x-amz-meta-vhs-updated-at": record.stamp(version),
                }
            )
            key.set_acl(bucket.acl)

    s3_seconds = time.perf_counter() - started
    started = time.perf_counter()
    now = int(time.time())

    def item(record: Record) -> dict[str, Any]:
        entries = [
            entry_to_dynamo(
                Entry(
                    updated_at=parse_timestamp(record.stamp(version)),
                    content_hash=body.sha256,
                    size=body.size,
                    written_at=now - len(record.bodies) + version,
                    token=secrets.token_urlsafe(9),
                    content_type=body.content_type,
                )
            )
            for version, body in enumerate(record.bodies, start=1)
        ]
        return {
            TABLE.partition_key: {"S": record.id},
            "v": {"N": str(len(entries))},
            "c": {"L": entries[-1:]},
            "p": {"L": entries[:-1]},
        }

    items = [item(r) for r in dataset.records if not r.via_api]

    def write(batch: list[dict[str, Any]]) -> None:
        request = {store.table_name: [{"PutRequest": {"Item": i}} for i in batch]}
        while request:
            request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [items[i : i + 25] for i in range(0, len(items), 25)]))
    return {
        "api_seconds": api_seconds,
        "seeded_s3_seconds": s3_seconds,
        "seeded_items_seconds": time.perf_counter() - started,
    }


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
    import random

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


# --- The measurement ------------------------------------------------------------------------


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
    import gc

    from vhs import resources
    from vhs.local.stack import client
    from vhs.store import VersionedHybridStore

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
    from vhs import resources
    from vhs.local.stack import client

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


# --- Reporting ------------------------------------------------------------------------------


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
        f"({found['peak_rss']:.2f}x); {idle:.1f} MB of it is the fixed cost of the process "
        "(Python, vhs and botocore imported, the S3 and DynamoDB clients built). What the "
        "collector allocates while it runs (tracemalloc) peaks at "
        f"{small.dry['traced_peak_mb']:.1f} and {large.dry['traced_peak_mb']:.1f} MB "
        f"({found['traced_peak']:.2f}x): it holds one listing page and the items of that "
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


def grid(results: Sequence[SizeResult]) -> Any:
    from benchmarks.report import Grid

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
    memory = [f"{found['peak_rss']:.2f}x", f"{found['traced_peak']:.2f}x"]
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


def baseline_grid(baseline: dict[str, Any]) -> Any:
    from benchmarks.report import Grid

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
    from benchmarks.report import markdown_table

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
    failed = [p for r in results for p in r.problems]
    if failed:
        parts.insert(3, "**Checks failed:** " + "; ".join(failed))
    return "\n\n".join(parts)


def run_metadata(args: argparse.Namespace, seconds: float, sizes: Sequence[int]) -> dict[str, Any]:
    import platform
    from importlib import metadata

    sample = build_dataset(300, args.orphans).records
    body_size = sum(b.size for r in sample for b in r.bodies) / sum(len(r.bodies) for r in sample)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "duration": f"{seconds:.0f} s",
        "sizes": list(sizes),
        "orphan_share": args.orphans,
        "api_objects": API_OBJECTS,
        "body_size": int(round(body_size, -1)),
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
    parser.add_argument("--child", metavar="CONFIG", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    from rich.console import Console

    from benchmarks import sections
    from benchmarks.report import print_grid

    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    from benchmarks.report import Progress

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
        print(json.dumps(as_json(results, baseline, meta), indent=2))
    else:
        console = Console()
        if not console.is_terminal:  # piped: rich would assume 80 columns and wrap every cell
            console = Console(width=160)
        print_grid(console, grid(results))
        print_grid(console, baseline_grid(baseline))
        console.print(verdict(results, baseline).replace("**", ""))
        console.print(throughput(results).replace("**", ""))
    if args.write:
        path = Path(args.write)
        text = path.read_text() if path.exists() else ""
        path.write_text(sections.replace_section(text, SECTION, markdown(results, baseline, meta)))
        progress(f"wrote the {SECTION} section of {args.write}")
    failed = [p for r in results for p in r.problems]
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
