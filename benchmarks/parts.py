"""A record with two large parts: VHS against pynamodb_mate's LargeAttributeMixin with two large
attributes, requests counted and billed per operation."""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pynamodb_mate.api as pm
from pynamodb_mate.patterns.large_attribute.api import LargeAttributeMixin, split_s3_uri

from vhs.local.stack import MotoServer, client

from .billing import Biller
from .common import Progress, Report, now, table
from .measure import combine
from .peers.pynamodb_mate_peer import local_meta
from .pricing import Bill
from .systems import VhsSystem

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


class VhsParts:
    name = "VHS"

    def __init__(self, endpoint: str, probe: Any) -> None:
        s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)
        system = VhsSystem(s3, dynamodb, probe, table="parts-vhs", bucket="parts-vhs")
        self.store, self.biller = system.store, system.biller

    def put(self, id: str, record: Any, parts: dict[str, bytes], at: datetime, first: bool) -> None:
        self.store.put(id, record, updated_at=at, parts=parts)

    def read(self, id: str) -> int:
        record = self.store.get(id)
        return len(record.body) + sum(len(record.part(name)) for name in record.parts)


class PynamodbMateParts:
    """The JSON an ordinary attribute, the scan and the OCR text large attributes (S3 URIs),
    with the clean-up flags of its documentation; no history, no ordering."""

    name = "pynamodb_mate"

    def __init__(self, endpoint: str, probe: Any) -> None:
        meta = local_meta("parts-pm", endpoint)

        class ScannedDocument(pm.Model, LargeAttributeMixin):
            Meta = meta
            pk = pm.UnicodeAttribute(hash_key=True)
            update_at = pm.UTCDateTimeAttribute()
            record = pm.UnicodeAttribute()
            scan = pm.UnicodeAttribute(null=True)
            ocr = pm.UnicodeAttribute(null=True)

        self.s3, self.model = client("s3", endpoint), ScannedDocument
        self.model.create_table(wait=True)
        self.s3.create_bucket(Bucket="parts-pm")
        self.biller = Biller(probe, [self.s3], [self.model._get_connection().connection.client])

    def put(self, id: str, record: Any, parts: dict[str, bytes], at: datetime, first: bool) -> None:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        common = {"s3_client": self.s3, "pk": id, "sk": None, "kvs": parts, "bucket": "parts-pm",
                  "prefix": "bench/", "update_at": at}  # fmt: skip
        if first:
            self.model.create_large_attribute_item(
                **common, attributes={"update_at": at, "record": text}, clean_up_when_failed=True
            )
        else:
            self.model.update_large_attribute_item(
                **common,
                update_actions=[self.model.update_at.set(at), self.model.record.set(text)],
                clean_up_when_succeeded=True,
                clean_up_when_failed=True,
            )

    def read(self, id: str) -> int:
        document = self.model.get(id)
        sizes = [len(self.s3.get_object(Bucket=b, Key=k)["Body"].read())
                 for b, k in (split_s3_uri(document.scan), split_s3_uri(document.ocr))]  # fmt: skip
        return len(document.record) + sum(sizes)


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
    means = {}
    for name, by_operation in bills.items():
        means[name] = {o: combine(bs) for o, bs in by_operation.items()}
        for bill in means[name].values():
            bill.operations = ids
    return means


def requests(bill: Bill) -> str:
    counts = [f"{op} {n / bill.operations:g}" for op, n in sorted(bill.requests.items()) if n]
    units = f"{bill.write_units / bill.operations:g} WU, {bill.read_units / bill.operations:g} RU"
    return ", ".join([*counts, units])


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    ids = options.ids or (3 if args.quick else 20)
    with MotoServer() as server:
        probe = client("dynamodb", server.endpoint)
        systems = [VhsParts(server.endpoint, probe), PynamodbMateParts(server.endpoint, probe)]
        results = measure(systems, ids)
    names = list(results)
    rows = [[o, *(c for s in names for c in (requests(results[s][o]),
                                              f"{results[s][o].per_million():.2f}"))]
            for o in OPERATIONS]  # fmt: skip
    headers = ["operation", *(h for s in names for h in (f"{s} requests", f"{s} $/M"))]
    text = f"Run {now()}: {ids} ids.\n\n" + table(headers, rows)
    return Report({"parts": text}, results)
