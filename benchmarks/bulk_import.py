"""Bulk import against the queue path (issue 15): records per second of a local `vhs import`
and of `vhs send` plus the local pipeline on the same records, side by side in one run, and
the dollars per million records each costs on AWS.

    .venv/bin/python benchmarks/bulk_import.py                 5,000 records, print the tables
    .venv/bin/python benchmarks/bulk_import.py --quick         500 records (smoke)
    .venv/bin/python benchmarks/bulk_import.py --write PATH    ... and write its section of PATH

`--write` replaces only the section between `<!-- import:start -->` and `<!-- import:end -->`.

Both paths run on one moto server, with and without the per-request latency of
benchmarks/latency.py (published figures: DynamoDB 5 ms, S3 20 ms, SQS 20 ms), on the same
records (benchmarks/pipeline.py's catalogue mix without its 1-5 MB class), each into a fresh
store, after a warm-up of 20 records:

* **queue path**: benchmarks/pipeline.py's `run_vhs`: the producer (`vhs send`'s, without its
  own validation: the handler validates) feeds the local stack's ingest queue while the
  event-source emulator runs the real ingest handler; timed until the queue is empty.
* **vhs import**: the command's own run (`vhs.cli.importer.open_run`) over one JSON Lines file
  of the same records: the contract, coalescing, 16 writes at a time, the report and the
  checkpoint.

Dollars per million records on AWS (US East, on demand; prices in benchmarks/pricing.py with
their sources) are computed from what each run sent per record (DynamoDB, S3 and SQS
requests, counted here) and a model of the Lambda time each needs: its CPU per record as
measured here, plus the requests' published latencies divided by the writes it keeps in
flight (ingest: a batch of 10; import: 16). DynamoDB's capacity is priced on the items as
stored (one write, one eventually consistent read per record, both paths alike). The import
adds Step Functions (one Standard child per chunk of 2,000 lines, about 2 state transitions
each, and a few transitions per execution) and S3 GETs of the files (one per file for the
plan, one per chunk); the queue path adds SQS (send, receive and delete, batches of 10).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAMBDAS = ROOT / "lambdas"
for path in (ROOT, LAMBDAS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks import sections  # noqa: E402
from benchmarks.latency import InjectedLatency, delays_ms  # noqa: E402
from benchmarks.pipeline import VHS, WARM_UP, Meter, Throughput, messages, run_vhs  # noqa: E402
from benchmarks.pricing import PRICES, item_size, read_units, write_units  # noqa: E402
from vhs import resources  # noqa: E402
from vhs.local.stack import LocalStack, MotoServer, client  # noqa: E402

SECTION = "import"
IMPORT = "vhs import"
QUEUE = "vhs send + pipeline"
IMPORT_WORKERS = 16
QUEUE_IN_FLIGHT = resources.INGEST.batch_size  # the handler stores a batch's 10 at once
CONDITIONS = (False, True)  # injected latency off, on
# The export the AWS costs assume: a first load of a million records in ten files. An
# execution's own state transitions, the plan's GET of each file and the manifest are shared
# by its records.
EXPORT_RECORDS = 1_000_000
EXPORT_FILES = 10
EXECUTION_TRANSITIONS = 8  # start, Plan, the Map state, the end, and their retries' margin
# A chunk's child (STANDARD: docs/import.md, "AWS limits"): its Task and its end.
CHILD_TRANSITIONS = 2


@dataclass(frozen=True)
class Settings:
    name: str
    records: int


FULL = Settings("full", 5000)
QUICK = Settings("quick", 500)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    )
    return path


def run_import(
    endpoint: str, files: list[Path], meter: Meter, tag: str, records: int
) -> tuple[list[Throughput], str]:
    """`vhs import` of each file (the first is the warm-up) into a fresh local store; the
    runs after the warm-up, and the store's table."""
    from vhs.cli.importer import open_run
    from vhs.ingest.bulk import CsvMapping
    from vhs.ingest.ingestor import Ingestor
    from vhs.store import VersionedHybridStore

    stack = LocalStack(
        endpoint,
        table_name=f"imp-{tag}",
        bucket_name=f"imp-bodies-{tag}",
        pipeline=False,
    ).provision()
    store = VersionedHybridStore(
        stack.table_name,
        stack.bucket_name,
        s3_client=client("s3", endpoint),
        dynamodb_client=client("dynamodb", endpoint),
    )
    ingestor = Ingestor(store, sqs_client=None, dlq_url="", staging=None)
    results = []
    for n, file in enumerate(files):
        started = meter.start()
        imported = open_run(
            [str(file)],
            fmt="jsonl",
            mapping=CsvMapping(),
            report_path=file.with_suffix(f".{tag}.report.jsonl"),
            resume=False,
            workers=IMPORT_WORKERS,
            ingestor=ingestor,
        )
        try:
            tally = imported.run()
        finally:
            imported.worker.close()
            imported.report.close()
        measured = meter.stop(IMPORT, records if n else WARM_UP, started)
        if not tally.ok:
            raise RuntimeError(f"the import refused or failed lines: {tally.as_json()}")
        if n:
            results.append(measured)
    return results, stack.table_name


