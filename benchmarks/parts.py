"""docs/benchmarks.md, "A record with two parts": VHS against pynamodb_mate."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from vhs_ops.local.stack import MotoServer, client

from .common import Progress, Report, now, table
from .measure import combine
from .pricing import Bill
from .report import requests_cell, units_cell
from .systems import PynamodbMateStore, VhsSystem

UPDATES = 5
T0 = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = [
    "".join(
        random.Random(n).choices("abcdefghijklmnopqrstuvwxyz", k=random.Random(n).randint(2, 9))
    )
    for n in range(3000)
]
OPERATIONS = ("create", "update JSON only", "update one part (OCR)", "read JSON + both parts")
OPTIONS = {"--ids": (int, 20, 3, "records")}


def catalogue_record(id: str, edit: int) -> dict[str, Any]:
    """About 2 KB of catalogue JSON; `edit` changes one field, as a cataloguer's edit does."""
    rng = random.Random(id)
    return {"id": id, "title": " ".join(rng.choices(WORDS, k=12)),
            "contributors": [" ".join(rng.choices(WORDS, k=3)) for _ in range(6)],
            "subjects": [" ".join(rng.choices(WORDS, k=4)) for _ in range(12)],
            "notes": " ".join(rng.choices(WORDS, k=120)), "edit": edit}  # fmt: skip


def ocr(id: str, revision: int) -> bytes:
    return " ".join(random.Random(f"ocr/{id}/{revision}").choices(WORDS, k=4000)).encode()[:20_000]


def measure(systems: list[Any], ids: int) -> dict[str, dict[str, Bill]]:
    """Bills per operation per system, each the mean over `ids` records: a create, UPDATES
    updates of the JSON alone, UPDATES of the OCR text alone, a read of all three."""
    bills: dict[str, dict[str, list[Bill]]] = {s.name: {o: [] for o in OPERATIONS} for s in systems}

    def billed(system: Any, operation: str, action: Callable[[], Any]) -> None:
        with system.biller.bill() as bill:
            action()
        bills[system.name][operation].append(bill)

    for system in systems:
        for n in range(ids):
            id = f"doc-{n:03d}"
            parts = {"scan": random.Random(f"scan/{id}").randbytes(200_000), "ocr": ocr(id, 0)}
            record = catalogue_record(id, 0)
            for edit in range(2 * UPDATES + 1):
                when = T0 + timedelta(hours=edit)
                if 0 < edit <= UPDATES:
                    record = catalogue_record(id, edit)
                elif edit > UPDATES:
                    parts = {**parts, "ocr": ocr(id, edit - UPDATES)}
                operation = OPERATIONS[0 if not edit else 1 if edit <= UPDATES else 2]
                billed(system, operation, partial(system.put, id, record, when, exists=edit > 0,
                                                  parts=parts))  # fmt: skip
            billed(system, OPERATIONS[3], partial(system.get, id))
    return {name: {o: combine(bs) for o, bs in by_operation.items()}
            for name, by_operation in bills.items()}  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    with MotoServer() as server:
        s3, dynamodb, probe = (
            client(name, server.endpoint) for name in ("s3", "dynamodb", "dynamodb")
        )
        vhs = VhsSystem(s3, dynamodb, probe, table="parts-vhs")
        peer = PynamodbMateStore(client("s3", server.endpoint), server.endpoint, probe,
                                 table="parts-pm", large=("scan", "ocr"))  # fmt: skip
        results = measure([vhs, peer], options.ids)
    names = list(results)

    def cells(bill: Bill) -> list[str]:
        return [f"{requests_cell(bill)} · {units_cell(bill)}", f"{bill.per_million():.2f}"]

    rows = [[o, *(c for s in names for c in cells(results[s][o]))] for o in OPERATIONS]
    headers = ["operation", *(h for s in names for h in (f"{s} requests", f"{s} $/M"))]
    text = f"Run {now()}: {options.ids} ids.\n\n" + table(headers, rows)
    return Report({"parts": text}, results)
