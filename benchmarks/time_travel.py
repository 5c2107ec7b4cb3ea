"""docs/benchmarks.md, "Time travel and diffs": requests, units and dollars of as-of reads and
diffs, against the latest read, on records with a full history."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from vhs_ops.local.stack import MotoServer, client

from . import workload
from .common import Progress, Report, now, table
from .measure import combine
from .pricing import Bill, Biller
from .report import requests_cell, units_cell
from .systems import new_store

VERSIONS = 6  # the default retention's 5 earlier versions and the current one
T0 = datetime(2026, 11, 1, tzinfo=UTC)
START = 1_800_000_000  # the store's clock: each version written a minute after the last
SIZES = {"small": 2 * workload.KB, "large": workload.MB}  # inline / in S3, as table 1's
OPTIONS = {"--ids": (int, 20, 3, "records of each size")}


def written(version: int) -> datetime:
    return datetime.fromtimestamp(START + 60 * (version - 1), UTC)


def updated(version: int) -> datetime:
    return T0 + timedelta(hours=version)


def operations(store: Any, id: str, raw: str) -> dict[str, Callable[[], Any]]:
    """What is billed for one record (`raw`: the same history as opaque bytes)."""
    return {
        "latest read": lambda: store.get(id),
        "as-of read (the oldest retained version)": lambda: store.get(id, as_of=written(1)),
        "as-of read (the current version)": lambda: store.get(id, as_of=written(VERSIONS)),
        "source-as-of read": lambda: store.get(id, source_as_of=updated(3)),
        "diff of neighbours (JSON)": lambda: store.diff(id, VERSIONS - 1, VERSIONS),
        "diff of the oldest and the current (JSON)": lambda: store.diff(id, 1, VERSIONS),
        "diff (opaque body)": lambda: store.diff(raw, 1, VERSIONS),
    }


def measure(endpoint: str, ids: int, progress: Progress) -> dict[str, dict[str, Bill]]:
    """Bills per size per operation, each the mean over `ids` records of VERSIONS versions."""
    s3, dynamodb, probe = (client(name, endpoint) for name in ("s3", "dynamodb", "dynamodb"))
    clock = [float(START)]
    store = new_store(s3, dynamodb, "time-travel", prefix="bench", clock=lambda: clock[0])
    biller = Biller(probe, [s3], [dynamodb])
    results: dict[str, dict[str, Bill]] = {}
    for size, target in SIZES.items():
        progress(f"{size} records: {ids} x {VERSIONS} versions")
        bills: dict[str, list[Bill]] = {}
        for n in range(ids):
            id, raw = f"{size}-{n:03d}", f"{size}-{n:03d}-raw"
            rng = random.Random(id)
            record = workload.make_record(id, target, rng)
            for version in range(1, VERSIONS + 1):
                clock[0] = written(version).timestamp()
                if version > 1:
                    record = workload.revise(record, rng, updated(version))
                store.put(id, record, updated_at=updated(version))
                body = workload.canonical(record)
                store.put(raw, body, updated_at=updated(version), content_type="text/plain")
            clock[0] += 60
            for name, action in operations(store, id, raw).items():
                with biller.bill() as bill:
                    action()
                bills.setdefault(name, []).append(bill)
        results[size] = {name: combine(b) for name, b in bills.items()}
    return results


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    with MotoServer() as server:
        results = measure(server.endpoint, options.ids, progress)
    sizes = list(results)

    def cells(bill: Bill) -> list[str]:
        return [f"{requests_cell(bill)} · {units_cell(bill)}", f"{bill.per_million():.3f}"]

    names = list(results[sizes[0]])
    rows = [[name, *(c for s in sizes for c in cells(results[s][name]))] for name in names]
    headers = ["operation", *(h for s in sizes for h in (f"{s} record", f"{s} $/M"))]
    text = f"Run {now()}: {options.ids} ids of each size.\n\n" + table(headers, rows)
    return Report({"time-travel": text}, results)
