"""A record with two large parts (issue 15): VHS against pynamodb_mate's LargeAttributeMixin
with two large attributes, requests counted and billed per operation.

    .venv/bin/python benchmarks/parts.py                       print the table
    .venv/bin/python benchmarks/parts.py --write docs/benchmarks.md   # its `parts` section
    .venv/bin/python benchmarks/run.py --only parts [--write PATH]    # the same, from run.py

The record: a 2 KB catalogue JSON record, a 200 KB scan (incompressible) and 20 KB of OCR
text (words, so it compresses). Per id: a create, then five updates that change only the JSON,
then five that change only the OCR text, then a read of the JSON and both parts; every
operation billed alone (requests, and DynamoDB units from item sizes, benchmarks/billing.py)
and averaged over the ids.

The callers are alike: each passes the whole record and both parts on every put, as a caller
that does not track what changed would. VHS is used with its defaults (8 KB inline threshold,
5 retained versions). pynamodb_mate holds the JSON as an ordinary attribute and the scan and
the OCR text as large attributes (S3 URIs), with the clean-up flags of its documentation
(the peer in benchmarks/peers/pynamodb_mate_peer.py, given a second large attribute); it
keeps no history and has no ordering, so its updates are last-writer-wins.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "lambdas"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pynamodb_mate.api as pm  # noqa: E402
from pynamodb_mate.patterns.large_attribute.api import (  # noqa: E402
    LargeAttributeMixin,
    split_s3_uri,
)

from benchmarks.billing import Biller  # noqa: E402
from benchmarks.measure import combine  # noqa: E402
from benchmarks.peers.pynamodb_mate_peer import local_meta  # noqa: E402
from benchmarks.pricing import Bill  # noqa: E402
from benchmarks.systems import VhsSystem  # noqa: E402
from vhs.local.stack import MotoServer, client  # noqa: E402

IDS = 20
UPDATES = 5
T0 = datetime(2026, 11, 1, tzinfo=UTC)
_WORDS = [
    "".join(
        random.Random(n).choices("abcdefghijklmnopqrstuvwxyz", k=random.Random(n).randint(2, 9))
    )
    for n in range(3000)
]


def catalogue_record(id: str, edit: int) -> dict[str, Any]:
    """About 2 KB of catalogue JSON; `edit` changes one field, as a cataloguer's edit does."""
    rng = random.Random(id)
    return {
        "id": id,
        "title": " ".join(rng.choices(_WORDS, k=12)),
        "contributors": [" ".join(rng.choices(_WORDS, k=3)) for _ in range(6)],
        "subjects": [" ".join(rng.choices(_WORDS, k=4)) for _ in range(12)],
        "notes": " ".join(rng.choices(_WORDS, k=120)),
        "edit": edit,
    }


def scan(id: str) -> bytes:
    return random.Random(f"scan/{id}").randbytes(200_000)


def ocr(id: str, revision: int) -> bytes:
    rng = random.Random(f"ocr/{id}/{revision}")
    text = " ".join(rng.choices(_WORDS, k=4000))
    return text.encode()[:20_000]


class VhsParts:
    name = "VHS"

    def __init__(self, endpoint: str, probe: Any) -> None:
        s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)
        self.system = VhsSystem(s3, dynamodb, probe, table="parts-vhs", bucket="parts-vhs")
        self.store = self.system.store
        self.biller = self.system.biller

    def put(self, id: str, record: Any, parts: dict[str, bytes], at: datetime, first: bool) -> str:
        return str(self.store.put(id, record, updated_at=at, parts=parts).outcome)

    def read(self, id: str) -> int:
        record = self.store.get(id)
        return len(record.body) + sum(len(record.part(name)) for name in record.parts)


def two_part_model(table: str, endpoint: str) -> Any:
    meta = local_meta(table, endpoint)

    class ScannedDocument(pm.Model, LargeAttributeMixin):
        Meta = meta
        pk = pm.UnicodeAttribute(hash_key=True)
        update_at = pm.UTCDateTimeAttribute()
        record = pm.UnicodeAttribute()  # the JSON, an ordinary attribute
        scan = pm.UnicodeAttribute(null=True)  # large attributes: their S3 URIs
        ocr = pm.UnicodeAttribute(null=True)

    return ScannedDocument


