"""The GC benchmark's figures, as Markdown tables for docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

from vhs.item import CONDEMNATION_BYTES, ITEM_LIMIT, MAX_CONDEMNED, MAX_CONDEMNED_HELD

from ..common import table

FLAT = 1.10  # peak memory within 10% across sizes: flat
# Objects/s with an attribute per condemned body and a condemnation per orphan: the committed
# run of 2026-11-22 06:00 UTC, same settings and data set.
BEFORE = {10_000: 696, 100_000: 857}
OPERATIONS = ["ListObjectsV2", "HeadObject", "BatchGetItem", "UpdateItem", "DeleteObject"]


def operations(*requests: dict[str, int]) -> list[str]:
    """The operations in `requests`, in the order a collection makes them."""
    found = {name for r in requests for name in r}
    return sorted(found, key=lambda n: (OPERATIONS.index(n) if n in OPERATIONS else 99, n))


def sizes(results: list[dict[str, Any]], baseline: dict[str, Any], run: str) -> str:
    rows = []
    for r in results:
        real, deleted = r["real"], r["real"]["report"]["deleted"]
        rows.append([
            f"{r['objects']:,}", f"{r['orphans']:,}", f"{deleted:,}", f"{real['seconds']:.1f}",
            f"{r['objects'] / real['seconds']:,.0f}", f"{BEFORE.get(r['objects'], '')}",
            f"{deleted / real['seconds']:,.0f}", f"{sum(real['requests'].values()):,}",
            f"{real['cpu_seconds'] / r['objects'] * 1e6:,.0f}", f"{real['cpu_seconds']:.1f}",
            f"{real['moto_cpu_seconds']:.1f}", f"{real['peak_rss_mb']:.1f}",
            f"{r['dry']['traced_peak_mb']:.1f}",
        ])  # fmt: skip
    small, large = results[0], results[-1]
    rss = large["real"]["peak_rss_mb"] / small["real"]["peak_rss_mb"]
    traced = large["dry"]["traced_peak_mb"] / small["dry"]["traced_peak_mb"]
    rows.append([f"ratio ({large['objects'] / small['objects']:.0f}x objects)", *[""] * 10,
                 f"{rss:.2f}x", f"{traced:.2f}x"])  # fmt: skip
    headers = ["Objects", "Orphans", "Deleted", "Seconds", "Objects/s", "Objects/s before",
               "Deleted/s", "Requests", "Collector CPU µs/object", "Collector CPU (s)",
               "moto CPU (s)", "Peak RSS (MB)", "tracemalloc peak (MB)"]  # fmt: skip
    names = operations(*(r["real"]["requests"] for r in results))
    by_operation = [[f"{r['objects']:,}", *(f"{r['real']['requests'].get(n, 0):,}" for n in names)]
                    for r in results]  # fmt: skip
    fixed = [
        ["idle: Python, vhs and botocore imported, S3 and DynamoDB clients built",
         f"{baseline['idle']['peak_rss_mb']:.1f}", ""],
        ["collecting an empty bucket (256 shard listings)",
         f"{baseline['empty']['peak_rss_mb']:.1f}",
         f"{baseline['empty_dry']['traced_peak_mb']:.1f}"],
    ]  # fmt: skip
    per_page = [f"{r['objects'] / 256:,.0f} at {r['objects']:,}" for r in (small, large)]
    verdict = "flat" if rss <= FLAT else "NOT flat"
    return "\n\n".join([
        run,
        f"**Peak RSS {verdict}** (flat: within {FLAT - 1:.0%}): {rss:.2f}x with "
        f"{large['objects'] / small['objects']:.0f}x the objects. Objects per shard's listing "
        f"page: about {' and '.join(per_page)}.",
        table(headers, rows, right=1),
        "Requests of each collection, by operation:",
        table(["Objects", *names], by_operation, right=1),
        table(["Process", "Peak RSS (MB)", "tracemalloc peak (MB)"], fixed),
    ])  # fmt: skip


def hot_id(hot: dict[str, Any], budget: float) -> str:
    names = operations(hot["requests"])
    rows = [
        [str(n), f"{p['report']['orphaned']:,}", f"{p['report']['deleted']:,}", f"{p['left']:,}",
         f"{p['seconds']:.1f}", *(f"{p['requests'].get(k, 0):,}" for k in names),
         f"{p['item_bytes']:,}", f"{p['condemned']:,}"]
        for n, p in enumerate(hot["passes"], start=1)
    ]  # fmt: skip
    largest = hot["largest_item"]
    rows.append([f"all {len(hot['passes'])}", "", f"{hot['deleted']:,}", "",
                 f"{hot['seconds']:.1f}", *(f"{hot['requests'][k]:,}" for k in names),
                 f"largest {largest:,} ({largest / ITEM_LIMIT:.1%} of 400 KB)", ""])  # fmt: skip
    headers = ["Pass", "Orphans found", "Deleted", "Orphans left", "Seconds", *names,
               "Item after the pass (bytes)", "Bodies condemned"]  # fmt: skip
    expiry = hot["passes"][0]["expiry"] + 60
    return "\n\n".join([
        f"{hot['orphans']:,} orphans of one id; the GC Lambda's budget {budget:.0f} s an "
        f"invocation; item uncondemned {hot['item_before']:,} bytes; a condemnation names "
        f"{MAX_CONDEMNED:,} more bodies at a time (`vhs.item.MAX_CONDEMNED`) and holds at most "
        f"{MAX_CONDEMNED_HELD:,} (`vhs.item.CONDEMNATION_BYTES` = {CONDEMNATION_BYTES:,} "
        f"bytes); a next pass would come {expiry:.0f} s after a condemnation.",
        table(headers, rows, right=1),
    ])  # fmt: skip