def capacity(endpoint: str, table: str) -> dict[str, float]:
    """Write and read units per record, priced on the items as stored: a first write of each
    (units of the item after it) and the read before it (no item yet: half a unit)."""
    dynamodb = client("dynamodb", endpoint)
    writes = items = 0
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            writes += write_units(0, item_size(item), succeeded=True)
            items += 1
    return {"write_units": writes / items, "read_units": read_units(0, consistent=False)}


def dollars_per_million(result: dict[str, Any], on: bool) -> dict[str, dict[str, float]]:
    """$ per million records, by component, of each path (see the module docstring)."""
    delays = delays_ms()
    units = result["capacity"]
    prices, shape = PRICES, resources.BULK_IMPORT
    bills: dict[str, dict[str, float]] = {}
    for name, in_flight, memory_mb in (
        (QUEUE, QUEUE_IN_FLIGHT, resources.INGEST.function_memory_mb),
        (IMPORT, IMPORT_WORKERS, shape.function_memory_mb),
    ):
        t: Throughput = result["throughput"][(on, name)]
        waited = sum(
            t.requests_per_record(service) * delays[service] / 1000
            for service in ("dynamodb", "s3")
        )
        seconds = t.client_cpu / t.records + waited / in_flight
        gb_seconds = seconds * memory_mb / 1024
        bill = {
            "dynamodb": units["write_units"] * prices.dynamodb_write_unit_per_million
            + units["read_units"] * prices.dynamodb_read_unit_per_million,
            # Body PUTs, one per body over the inline threshold (these records need no claim
            # check, and the local file no request).
            "s3 bodies": t.requests_per_record("s3") * prices.s3_put_per_million,
            "lambda": gb_seconds * 1e6 * prices.lambda_arm_gb_second
            + (1 / resources.INGEST.batch_size if name == QUEUE else 1 / shape.chunk_lines)
            * prices.lambda_request_per_million,
        }
        if name == QUEUE:
            bill["sqs"] = t.requests_per_record("sqs") * prices.sqs_requests_per_million
        else:
            chunks_per_record = 1 / shape.chunk_lines
            # A GET per chunk, per file (the plan) and of the manifest; a PUT of the manifest.
            bill["s3 source GETs"] = (
                chunks_per_record + (EXPORT_FILES + 1) / EXPORT_RECORDS
            ) * prices.s3_get_per_million + prices.s3_put_per_million / EXPORT_RECORDS
            bill["step functions"] = (
                (chunks_per_record * CHILD_TRANSITIONS + EXECUTION_TRANSITIONS / EXPORT_RECORDS)
                * prices.step_functions_transition_per_thousand
                * 1000
            )
        bill["total"] = sum(bill.values())
        bill["lambda_seconds_per_record"] = seconds
        bills[name] = bill
    return bills


def run(settings: Settings, console: Console) -> dict[str, Any]:
    started = time.monotonic()

    def say(text: str) -> None:
        console.print(f"[dim]{time.monotonic() - started:6.1f}s[/] {text}")

    records = messages(settings.records)
    warm = messages(WARM_UP, offset=1)
    say(f"{settings.records} records (+{WARM_UP} to warm up), catalogue mix without 1-5 MB")
    throughput: dict[tuple[bool, str], Throughput] = {}
    result: dict[str, Any] = {"settings": settings, "records": settings.records}
    with (
        InjectedLatency() as latency,
        tempfile.TemporaryDirectory() as scratch,
        MotoServer() as server,
    ):
        files = [
            write_jsonl(Path(scratch) / "warm.jsonl", warm),
            write_jsonl(Path(scratch) / "catalogue.jsonl", records),
        ]
        meter = Meter(server.process.pid if server.process else None, latency)
        for on in CONDITIONS:
            tag = "l" if on else "n"
            with latency.enabled(on):
                say(f"latency {'on' if on else 'off'}: vhs import")
                (imported,), table = run_import(
                    server.endpoint, files, meter, tag, settings.records
                )
                say(f"latency {'on' if on else 'off'}: vhs send + the local pipeline")
                (queued,) = run_vhs(
                    server.endpoint,
                    [warm, records],
                    Path(scratch) / f"ingest-{tag}.log",
                    meter,
                    name=VHS,
                    tag=f"imp-{tag}",
                    window=50 if on else 20,
                )
            throughput[(on, IMPORT)] = imported
            throughput[(on, QUEUE)] = queued
            say(
                f"latency {'on' if on else 'off'}: import {imported.per_second:.0f} records/s, "
                f"queue {queued.per_second:.0f} records/s"
            )
            if not on:
                result["capacity"] = capacity(server.endpoint, table)
    result["throughput"] = throughput
    result["seconds"] = time.monotonic() - started
    return result


