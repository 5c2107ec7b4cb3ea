"""docs/benchmarks.md, "Bulk import against the queue path": speed, and cost on AWS."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from vhs import shapes
from vhs.ingest.bulk_csv import CsvMapping
from vhs.ingest.ingestor import Ingestor
from vhs_ops.cli.importer import open_run
from vhs_ops.local.stack import MotoServer, client

from .common import Progress, Report, run_line, table
from .pipeline import DELAYS, MAX_WAITING, VHS, WARM_UP, Meter, Throughput, messages, run_vhs
from .pricing import PRICES, item_size, read_units, write_units
from .systems import new_store

IMPORT = "vhs import"
QUEUE = "vhs send + pipeline"
IMPORT_WORKERS = 16
# The export the AWS costs assume: a million records in ten files.
EXPORT_RECORDS = 1_000_000
EXPORT_FILES = 10
EXECUTION_TRANSITIONS = 8  # start, Plan, the Map state, the end, and their retries' margin
CHILD_TRANSITIONS = 2  # a chunk's child (STANDARD): its Task and its end
COMPONENTS = ("dynamodb", "s3 bodies", "lambda", "sqs", "s3 source GETs", "step functions")
OPTIONS = {"--records": (int, 5000, 500, "records")}


def run_import(endpoint: str, files: list[tuple[Path, int]], meter: Meter, tag: str) -> list:
    """`vhs import` of each file (the first is the warm-up) into a fresh local store."""
    store = new_store(client("s3", endpoint), client("dynamodb", endpoint), f"imp-{tag}")
    ingestor = Ingestor(store, sqs_client=None, dlq_url="", staging=None)

    def one(file: Path) -> None:
        imported = open_run([str(file)], fmt="jsonl", mapping=CsvMapping(),
                            report_path=file.with_suffix(f".{tag}.report.jsonl"), resume=False,
                            workers=IMPORT_WORKERS, ingestor=ingestor)  # fmt: skip
        try:
            tally = imported.run()
        finally:
            imported.worker.close()
            imported.report.close()
        if not tally.ok:
            raise RuntimeError(f"the import refused or failed lines: {tally.as_json()}")

    return meter.timed(IMPORT, files, lambda file: one(file[0]), size=lambda file: file[1])


def capacity(endpoint: str, table: str) -> dict[str, float]:
    """Units per record on the items as stored: a first write of each, and the read before it."""
    dynamodb, units = client("dynamodb", endpoint), []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        units += [write_units(0, item_size(item), succeeded=True) for item in page["Items"]]
    return {"write_units": sum(units) / len(units), "read_units": read_units(0, consistent=False)}


def dollars_per_million(throughput: dict, units: dict[str, float]) -> dict[str, dict[str, float]]:
    """$ per million records, by component, of each path (the model: docs/benchmarks.md)."""
    shape, bills = shapes.BULK_IMPORT, {}
    for name, in_flight, memory_mb in (
        (QUEUE, shapes.INGEST.batch_size, shapes.INGEST.function_memory_mb),
        (IMPORT, IMPORT_WORKERS, shape.function_memory_mb),
    ):
        t = throughput[True, name]
        waited = sum(t.requests_per_record(s) * DELAYS[s] / 1000 for s in ("dynamodb", "s3"))
        seconds = t.client_cpu / t.records + waited / in_flight
        per_invocation = 1 / shapes.INGEST.batch_size if name == QUEUE else 1 / shape.chunk_lines
        bill = {
            "dynamodb": units["write_units"] * PRICES.dynamodb_write_unit_per_million
            + units["read_units"] * PRICES.dynamodb_read_unit_per_million,
            "s3 bodies": t.requests_per_record("s3") * PRICES.s3_put_per_million,
            "lambda": seconds * memory_mb / 1024 * 1e6 * PRICES.lambda_arm_gb_second
            + per_invocation * PRICES.lambda_request_per_million,
        }
        if name == QUEUE:
            bill["sqs"] = t.requests_per_record("sqs") * PRICES.sqs_requests_per_million
        else:  # a GET per chunk, per file (the plan) and of the manifest; a PUT of the manifest
            gets = 1 / shape.chunk_lines + (EXPORT_FILES + 1) / EXPORT_RECORDS
            bill["s3 source GETs"] = (gets * PRICES.s3_get_per_million
                                      + PRICES.s3_put_per_million / EXPORT_RECORDS)  # fmt: skip
            transitions = (
                CHILD_TRANSITIONS / shape.chunk_lines + EXECUTION_TRANSITIONS / EXPORT_RECORDS
            )
            bill["step functions"] = (
                transitions * PRICES.step_functions_transition_per_thousand * 1000
            )
        bill["total"] = sum(bill.values())
        bill["lambda_seconds_per_record"] = seconds
        bills[name] = bill
    return bills


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    count = options.records
    records, warm = messages(count), messages(WARM_UP, offset=1)
    throughput: dict[tuple[bool, str], Throughput] = {}
    with Meter() as meter, tempfile.TemporaryDirectory() as scratch, MotoServer() as server:
        meter.pid = server.process.pid if server.process else None
        files = []
        for name, lines in (("warm", warm), ("catalogue", records)):
            files.append((Path(scratch) / f"{name}.jsonl", len(lines)))
            files[-1][0].write_text("".join(json.dumps(r) + "\n" for r in lines))
        for on in (False, True):
            tag, meter.latency = "l" if on else "n", on
            progress(f"latency {on}: vhs import, then vhs send + the local pipeline")
            (throughput[on, IMPORT],) = run_import(server.endpoint, files, meter, tag)
            log = Path(scratch) / f"ingest-{tag}.log"
            (throughput[on, QUEUE],) = run_vhs(server.endpoint, [warm, records], log, meter,
                                               name=VHS, tag=f"imp-{tag}",
                                               window=MAX_WAITING[on])  # fmt: skip
            meter.latency = False
            if not on:
                units = capacity(server.endpoint, f"imp-{tag}")
    speed = []
    for on in (False, True):
        for name in (IMPORT, QUEUE):
            t, queue = throughput[on, name], throughput[on, QUEUE]
            per = ", ".join(f"{t.requests_per_record(s):.2f}" for s in ("dynamodb", "s3", "sqs"))
            speed.append(["injected" if on else "none", name, f"{t.per_second:,.0f}",
                          f"{t.per_second / queue.per_second:.2f}x", per])  # fmt: skip
    bills = dollars_per_million(throughput, units)
    cost = [[name, *(f"${b[c]:.3f}" if c in b else "-" for c in COMPONENTS), f"${b['total']:.3f}",
             f"{b['lambda_seconds_per_record'] * 1000:.2f} ms"]
            for name, b in bills.items()]  # fmt: skip
    text = "\n\n".join([
        run_line("quick" if args.quick else "full", progress.elapsed) + f" {count:,} records.",
        table(["latency", "path", "records/s", "x queue path",
               "requests/record (ddb, s3, sqs)"], speed),
        f"DynamoDB: {units['write_units']:.2f} write units a record on average, and the read "
        f"before it. The queue path costs {bills[QUEUE]['total'] / bills[IMPORT]['total']:.2f}x "
        "the import per record.",
        table(["path", *COMPONENTS, "total", "Lambda s/record"], cost),
    ])  # fmt: skip
    runs = {f"{k[1]}, latency {k[0]}": v for k, v in throughput.items()}
    return Report({"import": text}, {"throughput": runs, "bills": bills})
