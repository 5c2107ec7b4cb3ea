"""docs/benchmarks.md, "Reindex": throughput here and cost per million records on AWS."""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from vhs.changes.publish import ChangePublisher
from vhs.changes.reindex import Selection, Target
from vhs.shapes import REINDEX
from vhs_ops import provisioning
from vhs_ops.cli.reindex import Checkpoint, run_local
from vhs_testing.backends import open_backend

from .common import Progress, Report, now, table
from .pricing import PRICES, item_size, read_units

OPTIONS = {"--records": (int, 3000, 300, "records"), "--segments": (int, 4, 4, "segments")}


def measure(records: int, segments: int, rate: float | None) -> dict[str, Any]:
    with open_backend("inprocess", None) as backend:  # moto in process
        sns, dynamodb, store = backend.new_client("sns"), backend.dynamodb, backend.store()
        for n in range(records):
            record = {"title": f"Record {n}", "notes": "x" * 300}
            store.put(f"b{n:07d}", record, updated_at="2026-01-01T00:00:00Z")
        # No subscriber: moto's SQS delivery is quadratic in the queue's length.
        topic = provisioning.create_change_topic(sns, "changes.fifo")
        counted = {"calls": 0, "bytes": 0, "read_units": 0.0, "pages": 0}

        def published(params: dict[str, Any], **_: Any) -> None:
            counted["calls"] += 1
            counted["bytes"] += sum(len(e["Message"]) for e in params["PublishBatchRequestEntries"])

        def scanned(parsed: dict[str, Any], **_: Any) -> None:
            counted["pages"] += 1
            size = sum(item_size(item) for item in parsed.get("Items", []))
            counted["read_units"] += read_units(size, consistent=False)

        sns.meta.events.register("provide-client-params.sns.PublishBatch", published)
        dynamodb.meta.events.register("after-call.dynamodb.Scan", scanned)
        publisher = ChangePublisher(sns, topic)
        target = Target(dynamodb, backend.table_name, publisher, backend.bucket_name)
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = Checkpoint.new(Path(folder) / "run.json", selection=Selection(),
                                        total_segments=segments, rate=rate or REINDEX.max_rate,
                                        page_size=REINDEX.page_size)  # fmt: skip
            started = time.perf_counter()
            run_local(target, checkpoint)
            seconds = time.perf_counter() - started
        assert checkpoint.totals().replayed == records and checkpoint.done
    return {"records": records, "segments": segments, "rate": rate, "seconds": seconds, **counted}


def aws_cost_per_million(measured: dict[str, Any]) -> dict[str, float]:
    """Dollars per million records replayed on AWS at the deployed defaults."""
    per = 1_000_000 / measured["records"]
    # The rate bound's waits are billed; an invocation works for timeout - reserve seconds.
    gb_seconds = 1_000_000 / REINDEX.default_rate * REINDEX.function_memory_mb / 1024
    work = REINDEX.function_timeout_seconds - REINDEX.stop_at_remaining_ms / 1000
    invocations = math.ceil(1_000_000 / (REINDEX.default_rate * work)) + REINDEX.default_segments
    # Two transitions per invocation, three per segment's child execution, five for the parent.
    transitions = 2 * invocations + 3 * REINDEX.default_segments + 5
    payload_gb = measured["bytes"] * per / 2**30
    costs = {
        "Scan read units (eventually consistent, by page bytes)":
            measured["read_units"] * per * PRICES.dynamodb_read_unit_per_million / 1e6,
        "worker Lambda (GB-seconds incl. the rate bound's waits, requests)":
            gb_seconds * PRICES.lambda_arm_gb_second
            + invocations * PRICES.lambda_request_per_million / 1e6,
        "Step Functions state transitions":
            transitions * PRICES.step_functions_transition_per_thousand / 1e3,
        "SNS FIFO publishes and payload":
            PRICES.sns_fifo_publish_per_million + payload_gb * PRICES.sns_fifo_payload_per_gb,
        "SNS FIFO delivery, per SQS subscriber": PRICES.sns_fifo_delivery_per_million
            + payload_gb * PRICES.sns_fifo_delivery_payload_per_gb,
    }  # fmt: skip
    costs["**total, one subscriber**"] = sum(costs.values())
    return costs


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    records = options.records
    # The bound holds: 2 segments at 100 records/s each, under what the worker can do.
    plan = [(records, options.segments, None), (records, 1, None), (min(records, 1000), 2, 100.0)]
    rows = []
    for count, segments, rate in plan:
        progress(f"{count} records, {segments} segments, rate bound {rate}")
        rows.append(measure(count, segments, rate))
    costs = aws_cost_per_million(rows[0])
    speed = [[r["segments"], f"{r['rate']:g}" if r["rate"] else "none", f"{r['records']:,}",
              f"{r['seconds']:.2f}", f"{r['records'] / r['seconds']:,.0f}"]
             for r in rows]  # fmt: skip
    free, rate = rows[0], REINDEX.default_segments * REINDEX.default_rate
    text = "\n\n".join([
        f"Run {now()}.",
        table(["segments", "rate bound (records/s per segment)", "records", "seconds",
               "records/s"], speed, right=1),
        f"Per record: {free['read_units'] / free['records']:.4f} Scan read units "
        f"({free['pages']} pages), {free['calls'] / free['records']:.2f} PublishBatch calls, "
        f"{free['bytes'] / free['records']:.0f} notification bytes.",
        f"**AWS, per million records** at the deployed defaults ({REINDEX.default_segments} "
        f"segments x {REINDEX.default_rate:g} records/s = {rate:g} records/s, so about "
        f"{1e6 / rate / 60:.0f} minutes; worker {REINDEX.function_memory_mb} MB arm64):",
        table(["part", "$ per million records"], [[k, f"{v:.4f}"] for k, v in costs.items()], 1),
    ])  # fmt: skip
    return Report({"reindex": text}, {"runs": rows, "aws_per_million": costs})
