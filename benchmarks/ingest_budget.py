"""docs/benchmarks.md, "What one ingest invocation holds". Only the standard library at module
level: the child's memory."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import tracemalloc
from datetime import timedelta
from typing import Any

from .common import Progress, Report, peak_rss_mb, run_child, table

POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
STAMP = '"updated_at":"2026-01-01T00:00:00Z"'
KINDS = ("claim checks", "record_location bodies", "record_location bodies in parts")


def repeat(item: str, size: int) -> str:
    """A JSON list of `item` about `size` bytes long."""
    return "[" + ",".join([item] * (size // (len(item) + 1))) + "]"


def shapes(target: int) -> dict[str, str]:
    """JSON documents of about `target` bytes, by shape."""
    from . import workload

    size = 2 * workload.KB
    records = [workload.make_record(f"b{n}", size, random.Random(n)) for n in range(target // size)]
    return {
        "catalogue records": json.dumps(records),
        "one long text": json.dumps({"text": "x" * target}),
        "integers": repeat("0", target),
        "floats": repeat("1.5", target),
        "empty objects": repeat("{}", target),
        "one-key objects": repeat('{"a":1}', target),
        "nested one-element lists": repeat("[[[1]]]", target),
    }


def expansion(target: int = 4 * 2**20) -> list[tuple[str, int, float]]:
    from vhs.codec import MAX_BODY_SIZE
    from vhs.ingest.contract import MessageLimits, read_message
    from vhs.ingest.staging import StagingLocation

    found = []
    claim_check = json.dumps([POINTER_CLASS, {"s3BucketName": "s", "s3Key": "k"}])
    for name, record in shapes(target).items():
        data = f'{{"id":"big",{STAMP},"record":{record}}}'.encode()
        del record
        tracemalloc.start()
        read = bytes(data)  # the bytes the function reads, counted
        message = read_message(
            {"messageId": "m", "body": claim_check},
            staging=StagingLocation("s", ""),
            fetch=lambda *_, data=read: data,
            limits=MessageLimits(timedelta(days=1), MAX_BODY_SIZE),
        )
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del message, read
        found.append((name, len(data), peak / len(data)))
    return found


def child(kind: str) -> dict[str, Any]:
    """In the child: ten messages of `kind` through the real handler; its peak RSS, its answer."""
    from vhs.ingest.budget import Budgets
    from vhs_ops.local.invoke import LambdaContext, load_handler

    budgets = Budgets.of_this_function()
    handler = load_handler("ingest")
    records = json.loads(sys.stdin.read())
    # The deployed function's memory, and time enough for all ten: what is measured here is
    # memory (with 60 s, messages that wait for the budget past the time are retried later).
    started = time.perf_counter()
    context = LambdaContext(function_name="vhs-ingest", timeout_seconds=900)
    response = handler({"Records": records}, context)
    seconds = time.perf_counter() - started
    return {"kind": kind, "peak_rss_mb": peak_rss_mb(), "seconds": seconds,
            "memory_budget_mb": budgets.memory.total / 2**20,
            "failures": len(response["batchItemFailures"])}  # fmt: skip


def batch(kind: str) -> dict[str, Any]:
    """Ten messages of `kind` on the local stack, handled in a child with the function's memory."""
    from vhs import settings
    from vhs.ingest.budget import JSON_PAYLOAD_EXPANSION, SPOOL_IN_MEMORY, Budgets
    from vhs.shapes import STAGING_PREFIX
    from vhs_ops.admin.dlq import queue_depth
    from vhs_ops.local.sqs_event import lambda_record
    from vhs_ops.local.stack import client, local_stack

    memory_mb, budget = 1024, Budgets.of_this_function().memory.total
    # The largest body spooled in memory; and one spooled to /tmp and uploaded in parts.
    body_size = SPOOL_IN_MEMORY if kind == "record_location bodies" else 3 * SPOOL_IN_MEMORY // 2
    with local_stack() as stack:
        s3, sqs = (client(name, stack.endpoint, stack.region) for name in ("s3", "sqs"))
        for n in range(10):
            key, attributes = f"{STAGING_PREFIX}bench/{kind}-{n}", {}
            if kind == "claim checks":  # the largest payload admitted, in the costliest shape
                record = repeat("[[[1]]]", budget // JSON_PAYLOAD_EXPANSION - 1024)
                payload = f'{{"id":"budget-{n}",{STAMP},"record":{record}}}'.encode()
                pointer = {"s3BucketName": stack.staging_bucket, "s3Key": key}
                body = json.dumps([POINTER_CLASS, pointer])
                size = {"DataType": "Number", "StringValue": str(len(payload))}
                attributes = {"ExtendedPayloadSize": size}
            else:
                payload = os.urandom(body_size)
                location = f"s3://{stack.staging_bucket}/{key}"
                body = f'{{"id":"body-{n}",{STAMP},"record_location":"{location}"}}'
            s3.put_object(Bucket=stack.staging_bucket, Key=key, Body=payload)
            sqs.send_message(
                QueueUrl=stack.queue_url, MessageBody=body, MessageAttributes=attributes
            )
        messages: list[dict[str, Any]] = []
        while len(messages) < 10:
            got = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10,
                                      MessageAttributeNames=["All"],
                                      MessageSystemAttributeNames=["All"])  # fmt: skip
            messages += got.get("Messages", [])
        records = [
            lambda_record(m, queue_arn=stack.queue_arn, region=stack.region) for m in messages
        ]
        env = {**os.environ, **stack.function_env(), "POWERTOOLS_LOG_LEVEL": "ERROR",
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
               "POWERTOOLS_TRACE_DISABLED": "true"}  # fmt: skip
        result = run_child(__name__, kind, stdin=json.dumps(records), env=env, timeout=900)
        letters = queue_depth(sqs, env[settings.DLQ_URL]).visible
    return {**result, "function_memory_mb": memory_mb, "dead_lettered": letters}


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    from vhs.ingest.budget import JSON_PAYLOAD_EXPANSION

    progress("JSON expansion by shape")
    shapes = expansion(2**20 if args.quick else 4 * 2**20)
    batches = []
    for kind in KINDS[:1] if args.quick else KINDS:
        progress(f"a batch of ten {kind}")
        batches.append(batch(kind))
    worst = max(factor for _, _, factor in shapes)
    rows = [[name, f"{size / 2**20:.1f} MiB", f"{factor:.1f}x"] for name, size, factor in shapes]
    rows.append(["the budget plans for", "", f"{JSON_PAYLOAD_EXPANSION}x"])
    memory = [[b["kind"], f"{b['peak_rss_mb']:,.0f}", b["function_memory_mb"],
               f"{b['memory_budget_mb']:,.0f}", b["failures"], b["dead_lettered"],
               f"{b['seconds']:.1f}"]
              for b in batches]  # fmt: skip
    text = "\n\n".join([
        table(["JSON payload", "size", "peak memory per byte"], rows, right=1),
        table(["a batch of ten", "peak RSS (MB)", "function (MB)", "memory budget (MB)",
               "batch item failures", "dead-lettered", "seconds"], memory, right=1),
    ])  # fmt: skip
    problems = [f"JSON expansion {worst:.1f}x over the budget's"] * (worst > JSON_PAYLOAD_EXPANSION)
    problems += [f"a batch of ten {b['kind']}: {b}" for b in batches
                 if b["peak_rss_mb"] >= b["function_memory_mb"] or b["failures"]
                 or b["dead_lettered"]]  # fmt: skip
    return Report({"ingest-budget": text}, {"expansion": shapes, "batches": batches}, problems)
