"""The byte accounting of a steady-state record's item in each layout (docs/benchmarks.md,
"The item layout"): the same record and edits written by a store laying its items out in the
text layout (the layout before) and in the compact one, side by side in one run.

Sizes are DynamoDB's, by the rules of its developer guide ("Item sizes and formats",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
names and strings in UTF-8 bytes, binary values by their length, numbers by their significant
digits, lists and maps 3 bytes and 1 an element. The one sizer is `vhs.index.size.item_size`
(benchmarks.pricing.item_size), as every benchmark bills; this only splits its total by field.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from typing import Any

from vhs.index.codec import raw_entries
from vhs.index.layouts import Layout
from vhs.index.size import item_size, value_size
from vhs_ops.local.stack import MotoServer, client

from . import pricing, workload
from .common import Progress, Report, run_line, table
from .report import dollars
from .systems import VhsSystem
from .workload import Samples

OPTIONS = {
    "--puts": (int, 11, 11, "puts of the record: a create, then edits"),
    "--records": (int, 150, 20, "small records of the size mix in the bound's sample"),
}
MIX_PUTS = 10  # the steady-state mix's puts of each record (docs/benchmarks.md, "Workload")
# What each field of an entry holds, in the order the table lists them.
FIELDS = {
    "t": "the ordering timestamp",
    "h": "the version's sha256",
    "n": "the size",
    "w": "the written-at time (retention's clock)",
    "k": "the writer token",
    "z": "the codec of b",
    "b": "the body: zlib (current) or a delta (earlier versions)",
}
ENTRY = "entry overhead"  # each entry's map (3 bytes) and its element in `c` or `p` (1)
ITEM = "item: id, v, c, p"  # the item's own attributes and the lists' overhead


def accounting(raw: dict[str, Any]) -> Counter[str]:
    """An item's bytes by field, summed over its entries (a field's name, its value and the
    byte it takes as a map element), with the entries' and the item's overheads: the parts
    add up to item_size(raw)."""
    counts: Counter[str] = Counter()
    for entry in raw_entries(raw):
        counts[ENTRY] += 1 + 3
        for name, value in entry["M"].items():
            counts[name] += 1 + len(name.encode()) + value_size(value)
    counts[ITEM] = item_size(raw) - sum(counts.values())
    return counts


def write_units(size: int) -> int:
    return pricing.write_units(size, size, succeeded=True)


def bytes_only(raw: dict[str, Any]) -> int:
    """The smallest item that could hold what `raw` holds, whatever its layout: its id and the
    compressed bytes of its entries (`b`), with no name, hash, time, size, token or overhead."""
    return value_size(raw["id"]) + sum(
        value_size(e["M"]["b"]) for e in raw_entries(raw) if "b" in e["M"]
    )


def layout_bound(server: Any, records: int, progress: Progress) -> list[list[str]]:
    """Mean write units of each small put of the size mix's steady-state workload (a create
    and edits, docs/benchmarks.md "Workload"), billed on the compact item and on bytes_only:
    how far any layout of the same compressed bytes could take the small class."""
    bodies = [b for b in workload.size_mix(1000) if b.size_class == "small"][:records]
    probe = client("dynamodb", server.endpoint)
    system = VhsSystem(client("s3", server.endpoint), client("dynamodb", server.endpoint),
                       probe, table="layout-bound")  # fmt: skip
    units = {"compact": [[0] * MIX_PUTS for _ in bodies], "bound": [[0] * MIX_PUTS for _ in bodies]}
    for n, body in enumerate(bodies):
        progress(f"bound: record {n + 1} of {len(bodies)}, {MIX_PUTS} puts")
        rng, record, before = random.Random(f"{workload.SEED}/bound/{n}"), body.record, {}
        for put in range(MIX_PUTS):
            if put:
                record = workload.revise(record, rng, workload.timestamp(put))
            system.put(body.id, record, workload.timestamp(put), exists=put > 0)
            raw = probe.get_item(TableName=system.table, Key={"id": {"S": body.id}})["Item"]
            for name, size in (("compact", item_size(raw)), ("bound", bytes_only(raw))):
                units[name][n][put] = pricing.write_units(before.get(name, 0), size,
                                                          succeeded=True)  # fmt: skip
                before[name] = size

    def mean(name: str, puts: int) -> float:
        return sum(sum(row[:puts]) for row in units[name]) / (puts * len(bodies))

    mixes = (("puts 1-2 (the two-version mix)", 2),
             (f"puts 1-{MIX_PUTS} (the steady-state mix)", MIX_PUTS))  # fmt: skip
    return [[label, f"{mean('compact', puts):.3f}", f"{mean('bound', puts):.3f}"]
            for label, puts in mixes]  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    record = Samples.build().small[0]
    rng = random.Random(f"{workload.SEED}/item-layout")
    versions = [record]
    for day in range(2, options.puts + 1):
        versions.append(workload.revise(versions[-1], rng, workload.timestamp(day)))
    items: dict[Layout, dict[str, Any]] = {}
    with MotoServer() as server:
        probe = client("dynamodb", server.endpoint)
        for layout in (Layout.TEXT, Layout.COMPACT):
            progress(f"{options.puts} puts of a {len(workload.canonical(record))}-byte record, "
                     f"{layout} layout")  # fmt: skip
            system = VhsSystem(client("s3", server.endpoint), client("dynamodb", server.endpoint),
                               probe, table=f"layout-{layout}", name=str(layout),
                               layout=layout)  # fmt: skip
            for day, version in enumerate(versions, start=1):
                system.put("steady", version, workload.timestamp(day), exists=day > 1)
            items[layout] = probe.get_item(TableName=system.table,
                                           Key={"id": {"S": "steady"}})["Item"]  # fmt: skip
        bound = layout_bound(server, options.records, progress)
    counts = {layout: accounting(raw) for layout, raw in items.items()}
    sizes = {layout: item_size(raw) for layout, raw in items.items()}
    problems = [f"{layout}: the fields add up to {sum(c.values())}, not {sizes[layout]}"
                for layout, c in counts.items() if sum(c.values()) != sizes[layout]]  # fmt: skip
    text, compact = counts[Layout.TEXT], counts[Layout.COMPACT]
    entries = len(raw_entries(items[Layout.COMPACT]))
    rows = [[f"`{name}`", what, f"{text[name]:,}", f"{compact[name]:,}",
             f"{text[name] - compact[name]:,}"] for name, what in FIELDS.items()]  # fmt: skip
    others = sorted((set(text) | set(compact)) - {*FIELDS, ENTRY, ITEM})
    rows += [[f"`{n}`", "", f"{text[n]:,}", f"{compact[n]:,}", f"{text[n] - compact[n]:,}"]
             for n in others]  # fmt: skip
    for name in (ENTRY, ITEM):
        rows.append([name, "", f"{text[name]:,}", f"{compact[name]:,}",
                     f"{text[name] - compact[name]:,}"])  # fmt: skip
    t_size, c_size = sizes[Layout.TEXT], sizes[Layout.COMPACT]
    rows.append(["**item**", f"{entries} entries", f"**{t_size:,}**", f"**{c_size:,}**",
                 f"**{t_size - c_size:,}**"])  # fmt: skip
    storage = {layout: size + pricing.DYNAMODB_ITEM_OVERHEAD for layout, size in sizes.items()}
    month = {layout: b / pricing.GB * pricing.PRICES.dynamodb_storage_per_gb_month * 1e6
             for layout, b in storage.items()}  # fmt: skip
    summary = table(
        ["", "text layout", "compact layout"],
        [["write units of an update of this item", write_units(t_size), write_units(c_size)],
         ["stored bytes (item + 100)", f"{storage[Layout.TEXT]:,}",
          f"{storage[Layout.COMPACT]:,}"],
         ["$ per million such records per month (DynamoDB storage)",
          dollars(month[Layout.TEXT]), dollars(month[Layout.COMPACT])]],
    )  # fmt: skip
    body = "\n\n".join([
        run_line("full" if not args.quick else "quick", progress.elapsed)
        + f" The record: {len(workload.canonical(record)):,} bytes of canonical JSON at its "
        f"first version, {len(workload.canonical(versions[-1])):,} at its last, after "
        f"{options.puts} puts (a create, then edits), with the default retention (5).",
        table(["field", "holds", "text layout (bytes)", "compact layout (bytes)", "saved"],
              rows, right=2),
        summary,
        f"Write units of a small put, mean over {options.records} small records of the size "
        f"mix, {MIX_PUTS} puts each: billed on the compact item, and on the bound, an item of "
        "nothing but the record's id and its compressed bytes (no layout can hold less):",
        table(["puts", "compact layout (WU)", "bound: compressed bytes only (WU)"], bound,
              right=1),
    ])  # fmt: skip
    data = {str(layout): {"item_bytes": sizes[layout], "fields": dict(counts[layout])}
            for layout in items}  # fmt: skip
    return Report({"item-layout": body}, data, problems)
