"""docs/benchmarks.md, "The read API": latency here and cost per million reads on AWS."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from vhs import settings
from vhs.store import VersionedHybridStore
from vhs_ops.local.invoke import LambdaContext
from vhs_ops.local.read_api import LocalReadApi, function_url_event, signed_headers
from vhs_ops.local.stack import client, local_stack

from .common import ROOT, Progress, Report, now, table
from .pricing import PRICES, item_size, read_units

T = "2026-11-01T09:00:00Z"
SMALL = {"title": "Moby-Dick; or, The Whale", "author": "Herman Melville", "notes": "x" * 600}
LARGE = random.Random("read-api").randbytes(64 * 1024)
# The AWS calls' latency from a warm Lambda in the same region (p50), for the cost model.
AWS_GETITEM_MS = 5.0
AWS_S3_GET_MS = 25.0
VCPU_MB = 1769  # Lambda gives one full vCPU at 1,769 MB, proportionally less below
MEMORIES_MB = (256, 512, 1024)
OPTIONS = {"--reads": (int, 400, 50, "reads of each kind")}


def timed(count: int, call: Callable[[], Any]) -> dict[str, float]:
    call()  # warm: connections, caches, the handler's cold start
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    ordered = sorted(samples)
    found = {f"p{q}_ms": round(ordered[min(count - 1, q * count // 100)] * 1000, 2)
             for q in (50, 95, 99)}  # fmt: skip
    return found | {"per_second": round(count / sum(samples), 1)}


class Client:
    """A consumer: SigV4-signed GETs over one kept-alive connection."""

    def __init__(self, url: str, region: str) -> None:
        self.url, self.region = url, region
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def get(self, target: str, headers: dict[str, str] | None = None) -> int:
        signed = signed_headers("GET", self.url + target, region=self.region, headers=headers)
        self.connection.request("GET", target, headers=signed)
        response = self.connection.getresponse()
        response.read()
        return response.status


def measure(reads: int) -> dict[str, Any]:
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
        consumer, dynamodb = Client(api.url, stack.region), client("dynamodb", stack.endpoint)
        handler = api.handler
        assert handler is not None, "the read API did not start"

        def in_process(target: str, headers: dict[str, str] | None) -> Callable[[], Any]:
            signed = signed_headers("GET", api.url + target, region=stack.region, headers=headers)
            lowered = {name.lower(): value for name, value in signed.items()}
            event = function_url_event("GET", target, lowered, b"", region=stack.region,
                                       access_key="testing")  # fmt: skip
            return lambda: handler(event, LambdaContext())

        cases = {
            "small (inline)": ("small", None),
            "64 KiB (S3)": ("large", None),
            "304 (If-None-Match)": ("small", {"If-None-Match": etag}),
        }
        for name, (id, headers) in cases.items():
            target = f"/records/{id}"
            if consumer.get(target, headers) != (304 if headers else 200):
                raise RuntimeError(f"{name}: the read API answered otherwise")
            item = dynamodb.get_item(TableName=stack.table_name, Key={"id": {"S": id}})["Item"]
            direct = None if headers else timed(reads, lambda i=id: store.get(i))
            with open(os.devnull, "w") as void, contextlib.redirect_stdout(void):
                handler_only = timed(reads, in_process(target, headers))
            rows[name] = {
                "direct": direct,
                # The store's share of the handler's time: a 304 reads as the small read does.
                "baseline": direct or rows["small (inline)"]["direct"],
                "api": timed(reads, lambda t=target, h=headers: consumer.get(t, h)),
                "handler": handler_only,
                "item_bytes": item_size(item),
                "s3_get": id == "large" and not headers,
            }
    return rows


def costs(rows: dict[str, Any]) -> list[list[str]]:
    """Dollars per million reads on AWS: the direct library read and the read API."""
    out = []
    for name, row in rows.items():
        units = read_units(row["item_bytes"], consistent=True)
        storage = units * PRICES.dynamodb_read_unit_per_million
        storage += PRICES.s3_get_per_million if row["s3_get"] else 0.0
        aws_ms = AWS_GETITEM_MS + (AWS_S3_GET_MS if row["s3_get"] else 0.0)
        own_ms = max(0.0, row["handler"]["p50_ms"] - row["baseline"]["p50_ms"])
        cells = []
        for memory in MEMORIES_MB:
            billed_ms = max(1, round(aws_ms + own_ms * max(1.0, VCPU_MB / memory)))
            compute = billed_ms / 1000 * memory / 1024 * PRICES.lambda_arm_gb_second * 1e6
            total = storage + PRICES.lambda_request_per_million + compute
            cells.append(f"${total:.3f} ({billed_ms})")
        out.append([name, f"{units:g}", f"${storage:.3f}" if row["direct"] else "—", *cells])
    return out


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    rows = measure(options.reads)

    def cells(p: dict[str, float] | None) -> list[Any]:
        if p is None:
            return ["—"] * 4
        return [f"{p['per_second']:,.0f}", p["p50_ms"], p["p95_ms"], p["p99_ms"]]

    latency = [[f"{name} ({how})", *cells(r[key])]
               for key, how in (("direct", "direct `store.get`"), ("api", "read API, HTTP"),
                                ("handler", "handler alone"))
               for name, r in rows.items()]  # fmt: skip
    memories = [f"read API, {m} MB (billed ms)" for m in MEMORIES_MB]
    text = "\n\n".join([
        f"Run {now()}: {options.reads} reads of each kind.",
        table(["read", "requests/s", "p50 ms", "p95 ms", "p99 ms"], latency, right=1),
        f"The model: GetItem {AWS_GETITEM_MS:g} ms and S3 GET {AWS_S3_GET_MS:g} ms, plus the "
        f"handler's own time scaled by {VCPU_MB} MB / memory below one vCPU.",
        table(["read", "read units", "direct library read", *memories], costs(rows), right=1),
    ])  # fmt: skip
    return Report({"read-api": text}, rows)