class PynamodbMateParts:
    name = "pynamodb_mate"

    def __init__(self, endpoint: str, probe: Any) -> None:
        self.s3 = client("s3", endpoint)
        self.model = two_part_model("parts-pm", endpoint)
        self.model.create_table(wait=True)
        self.s3.create_bucket(Bucket="parts-pm")
        self.biller = Biller(probe, [self.s3], [self.model._get_connection().connection.client])

    def put(self, id: str, record: Any, parts: dict[str, bytes], at: datetime, first: bool) -> str:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"))
        common = {
            "s3_client": self.s3,
            "pk": id,
            "sk": None,
            "kvs": parts,
            "bucket": "parts-pm",
            "prefix": "bench/",
            "update_at": at,
        }
        if first:
            self.model.create_large_attribute_item(
                **common,
                attributes={"update_at": at, "record": text},
                clean_up_when_failed=True,
            )
        else:
            self.model.update_large_attribute_item(
                **common,
                update_actions=[self.model.update_at.set(at), self.model.record.set(text)],
                clean_up_when_succeeded=True,
                clean_up_when_failed=True,
            )
        return "stored"

    def read(self, id: str) -> int:
        document = self.model.get(id)
        size = len(document.record)
        for uri in (document.scan, document.ocr):
            bucket, key = split_s3_uri(uri)
            size += len(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        return size


OPERATIONS = ("create", "update JSON only", "update one part (OCR)", "read JSON + both parts")


def measure(systems: Sequence[Any], ids: int = IDS) -> dict[str, dict[str, Bill]]:
    """Bills per operation per system, each averaged over `ids` records."""
    bills: dict[str, dict[str, list[Bill]]] = {s.name: {o: [] for o in OPERATIONS} for s in systems}

    def billed(system: Any, operation: str, action: Callable[[], Any]) -> None:
        with system.biller.bill() as bill:
            action()
        bills[system.name][operation].append(bill)

    for system in systems:
        for n in range(ids):
            id = f"doc-{n:03d}"
            parts = {"scan": scan(id), "ocr": ocr(id, 0)}
            when = T0
            billed(
                system,
                "create",
                lambda: system.put(id, catalogue_record(id, 0), parts, when, True),  # noqa: B023
            )
            for edit in range(1, UPDATES + 1):
                when += timedelta(hours=1)
                billed(
                    system,
                    "update JSON only",
                    lambda: system.put(id, catalogue_record(id, edit), parts, when, False),  # noqa: B023
                )
            for revision in range(1, UPDATES + 1):
                when += timedelta(hours=1)
                parts = {"scan": parts["scan"], "ocr": ocr(id, revision)}
                billed(
                    system,
                    "update one part (OCR)",
                    lambda: system.put(id, catalogue_record(id, UPDATES), parts, when, False),  # noqa: B023
                )
            billed(system, "read JSON + both parts", lambda: system.read(id))  # noqa: B023
    return {
        name: {operation: _mean(bs) for operation, bs in by_operation.items()}
        for name, by_operation in bills.items()
    }


def _mean(bills: Sequence[Bill]) -> Bill:
    total = combine(bills)
    total.operations = len(bills)
    return total


def report(results: dict[str, dict[str, Bill]], when: str, ids: int = IDS) -> str:
    systems = list(results)
    lines = [
        "## A record with two parts (issue 15)",
        "",
        "`benchmarks/parts.py` (also `benchmarks/run.py --only parts`), run "
        f"{when}: a 2 KB JSON record with a 200 KB scan and 20 KB of OCR text, {ids} ids, "
        f"each a create, {UPDATES} updates of the JSON alone, {UPDATES} of the OCR text "
        "alone, and a read of all three; requests per operation and $ per million "
        "operations (US East on-demand prices, benchmarks/pricing.py). Both callers pass the "
        "whole record and both parts on every put. pynamodb_mate: LargeAttributeMixin with "
        "the scan and the OCR text as two large attributes, the JSON an ordinary attribute, "
        "clean-up flags as documented; no history, no ordering.",
        "",
        "| operation | " + " | ".join(f"{s} requests | {s} $/M" for s in systems) + " |",
        "| --- | " + " | ".join("--- | ---:" for _ in systems) + " |",
    ]
    for operation in OPERATIONS:
        cells = []
        for system in systems:
            bill = results[system][operation]
            cells.append(_requests(bill))
            cells.append(f"{bill.per_million():.2f}")
        lines.append(f"| {operation} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Requests are per operation (mean); `WU`/`RU` are DynamoDB write and read units.",
    ]
    return "\n".join(lines) + "\n"


def _requests(bill: Bill) -> str:
    counts = [
        f"{name} {count / bill.operations:g}"
        for name, count in sorted(bill.requests.items())
        if count
    ]
    units = f"{bill.write_units / bill.operations:g} WU, {bill.read_units / bill.operations:g} RU"
    return ", ".join([*counts, units])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="write the `parts` section into PATH")
    parser.add_argument("--ids", type=int, default=IDS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with MotoServer() as server:
        probe = client("dynamodb", server.endpoint)
        systems = [VhsParts(server.endpoint, probe), PynamodbMateParts(server.endpoint, probe)]
        results = measure(systems, args.ids)
    if args.json:
        out = {
            system: {
                operation: {
                    "requests": {k: v / b.operations for k, v in b.requests.items()},
                    "write_units": b.write_units / b.operations,
                    "read_units": b.read_units / b.operations,
                    "dollars_per_million": b.per_million(),
                }
                for operation, b in by_operation.items()
            }
            for system, by_operation in results.items()
        }
        print(json.dumps(out, indent=2))
        return 0
    text = report(results, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), args.ids)
    print(text)
    if args.write:
        from benchmarks.sections import write_section

        write_section(args.write, "parts", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
