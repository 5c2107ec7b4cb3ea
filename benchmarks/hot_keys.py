"""docs/benchmarks.md, "Hot-key ingest: coalescing": through the real ingest handler."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from vhs import settings
from vhs.ingest.batch import ingest_batch
from vhs_ops.local.invoke import load_handler
from vhs_ops.local.stack import DEFAULT_REGION
from vhs_testing.backends import open_backend

from .common import Progress, Report, goals_table, now, table
from .pricing import Biller

GOAL_WRITES_PER_ID = 1.1
OPTIONS = {"--messages": (int, 10_000, 1_000, "messages"), "--ids": (int, 100, 100, "ids")}


def messages(count: int, ids: int, seed: int = 12) -> list[dict[str, Any]]:
    """Each id's edits, a minute apart (a field changed, or the same record again), shuffled."""
    out = []
    for n in range(count):
        edit = n // ids
        record = {"title": f"Record {n % ids}", "edition": edit // 2, "notes": "x" * 200}
        stamp = f"2026-01-{1 + edit // 1440:02d}T{edit // 60 % 24:02d}:{edit % 60:02d}:00Z"
        out.append({"id": f"b{n % ids:07d}", "updated_at": stamp, "record": record})
    random.Random(seed).shuffle(out)
    return out


def measure(bodies: list[dict[str, Any]], batch: int, coalesced: bool) -> dict[str, Any]:
    with open_backend("inprocess", None) as backend:  # moto in-process, atomic as DynamoDB is
        os.environ |= {
            **settings.StoreSettings(backend.table_name, backend.bucket_name).environment(),
            settings.DLQ_URL: backend.new_client("sqs").create_queue(QueueName="dlq")["QueueUrl"],
            "AWS_DEFAULT_REGION": DEFAULT_REGION,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "ERROR",
        }
        load_handler("ingest")
        handler = sys.modules["handlers.ingest"]
        handler.logger.setLevel("ERROR")  # imported before the environment above was set
        worker = handler.ingestor()
        biller = Biller(backend.new_client("dynamodb"), [worker.s3], [worker.store.index.dynamodb])
        distinct = 0
        with biller.bill(operations=len(bodies)) as bill:
            for start in range(0, len(bodies), batch):
                chunk = bodies[start : start + batch]
                records = [{"messageId": f"m{start + n}", "body": json.dumps(b),
                            "messageAttributes": {}} for n, b in enumerate(chunk)]  # fmt: skip
                distinct += len({b["id"] for b in chunk})
                if coalesced:
                    ingest_batch(worker, records)
                else:  # every message a batch of its own: nothing to coalesce
                    with ThreadPoolExecutor(16) as pool:
                        list(pool.map(lambda r: ingest_batch(worker, [r]), records))
                handler.metrics.clear_metrics()  # counted here, not flushed as EMF lines
    writes = bill.requests.get("UpdateItem", 0)
    return {"batch": batch, "coalesced": coalesced, "reads": bill.requests.get("GetItem", 0),
            "writes": writes, "per_id": round(writes / distinct, 3), "read_units": bill.read_units,
            "write_units": bill.write_units, "dollars": bill.per_million()}  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    bodies = messages(options.messages, options.ids)
    rows = []
    for batch in (10, 100):
        for coalesced in (True, False):
            progress(f"batches of {batch}, {'coalesced' if coalesced else 'one by one'}")
            rows.append(measure(bodies, batch, coalesced))
    figures = [[f"{r['batch']}, {'coalesced' if r['coalesced'] else 'one by one'}",
                f"{r['reads']:,}", f"{r['writes']:,}", r["per_id"], f"{r['read_units']:,.1f}",
                f"{r['write_units']:,.0f}", f"${r['dollars']:.2f}"] for r in rows]  # fmt: skip
    goals = [[f"writes per distinct id per batch, batch {r['batch']}", f"<= {GOAL_WRITES_PER_ID}",
              r["per_id"], r["per_id"] <= GOAL_WRITES_PER_ID]
             for r in rows if r["coalesced"]]  # fmt: skip
    headers = ["batch", "reads", "conditional writes", "writes per distinct id per batch",
               "read units", "write units", "$ per million messages"]  # fmt: skip
    text = (f"Run {now()}: {options.messages:,} edits over {options.ids} ids.\n\n"
            + table(headers, figures, right=1) + "\n\n"
            + goals_table(goals))  # fmt: skip
    return Report({"hot-keys": text}, rows)
