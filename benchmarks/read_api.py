"""The read API (issue 14): requests per second and latency percentiles on the local stack
against a direct `store.get`, and the cost per million reads on AWS against a direct library
read.

    .venv/bin/python benchmarks/read_api.py [--reads 400] [--json]
    .venv/bin/python benchmarks/read_api.py --write docs/benchmarks.md   # its section there

Locally: moto's server and the local function URL (vhs.local.read_api: SigV4 checked, the
real handler), one client reading one record after another over a kept-alive connection,
each request signed as a consumer signs it; the same reads through `store.get` in this
process beside it. Three records: a small JSON record (inline in its item), a 64 KiB binary
body (in S3) and the small record revalidated with If-None-Match (a 304). The handler's own
time is measured too, in process, without HTTP.

On AWS: what each read bills (DynamoDB read units of the item as stored, S3 GETs, Lambda
requests and GB-seconds; a function URL adds nothing per request) at pricing.py's prices.
The Lambda duration is a model, stated with the table: the AWS calls' latency plus the
handler's own CPU time measured here, scaled to the memory's share of a vCPU.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "lambdas"), str(ROOT / "tests"), str(ROOT)]

T = "2026-11-01T09:00:00Z"
SMALL = {"title": "Moby-Dick; or, The Whale", "author": "Herman Melville", "notes": "x" * 600}
LARGE = random.Random("read-api").randbytes(64 * 1024)
# Latency of the AWS calls from a Lambda in the same region (warm, p50), for the cost model:
# DynamoDB GetItem single-digit ms, S3 GET of a small object tens of ms.
AWS_GETITEM_MS = 5.0
AWS_S3_GET_MS = 25.0
VCPU_MB = 1769  # Lambda gives one full vCPU at 1,769 MB, proportionally less below
MEMORIES_MB = (256, 512, 1024)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "p50_ms": round(at(0.50), 2),
        "p95_ms": round(at(0.95), 2),
        "p99_ms": round(at(0.99), 2),
        "per_second": round(len(samples) / sum(samples), 1),
    }


def timed(count: int, call: Callable[[], Any]) -> list[float]:
    call()  # warm: connections, caches, the handler's cold start
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


class Client:
    """A consumer: SigV4-signed GETs over one kept-alive connection."""

    def __init__(self, url: str, region: str) -> None:
        self.url, self.region = url, region
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def get(self, target: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        from vhs.local.read_api import signed_headers

        signed = signed_headers("GET", self.url + target, region=self.region, headers=headers)
        self.connection.request("GET", target, headers=signed)
        response = self.connection.getresponse()
        return response.status, response.read()


def measure(reads: int) -> dict[str, Any]:
    from benchmarks.pricing import item_size
    from vhs import settings
    from vhs.local.invoke import LambdaContext
    from vhs.local.read_api import LocalReadApi, function_url_event, signed_headers
    from vhs.local.stack import client, local_stack
    from vhs.store import VersionedHybridStore

    rows: dict[str, Any] = {}
    log = ROOT / ".bench" / "read-api.log"
    with local_stack(pipeline=False) as stack, LocalReadApi(stack, function_log=log) as api:
        store = VersionedHybridStore.from_settings(
            settings.StoreSettings(stack.table_name, stack.bucket_name),
            s3_client=client("s3", stack.endpoint),
            dynamodb_client=client("dynamodb", stack.endpoint),
        )
        store.put("small", SMALL, updated_at=T)
        store.put("large", LARGE, updated_at=T, content_type="application/octet-stream")
        etag = f'"{store.locate("small").content_hash}"'
        consumer = Client(api.url, stack.region)
        dynamodb = client("dynamodb", stack.endpoint)
        handler = api.handler
        if handler is None:
            raise RuntimeError("the read API did not start")

        def in_process(target: str, headers: dict[str, str] | None = None) -> Callable[[], Any]:
            signed = signed_headers("GET", api.url + target, region=stack.region, headers=headers)
            lowered = {name.lower(): value for name, value in signed.items()}
            event = function_url_event(
                "GET", target, lowered, b"", region=stack.region, access_key="testing"
            )
            return lambda: handler(event, LambdaContext())

        cases = {
            "small (inline)": ("small", "/records/small", None),
            "64 KiB (S3)": ("large", "/records/large", None),
            "304 (If-None-Match)": ("small", "/records/small", {"If-None-Match": etag}),
        }
        for name, (id, target, headers) in cases.items():
            status, _ = consumer.get(target, headers)
            if status != (304 if headers else 200):
                raise RuntimeError(f"{name}: the read API answered {status}")
            raw = dynamodb.get_item(TableName=stack.table_name, Key={"id": {"S": id}})["Item"]
            direct = None if headers else percentiles(timed(reads, lambda i=id: store.get(i)))
            with open(os.devnull, "w") as void, contextlib.redirect_stdout(void):
                handler_only = percentiles(timed(reads, in_process(target, headers)))
            rows[name] = {
                "direct": direct,
                # The store's share of the handler's time: its direct read (a 304 reads the
                # item as the small read does, and no body).
                "baseline": direct or rows["small (inline)"]["direct"],
                "api": percentiles(timed(reads, lambda t=target, h=headers: consumer.get(t, h))),
                "handler": handler_only,
                "item_bytes": item_size(raw),
                "s3_get": id == "large" and not headers,
            }
    return rows


def costs(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """Dollars per million reads on AWS: the direct library read and the read API."""
    from benchmarks.pricing import PRICES, read_units

    out = []
    for name, row in rows.items():
        units = read_units(row["item_bytes"], consistent=True)
        storage = units * PRICES.dynamodb_read_unit_per_million
        storage += PRICES.s3_get_per_million if row["s3_get"] else 0.0
        aws_ms = AWS_GETITEM_MS + (AWS_S3_GET_MS if row["s3_get"] else 0.0)
        # The handler's own CPU: its time in process less the store's calls, at least 0.
        own_ms = max(0.0, row["handler"]["p50_ms"] - row["baseline"]["p50_ms"])
        lambdas = {}
        for memory in MEMORIES_MB:
            billed_ms = max(1, round(aws_ms + own_ms * max(1.0, VCPU_MB / memory)))
            compute = billed_ms / 1000 * memory / 1024 * PRICES.lambda_arm_gb_second * 1e6
            lambdas[memory] = {
                "billed_ms": billed_ms,
                "dollars": round(storage + PRICES.lambda_request_per_million + compute, 3),
            }
        out.append(
            {
                "read": name,
                "read_units": units,
                "direct_dollars": round(storage, 3) if row["direct"] else None,
                "api": lambdas,
                "own_ms": round(own_ms, 2),
            }
        )
    return out


def report(rows: dict[str, Any], reads: int, when: str) -> str:
    def cell(p: dict[str, float] | None) -> str:
        if p is None:
            return "| — | — | — | — "
        return f"| {p['per_second']:,.0f} | {p['p50_ms']} | {p['p95_ms']} | {p['p99_ms']} "

    latency = [f"| {name} (direct `store.get`) {cell(r['direct'])}|" for name, r in rows.items()]
    latency += [f"| {name} (read API, HTTP) {cell(r['api'])}|" for name, r in rows.items()]
    latency += [f"| {name} (handler alone) {cell(r['handler'])}|" for name, r in rows.items()]
    priced = costs(rows)
    memory_headers = " | ".join(f"read API, {m} MB (billed ms)" for m in MEMORIES_MB)
    cost_rows = []
    for c in priced:
        direct = "—" if c["direct_dollars"] is None else f"${c['direct_dollars']:.3f}"
        api = " | ".join(
            f"${c['api'][m]['dollars']:.3f} ({c['api'][m]['billed_ms']})" for m in MEMORIES_MB
        )
        cost_rows.append(f"| {c['read']} | {c['read_units']:g} | {direct} | {api} |")
    return "\n".join(
        [
            "## The read API",
            "",
            "Generated by `benchmarks/read_api.py --write docs/benchmarks.md` (part of "
            f"`make bench`). Run {when}. {reads} reads of each kind, one after another, on the "
            "local stack (moto's server): **direct** is `store.get` in process; **read API** "
            "is a SigV4-signed GET over a kept-alive HTTP connection to the local function URL "
            "(signature checked, the real handler, `vhs.local.read_api`); **handler alone** is "
            "the handler called in process with the function URL's event (its routing, "
            "validation and response, plus the store's calls). Requests per second are one "
            "client's, sequential: the local function URL runs one invocation at a time, as "
            "one Lambda sandbox does; on AWS, concurrency comes from more sandboxes.",
            "",
            "| read | requests/s | p50 ms | p95 ms | p99 ms |",
            "| --- | ---: | ---: | ---: | ---: |",
            *latency,
            "",
            "Cost per million reads on AWS (us-east-1, on demand, arm64, pricing.py): DynamoDB "
            "read units of the item as stored (strongly consistent, 1 per started 4 KB), S3 "
            "GETs, and for the read API the Lambda request ($0.20 per million) and its "
            "GB-seconds; the function URL adds nothing per request (API Gateway would add "
            "$1.00 (HTTP API) or $3.50 (REST API) per million). The billed duration is a model: "
            f"GetItem {AWS_GETITEM_MS:g} ms and S3 GET {AWS_S3_GET_MS:g} ms from a warm "
            "function, plus the handler's own time measured here (handler alone less the "
            f"direct read), scaled by {VCPU_MB} MB / memory below one vCPU. A 304 reads the "
            "item and no body; a body over the response limit (4.45 MiB) costs the same as the "
            "64 KiB row in Lambda, and the consumer's GET of the presigned URL is the S3 GET.",
            "",
            f"| read | read units | direct library read | {memory_headers} |",
            "| --- | ---: | ---: | " + " | ".join("---:" for _ in MEMORIES_MB) + " |",
            *cost_rows,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", metavar="PATH", help="write the section into this Markdown")
    args = parser.parse_args()
    rows = measure(args.reads)
    if args.json:
        print(json.dumps({"measured": rows, "costs": costs(rows)}, indent=2))
        return
    from datetime import UTC, datetime

    from benchmarks.sections import write_section

    text = report(rows, args.reads, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    print(text)
    if args.write:
        write_section(args.write, "read-api", text)


if __name__ == "__main__":
    main()
