"""What one ingest invocation holds at most: the JSON expansion the memory budget plans for, and
the peak memory of a batch of ten of the largest messages the budget admits.

    .venv/bin/python benchmarks/ingest_budget.py            # both parts
    .venv/bin/python benchmarks/ingest_budget.py --json

1. **JSON expansion.** For payloads of several shapes (catalogue records, long text, numbers,
   and the shapes that cost Python the most per byte of JSON), the peak of Python's allocations
   (tracemalloc) while `read_message` reads, parses, validates and canonicalises the payload,
   per byte of payload. `budget.JSON_PAYLOAD_EXPANSION` must be at least the largest.
2. **A batch of ten.** The real ingest handler, in a process of its own (its peak resident set
   is the function's), stores one batch of ten claim checks, each the largest payload the
   memory budget admits in the costliest shape, then one batch of ten `record_location` bodies
   of 64 MiB (the largest that is spooled in memory), then ten of 96 MiB (spooled to /tmp and
   uploaded in parts). The moto server runs in another process,
   so what it holds is not counted. The peak must stay under the function's configured memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lambdas"))

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"


def shapes(target: int) -> dict[str, str]:
    """JSON documents of about `target` bytes, by shape."""
    import random

    rng = random.Random(1)

    def catalogue(n: int) -> dict[str, Any]:
        words = ["the", "whale", "of", "sea", "moby", "dick", "captain"]
        return {
            "title": " ".join(rng.choice(words) for _ in range(8)),
            "creators": [{"name": f"Author {rng.randrange(10**6)}", "role": "author"}] * 2,
            "subjects": [f"subject-{rng.randrange(1000)}" for _ in range(5)],
            "year": rng.randrange(1500, 2025),
            "identifiers": {"isbn": str(rng.randrange(10**12, 10**13)), "b": f"b{n}"},
        }

    def repeat(item: str) -> str:
        return "[" + ",".join([item] * (target // (len(item) + 1))) + "]"

    records = [catalogue(n) for n in range(target // 330)]
    return {
        "catalogue records": json.dumps(records),
        "one long text": json.dumps({"text": "x" * target}),
        "integers": repeat("0"),
        "floats": repeat("1.5"),
        "empty objects": repeat("{}"),
        "one-key objects": repeat('{"a":1}'),
        "nested one-element lists": repeat("[[[1]]]"),
    }


def expansion(target: int = 4 * 2**20) -> list[tuple[str, int, float]]:
    from vhs.codec import MAX_BODY_SIZE
    from vhs.ingest.contract import MessageLimits, read_message
    from vhs.ingest.staging import StagingLocation

    found = []
    for name, record in shapes(target).items():
        payload = json.dumps(
            {"id": "big", "updated_at": "2026-01-01T00:00:00Z", "record": "RECORD"}
        ).replace('"RECORD"', record)
        data = payload.encode()
        del payload, record
        tracemalloc.start()
        read = bytes(data)  # the bytes the function reads, counted
        message = read_message(
            {
                "messageId": "m",
                "body": json.dumps([POINTER_CLASS, {"s3BucketName": "s", "s3Key": "k"}]),
            },
            staging=StagingLocation("s", ""),
            fetch=lambda *_, data=read: data,
            limits=MessageLimits(timedelta(days=1), MAX_BODY_SIZE),
        )
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del message, read
        found.append((name, len(data), peak / len(data)))
    return found


# --- a batch of ten, in the handler's own process ----------------------------------------------


def child(kind: str) -> dict[str, Any]:
    """Run in the child: one batch of ten messages of `kind` through the real handler; its
    peak RSS, and what the handler answered."""
    from vhs.ingest.budget import Budgets
    from vhs.local.invoke import LambdaContext, load_handler

    budgets = Budgets.of_this_function()
    handler = load_handler("ingest")
    records = json.loads(sys.stdin.read())
    # The deployed function's memory, and time enough for all ten: what is measured here is
    # memory (with 60 s, messages that wait for the budget past the time are retried later).
    started = time.perf_counter()
    context = LambdaContext(function_name="vhs-ingest", timeout_seconds=900)
    response = handler({"Records": records}, context)
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text()
    hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return {
        "kind": kind,
        "peak_rss_mb": int(hwm.split()[1]) / 1024,
        "memory_budget_mb": budgets.memory.total / 2**20,
        "failures": len(response["batchItemFailures"]),
        "seconds": seconds,
    }


def batch(kind: str) -> dict[str, Any]:
    from vhs.ingest.budget import JSON_PAYLOAD_EXPANSION, SPOOL_IN_MEMORY, Budgets
    from vhs.local.sqs_source import lambda_record
    from vhs.local.stack import client, local_stack

    memory_mb = 1024
    budget = Budgets.of_this_function().memory.total
    # The largest body spooled in memory; and one spooled to /tmp and uploaded in parts.
    body_size = SPOOL_IN_MEMORY if kind == "record_location bodies" else 3 * SPOOL_IN_MEMORY // 2
    with local_stack() as stack:
        s3 = client("s3", stack.endpoint, stack.region)
        sqs = client("sqs", stack.endpoint, stack.region)
        messages = []
        for n in range(10):
            key = f"bench/{kind}-{n}"
            if kind == "claim checks":
                # The largest payload the budget admits, in the costliest shape known.
                size = budget // JSON_PAYLOAD_EXPANSION - 1024
                record = "[" + ",".join(["[[[1]]]"] * (size // 8)) + "]"
                payload = (
                    f'{{"id":"budget-{n}","updated_at":"2026-01-01T00:00:00Z","record":{record}}}'
                )
                s3.put_object(Bucket=stack.staging_bucket, Key=key, Body=payload.encode())
                body = json.dumps(
                    [POINTER_CLASS, {"s3BucketName": stack.staging_bucket, "s3Key": key}]
                )
                attributes = {
                    "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(payload))}
                }
            else:
                s3.put_object(Bucket=stack.staging_bucket, Key=key, Body=os.urandom(body_size))
                location = f"s3://{stack.staging_bucket}/{key}"
                body = json.dumps(
                    {
                        "id": f"body-{n}",
                        "updated_at": "2026-01-01T00:00:00Z",
                        "record_location": location,
                    }
                )
                attributes = {}
            sqs.send_message(
                QueueUrl=stack.queue_url, MessageBody=body, MessageAttributes=attributes
            )
        while len(messages) < 10:
            got = sqs.receive_message(
                QueueUrl=stack.queue_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            messages += got
        records = [
            lambda_record(m, queue_arn=stack.queue_arn, region=stack.region) for m in messages
        ]
        env = {
            **os.environ,
            **stack.function_env(),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "ERROR",
        }
        done = subprocess.run(
            [sys.executable, __file__, "--child", kind],
            input=json.dumps(records),
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
        )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["function_memory_mb"] = memory_mb
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    from vhs.ingest.budget import JSON_PAYLOAD_EXPANSION

    shapes_found = expansion()
    batches = [
        batch("claim checks"),
        batch("record_location bodies"),
        batch("record_location bodies in parts"),
    ]
    worst = max(factor for _, _, factor in shapes_found)
    if args.json:
        print(json.dumps({"expansion": shapes_found, "batches": batches}, indent=2))
    else:
        print("JSON payloads: peak memory per byte of payload while read, parsed and canonicalised")
        for name, size, factor in shapes_found:
            print(f"  {name:<26} {size / 2**20:5.1f} MiB  {factor:5.1f}x")
        print(
            f"  the budget plans for {JSON_PAYLOAD_EXPANSION}x; the worst measured is {worst:.1f}x"
        )
        for b in batches:
            print(
                f"a batch of ten {b['kind']}: peak RSS {b['peak_rss_mb']:,.0f} MB of a "
                f"{b['function_memory_mb']} MB function (memory budget "
                f"{b['memory_budget_mb']:,.0f} MB), {b['failures']} batch item failures, "
                f"{b['seconds']:.1f} s"
            )
    ok = worst <= JSON_PAYLOAD_EXPANSION and all(
        b["peak_rss_mb"] < b["function_memory_mb"] and b["failures"] == 0 for b in batches
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
