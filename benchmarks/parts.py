"""A record with two large parts: VHS against pynamodb_mate's LargeAttributeMixin with two large
attributes, requests counted and billed per operation."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pynamodb_mate.api as pm

from vhs.local.stack import MotoServer, client

from .common import Progress, Report, now, table
from .measure import combine
from .pricing import Bill, Biller
from .systems import PynamodbMateStore, VhsSystem
from .workload import canonical

UPDATES = 5
T0 = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = [
    "".join(
        random.Random(n).choices("abcdefghijklmnopqrstuvwxyz", k=random.Random(n).randint(2, 9))
    )
    for n in range(3000)
]
OPERATIONS = ("create", "update JSON only", "update one part (OCR)", "read JSON + both parts")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ids", type=int, help="records (default 20, quick 3)")


def catalogue_record(id: str, edit: int) -> dict[str, Any]:
    """About 2 KB of catalogue JSON; `edit` changes one field, as a cataloguer's edit does."""
    rng = random.Random(id)
    return {"id": id, "title": " ".join(rng.choices(WORDS, k=12)),
            "contributors": [" ".join(rng.choices(WORDS, k=3)) for _ in range(6)],
            "subjects": [" ".join(rng.choices(WORDS, k=4)) for _ in range(12)],
            "notes": " ".join(rng.choices(WORDS, k=120)), "edit": edit}  # fmt: skip


def ocr(id: str, revision: int) -> bytes:
    return " ".join(random.Random(f"ocr/{id}/{revision}").choices(WORDS, k=4000)).encode()[:20_000]


@dataclass
class Caller:
    """One system as the benchmark calls it: put(id, record, parts, at, first), read(id)."""

    name: str
    biller: Biller
    put: Callable[[str, Any, dict[str, bytes], datetime, bool], Any]
    read: Callable[[str], Any]


def callers(endpoint: str, probe: Any) -> list[Caller]:
    """VHS with its defaults; pynamodb_mate with the JSON an ordinary attribute and the scan and
    the OCR text large attributes, the clean-up flags of its documentation."""
    s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)
    vhs = VhsSystem(s3, dynamodb, probe, table="parts-vhs", bucket="parts-vhs")
    peer = PynamodbMateStore(client("s3", endpoint), endpoint, probe, table="parts-pm",
                             bucket="parts-pm", large=("scan", "ocr"),
                             record=pm.UnicodeAttribute())  # fmt: skip

    def read(id: str) -> int:
        record = vhs.store.get(id)
        return len(record.body) + sum(len(record.part(name)) for name in record.parts)

    return [
        Caller("VHS", vhs.biller, lambda id, record, parts, at, first: vhs.store.put(
            id, record, updated_at=at, parts=parts), read),
        Caller(peer.name, peer.biller, lambda id, record, parts, at, first: peer.put(
            id, record, at, exists=not first, parts=parts, record=canonical(record).decode()),
            peer.get),
    ]  # fmt: skip


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
            id, when = f"doc-{n:03d}", T0
            parts = {"scan": random.Random(f"scan/{id}").randbytes(200_000), "ocr": ocr(id, 0)}
            record = catalogue_record(id, 0)
            billed(system, "create", lambda: system.put(id, record, parts, when, True))  # noqa: B023
            for edit in range(1, 2 * UPDATES + 1):
                when += timedelta(hours=1)
                if edit <= UPDATES:
                    operation, record = "update JSON only", catalogue_record(id, edit)
                else:
                    operation, parts = (
                        "update one part (OCR)",
                        {**parts, "ocr": ocr(id, edit - UPDATES)},
                    )
                billed(system, operation, lambda: system.put(id, record, parts, when, False))  # noqa: B023
            billed(system, "read JSON + both parts", lambda: system.read(id))  # noqa: B023
    return {name: {o: combine(bs) for o, bs in by_operation.items()}
            for name, by_operation in bills.items()}  # fmt: skip


def requests(bill: Bill) -> str:
    counts = [f"{op} {n / bill.operations:g}" for op, n in sorted(bill.requests.items()) if n]
    units = f"{bill.write_units / bill.operations:g} WU, {bill.read_units / bill.operations:g} RU"
    return ", ".join([*counts, units])


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    ids = options.ids or (3 if args.quick else 20)
    with MotoServer() as server:
        probe = client("dynamodb", server.endpoint)
        results = measure(callers(server.endpoint, probe), ids)
    names = list(results)
    rows = [[o, *(c for s in names for c in (requests(results[s][o]),
                                              f"{results[s][o].per_million():.2f}"))]
            for o in OPERATIONS]  # fmt: skip
    headers = ["operation", *(h for s in names for h in (f"{s} requests", f"{s} $/M"))]
    text = f"Run {now()}: {ids} ids.\n\n" + table(headers, rows)
    return Report({"parts": text}, results)