def tables(result: dict[str, Any]) -> tuple[Table, Table]:
    speed = Table(title=f"records/s, {result['records']:,} records")
    for column in (
        "latency",
        "path",
        "records/s",
        "x queue path",
        "requests/record (ddb, s3, sqs)",
    ):
        speed.add_column(column)
    for row in speed_rows(result):
        speed.add_row(*row)
    cost = Table(title="$ per million records on AWS (model)")
    for column in cost_columns():
        cost.add_column(column)
    for row in cost_rows(result):
        cost.add_row(*row)
    return speed, cost


def speed_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for on in CONDITIONS:
        queue = result["throughput"][(on, QUEUE)]
        for name in (IMPORT, QUEUE):
            t: Throughput = result["throughput"][(on, name)]
            per = ", ".join(f"{t.requests_per_record(s):.2f}" for s in ("dynamodb", "s3", "sqs"))
            rows.append(
                [
                    "injected" if on else "none",
                    name,
                    f"{t.per_second:,.0f}",
                    f"{t.per_second / queue.per_second:.2f}x",
                    per,
                ]
            )
    return rows


COMPONENTS = ("dynamodb", "s3 bodies", "lambda", "sqs", "s3 source GETs", "step functions")


def cost_columns() -> list[str]:
    return ["path", *COMPONENTS, "total", "Lambda s/record"]


def cost_rows(result: dict[str, Any]) -> list[list[str]]:
    bills = dollars_per_million(result, on=True)
    return [
        [
            name,
            *(f"${bill[c]:.3f}" if c in bill else "-" for c in COMPONENTS),
            f"${bill['total']:.3f}",
            f"{bill['lambda_seconds_per_record'] * 1000:.2f} ms",
        ]
        for name, bill in bills.items()
    ]


def markdown(result: dict[str, Any]) -> str:
    def table(head: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)

    bills = dollars_per_million(result, on=True)
    ratio = bills[QUEUE]["total"] / bills[IMPORT]["total"]
    speed_head = ["latency", "path", "records/s", "x queue path", "requests/record (ddb, s3, sqs)"]
    return "\n".join(
        [
            "## Bulk import against the queue path (issue 15)",
            "",
            f"`{sys.executable.rsplit('/', 1)[-1]} benchmarks/bulk_import.py` "
            f"({result['settings'].name}: {result['records']:,} records of the catalogue mix "
            f"without its 1-5 MB class; {platform.machine()}, one moto server, "
            f"{result['seconds']:.0f} s). `vhs import` of a JSON Lines file against "
            "`vhs send` and the local ingest pipeline on the same records, each into a "
            "fresh store, without and with the published per-request latencies.",
            "",
            table(speed_head, speed_rows(result)),
            "",
            "$ per million records on AWS (US East, on demand), with injected latency's "
            f"requests per record, for an export of {EXPORT_RECORDS:,} records in "
            f"{EXPORT_FILES} files (chunks of {resources.BULK_IMPORT.chunk_lines:,} lines); "
            "Lambda time is modelled as the CPU per record measured "
            "here plus the requests' latency over the writes in flight (ingest 10, import "
            "16). DynamoDB is the same for both paths: one write of each item as stored "
            f"({result['capacity']['write_units']:.2f} write units a record on average) and "
            "the read before it.",
            "",
            table(cost_columns(), cost_rows(result)),
            "",
            f"The queue path costs {ratio:.2f}x the import per record. The difference is "
            "SQS (send, receive and delete per 10 records) and 200 times the Lambda "
            "invocations (a batch of 10 records against a chunk of 2,000); both write the "
            "same DynamoDB items, which dominate either bill. "
            "Not in the model: the producer's own compute (the queue path's CPU here "
            "includes the producer, so its Lambda figure is an upper bound), empty SQS "
            "receives, and the import's plan, which reads every file once more.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 records")
    parser.add_argument("--records", type=int, help="how many records (default 5,000)")
    parser.add_argument("--write", metavar="PATH", help="write this section of PATH")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.records:
        settings = Settings("custom", args.records)
    console = Console()
    result = run(settings, console)
    for table in tables(result):
        console.print(table)
    if args.write:
        sections.write_section(Path(args.write), SECTION, markdown(result))
        console.print(f"wrote the {SECTION} section of {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
