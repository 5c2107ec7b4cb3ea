"""Hot-key ingest: 10,000 messages over 100 ids, shuffled, through the real ingest handler, in
batches of 10 (the deployed event source) and of 100; with the batch coalesced to one write per
id (`vhs/ingest/coalesce.py`, the handler as deployed) and, beside it in the same run, every
message written on its own (what the handler did before). Counts are exact (moto, in process);
dollars are AWS's list prices for the requests and write units those counts bill
(`pricing.py`, `billing.py`).

    .venv/bin/python benchmarks/hot_keys.py [--messages 10000] [--ids 100] [--json]

Goal (issue 12): at most 1.1 conditional writes per distinct id per batch.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "lambdas"), str(ROOT / "tests"), str(ROOT)]

REGION = "us-east-1"
GOAL_WRITES_PER_ID = 1.1


def messages(count: int, ids: int, seed: int = 12) -> list[dict[str, Any]]:
    """Catalogue edits: each id's messages at successive minutes, a field changed or the same
    record sent again; shuffled, as a producer's retries and parallel senders deliver them."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        rid, edit = f"b{n % ids:07d}", n // ids
        record = {"title": f"Record {n % ids}", "edition": edit // 2, "notes": "x" * 200}
        stamp = f"2026-01-{1 + edit // 1440:02d}T{edit // 60 % 24:02d}:{edit % 60:02d}:00Z"
        out.append({"id": rid, "updated_at": stamp, "record": record})
    rng.shuffle(out)
    return out


def run(bodies: list[dict[str, Any]], batch: int, coalesced: bool) -> dict[str, Any]:
    import boto3
    import moto

    from benchmarks.billing import Biller
    from support.backends import atomic_inprocess_dynamodb
    from vhs import resources
    from vhs.local.invoke import load_handler

    with moto.mock_aws(), atomic_inprocess_dynamodb():
        s3 = boto3.client("s3", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        resources.create_store_resources(
            dynamodb, s3, table_name="records", bucket_name="bodies", region=REGION
        )
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        import os

        os.environ.update(
            {
                "VHS_TABLE_NAME": "records",
                "VHS_BUCKET_NAME": "bodies",
                "VHS_DLQ_URL": dlq,
                "AWS_DEFAULT_REGION": REGION,
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_LOG_LEVEL": "ERROR",
                "POWERTOOLS_METRICS_NAMESPACE": "VHS",
            }
        )
        load_handler("ingest")
        module = sys.modules["handlers.ingest"]
        module.reset()
        worker = module.ingestor()
        biller = Biller(
            boto3.client("dynamodb", region_name=REGION), [worker.s3], [worker.store.index.dynamodb]
        )
        distinct = 0
        outcomes: dict[str, int] = {}
        with biller.bill(operations=len(bodies)) as bill:
            for start in range(0, len(bodies), batch):
                chunk = bodies[start : start + batch]
                records = [
                    {"messageId": f"m{start + n}", "body": json.dumps(b), "messageAttributes": {}}
                    for n, b in enumerate(chunk)
                ]
                distinct += len({b["id"] for b in chunk})
                if coalesced:
                    results = module.ingest_batch(worker, records)
                else:
                    with ThreadPoolExecutor(16) as pool:
                        results = list(pool.map(lambda r: module._ingest_one(worker, r), records))
                module.metrics.clear_metrics()  # counted here, not flushed as EMF lines
                for result in results:
                    outcome = getattr(result, "outcome", "error")
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
        writes = bill.requests.get("UpdateItem", 0)
        return {
            "batch": batch,
            "coalesced": coalesced,
            "messages": len(bodies),
            "writes": writes,
            "distinct_ids_per_batch_total": distinct,
            "writes_per_distinct_id_per_batch": round(writes / distinct, 3),
            "write_units": bill.write_units,
            "dollars_per_million_messages": round(bill.per_million(), 3),
            "outcomes": outcomes,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--ids", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bodies = messages(args.messages, args.ids)
    rows = [run(bodies, batch, coalesced) for batch in (10, 100) for coalesced in (True, False)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"hot-key ingest: {args.messages} messages over {args.ids} ids, shuffled")
    print("| batch | writes | writes per distinct id per batch | write units | $ per million |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        how = "coalesced" if row["coalesced"] else "one by one"
        per_id = row["writes_per_distinct_id_per_batch"]
        print(
            f"| {row['batch']}, {how} | {row['writes']} | {per_id} "
            f"| {row['write_units']:.0f} | ${row['dollars_per_million_messages']:.2f} |"
        )
    for row in rows:
        if row["coalesced"]:
            verdict = (
                "met"
                if row["writes_per_distinct_id_per_batch"] <= GOAL_WRITES_PER_ID
                else "NOT met"
            )
            goal = f"<= {GOAL_WRITES_PER_ID} writes per id per batch"
            print(f"batch {row['batch']}: goal {goal}: {verdict}")


if __name__ == "__main__":
    main()
