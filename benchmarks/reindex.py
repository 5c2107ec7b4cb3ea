"""Reindex throughput here, and what a reindex costs on AWS per million records.

Measured: `vhs reindex`'s local runner (vhs.cli.reindex.run_local: the worker of the deployed
function, one thread per segment) replaying a table of small records, in process against moto
(`mock_aws`), publishing to an SNS FIFO topic (no subscriber: moto's SQS delivery is quadratic
in the queue's length), the rate bound at its highest (resources.REINDEX.max_rate, more than
moto serves here: "none" in the table; to see what the worker itself costs) and lower (to see
that it holds). Counted exactly: the Scan's read units (DynamoDB's rule: the page's item
bytes, per started 4 KB, half for an eventually consistent read), PublishBatch calls,
notification bytes.

Priced (`pricing.py`): the Scan's read units, the worker's Lambda time (GB-seconds: at the
deployed default rate the worker mostly waits for its token bucket, and Lambda bills the
wait), Step Functions state transitions (two per worker invocation, a few per segment) and
SNS FIFO publishes and payload, which dominate.

    .venv/bin/python benchmarks/reindex.py [--records 3000] [--segments 4] [--json]
    .venv/bin/python benchmarks/reindex.py --write docs/benchmarks.md   # its section there
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "lambdas"), str(ROOT / "tests"), str(ROOT)]

REGION = "us-east-1"


def measure(records: int, segments: int, rate: float | None) -> dict[str, Any]:
    import boto3
    import moto

    from benchmarks.pricing import item_size
    from vhs import resources
    from vhs.changes.feed import ChangePublisher
    from vhs.changes.reindex import Selection, Target
    from vhs.cli.reindex import Checkpoint, run_local
    from vhs.resources import REINDEX
    from vhs.store import VersionedHybridStore

    with moto.mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        resources.create_store_resources(
            dynamodb, s3, table_name="records", bucket_name="bodies", region=REGION
        )
        store = VersionedHybridStore("records", "bodies", s3_client=s3, dynamodb_client=dynamodb)
        for n in range(records):
            record = {"title": f"Record {n}", "notes": "x" * 300}
            store.put(f"b{n:07d}", record, updated_at="2026-01-01T00:00:00Z")
        # No subscriber: moto's SQS delivery scans the whole queue for every message
        # (quadratic), which would measure moto. On AWS delivery is SNS's work, priced below.
        topic = resources.create_change_topic(sns, "changes.fifo")

        counted = {"calls": 0, "bytes": 0, "read_units": 0.0, "pages": 0}

        def published(params: dict[str, Any], **_: Any) -> None:
            counted["calls"] += 1
            counted["bytes"] += sum(len(e["Message"]) for e in params["PublishBatchRequestEntries"])

        def scanned(parsed: dict[str, Any], **_: Any) -> None:
            size = sum(item_size(item) for item in parsed.get("Items", []))
            counted["pages"] += 1
            counted["read_units"] += max(1, math.ceil(size / 4096)) * 0.5

        sns.meta.events.register("provide-client-params.sns.PublishBatch", published)
        dynamodb.meta.events.register("after-call.dynamodb.Scan", scanned)
        target = Target(dynamodb, "records", ChangePublisher(sns, topic), "bodies")
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = Checkpoint.new(
                Path(folder) / "run.json",
                selection=Selection(),
                total_segments=segments,
                rate=rate or REINDEX.max_rate,
                page_size=REINDEX.page_size,
            )
            started = time.perf_counter()
            run_local(target, checkpoint)
            seconds = time.perf_counter() - started
        totals = checkpoint.totals()
        assert totals.replayed == records and checkpoint.done, totals
    return {
        "records": records,
        "segments": segments,
        "rate_per_segment": rate,
        "seconds": seconds,
        "records_per_second": records / seconds,
        "publish_calls": counted["calls"],
        "notification_bytes": counted["bytes"],
        "scan_pages": counted["pages"],
        "scan_read_units": counted["read_units"],
    }


def aws_cost_per_million(measured: dict[str, Any]) -> dict[str, float]:
    """Dollars per million records replayed on AWS, from the measured per-record counts and the
    deployed defaults (resources.REINDEX)."""
    from benchmarks.pricing import PRICES
    from vhs.resources import REINDEX

    per = 1_000_000 / measured["records"]
    read_units = measured["scan_read_units"] * per
    # Lambda: at the default rate a segment replays `rate` records/s and the worker waits
    # (billed) for the rest; an invocation works for timeout - reserve seconds.
    seconds = 1_000_000 / REINDEX.default_rate
    gb_seconds = seconds * REINDEX.function_memory_mb / 1024
    work = REINDEX.function_timeout_seconds - REINDEX.stop_at_remaining_ms / 1000
    invocations = math.ceil(1_000_000 / (REINDEX.default_rate * work)) + REINDEX.default_segments
    # Two transitions per invocation (ReplayPage, SegmentDone), three per segment's child
    # execution (its start, the Succeed, the map item), five for the parent.
    transitions = 2 * invocations + 3 * REINDEX.default_segments + 5
    payload_gb = measured["notification_bytes"] * per / 2**30
    costs = {
        "scan_read_units": read_units * PRICES.dynamodb_read_unit_per_million / 1e6,
        "lambda": gb_seconds * PRICES.lambda_arm_gb_second
        + invocations * PRICES.lambda_request_per_million / 1e6,
        "step_functions": transitions * PRICES.step_functions_transition_per_thousand / 1e3,
        "sns_fifo_publish": PRICES.sns_fifo_publish_per_million
        + payload_gb * PRICES.sns_fifo_payload_per_gb,
        "sns_fifo_delivery_per_sqs_subscriber": PRICES.sns_fifo_delivery_per_million
        + payload_gb * PRICES.sns_fifo_delivery_payload_per_gb,
    }
    costs["total_one_subscriber"] = sum(costs.values())
    return costs


def report(rows: list[dict[str, Any]], costs: dict[str, float], when: str) -> str:
    from vhs.resources import REINDEX

    lines = [
        "## Reindex",
        "",
        f"`make bench` ({when}): `benchmarks/reindex.py` replays a table of small records",
        "(about 400 bytes) with `vhs reindex`'s local runner, in process against moto, to an",
        "SNS FIFO topic (no subscriber: moto's SQS delivery is quadratic in the queue's length,",
        "so it would measure moto). Local figures measure the worker's own",
        "cost (moto answers in microseconds, so they are an upper bound on what AWS latency",
        "allows per thread); the rate bound is what a deployed run is held to.",
        "",
        "| segments | rate bound (records/s per segment) | records | seconds | records/s |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        bound = f"{row['rate_per_segment']:g}" if row["rate_per_segment"] else "none"
        lines.append(
            f"| {row['segments']} | {bound} | {row['records']:,} | {row['seconds']:.2f} | "
            f"{row['records_per_second']:,.0f} |"
        )
    free = rows[0]
    lines += [
        "",
        "More segments are slower here, not on AWS: in process, moto serialises every request",
        "on the GIL and its Scan walks the table from the start for each page of each segment.",
        "The bounded run stays within segments x rate plus one second's burst.",
        "",
        f"Per record: {free['scan_read_units'] / free['records']:.4f} Scan read units "
        f"({free['scan_pages']} pages), {free['publish_calls'] / free['records']:.2f} PublishBatch "
        f"calls, {free['notification_bytes'] / free['records']:.0f} notification bytes.",
        "",
        f"**AWS, per million records** at the deployed defaults ({REINDEX.default_segments} "
        f"segments x {REINDEX.default_rate:g} records/s = "
        f"{REINDEX.default_segments * REINDEX.default_rate:g} records/s, so about "
        f"{1e6 / (REINDEX.default_segments * REINDEX.default_rate) / 60:.0f} minutes; "
        f"worker {REINDEX.function_memory_mb} MB arm64), list prices in `pricing.py`:",
        "",
        "| part | $ per million records |",
        "| --- | ---: |",
    ]
    names = {
        "scan_read_units": "Scan read units (eventually consistent, by page bytes)",
        "lambda": "worker Lambda (GB-seconds incl. the rate bound's waits, requests)",
        "step_functions": "Step Functions state transitions",
        "sns_fifo_publish": "SNS FIFO publishes and payload",
        "sns_fifo_delivery_per_sqs_subscriber": "SNS FIFO delivery, per SQS subscriber",
        "total_one_subscriber": "**total, one subscriber**",
    }
    for key, label in names.items():
        lines.append(f"| {label} | {costs[key]:.4f} |")
    lines += [
        "",
        "SNS dominates: every record is one FIFO publish. A faster run (higher rate) costs the",
        "same but for Lambda, whose billed seconds shrink with the waits.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", metavar="PATH", help="write the section into this Markdown")
    args = parser.parse_args()
    rows = [
        measure(args.records, args.segments, None),
        measure(args.records, 1, None),
        # The bound holds: 2 segments at 100 records/s each, under what the worker can do.
        measure(min(args.records, 1000), 2, 100.0),
    ]
    costs = aws_cost_per_million(rows[0])
    if args.json:
        print(json.dumps({"runs": rows, "aws_per_million": costs}, indent=2))
        return
    from datetime import UTC, datetime

    from benchmarks.sections import write_section

    text = report(rows, costs, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    print(text)
    if args.write:
        write_section(args.write, "reindex", text)


if __name__ == "__main__":
    main()
