"""The ingest pipeline's benchmark: records per second through the local pipeline against the
raw floor, and the ingest handler's cold-start import time.

    .venv/bin/python benchmarks/pipeline.py                  print the table
    .venv/bin/python benchmarks/pipeline.py --quick          smoke mode (well under a minute)
    .venv/bin/python benchmarks/pipeline.py --write PATH     ... and write its section of PATH

`--write` replaces only the section between `<!-- pipeline:start -->` and
`<!-- pipeline:end -->` in PATH (appending it if absent), so it runs after benchmarks/run.py,
which writes the rest of docs/benchmarks.md.

* **VHS pipeline**: the producer sends the records (SendMessageBatch) to the local stack's
  ingest queue while the event-source emulator runs the real ingest handler (Powertools, the
  message contract, the store's conditional writes, ten messages of a batch stored
  concurrently) and deletes what it acknowledged. Timed from the first send until the queue
  is empty. The producer keeps at most 20 messages waiting, as a steady feed does: moto's
  SQS costs grow with a queue's depth, which would bill moto rather than the pipeline.
* **raw floor**: the fewest boto3 calls that carry the same records through a queue into a
  table, one after another in one thread: per 10 records one SendMessageBatch, one
  ReceiveMessage, one PutItem each (body inline, with the ordering condition) and one
  DeleteMessageBatch. No DLQ handling, no validation, no history, no integrity checks.
* **writes only** (context): the writes alone, sequential, no queue: VHS's `store.put` and
  the floor's conditional PutItem. With the CPU columns they show where the time goes.

Both run on one moto server in one run, with the same records: the catalogue size mix of
benchmarks/workload.py without its 1% of 1-5 MB records (those travel by claim check, and on
moto their S3 copies swamp the timing; the store benchmark covers them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAMBDAS = ROOT / "lambdas"
for path in (ROOT, LAMBDAS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks import sections, workload  # noqa: E402
from benchmarks.systems import put_if  # noqa: E402
from vhs.ingest.producer import Producer  # noqa: E402
from vhs.local.sqs_source import LocalPipeline  # noqa: E402
from vhs.local.stack import LocalStack, MotoServer, client  # noqa: E402

SECTION = "pipeline"  # docs/benchmarks.md's <!-- pipeline:start --> ... <!-- pipeline:end -->
SEED = 2018
THROUGHPUT_GOAL = 1.0
IMPORT_GOAL_MS = 150.0
MAX_WAITING = 20  # messages the VHS producer lets wait in the queue (two batches)
WARM_UP = 20  # records each system handles before its timed run (cold start excluded)
WRITES_VHS = "writes only: VHS store.put"
WRITES_RAW = "writes only: raw PutItem"


@dataclass(frozen=True)
class Settings:
    mode: str
    records: int
    import_runs: int


FULL = Settings("full", records=1000, import_runs=7)
QUICK = Settings("quick", records=200, import_runs=3)


@dataclass
class Throughput:
    name: str
    records: int
    seconds: float
    server_cpu: float | None = None  # moto server's CPU seconds during the run
    client_cpu: float | None = None  # this process's (all threads)

    @property
    def per_second(self) -> float:
        return self.records / self.seconds

    def per_record_ms(self, cpu: float | None) -> str:
        return "-" if cpu is None else f"{cpu / self.records * 1000:.1f}"


class Meter:
    """Wall time, and CPU time of the moto server (Linux /proc) and of this process."""

    def __init__(self, server_pid: int | None) -> None:
        self.pid = server_pid

    def _server(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start(self) -> tuple[float, float | None, float]:
        return time.perf_counter(), self._server(), time.process_time()

    def stop(self, name: str, records: int, started: tuple[float, float | None, float]):
        wall, server, client = started
        now = self._server()
        return Throughput(
            name,
            records,
            time.perf_counter() - wall,
            None if server is None or now is None else now - server,
            time.process_time() - client,
        )


# --- the records -----------------------------------------------------------------------------


def messages(count: int, offset: int = 0) -> list[dict[str, Any]]:
    """`count` contract messages of the catalogue mix without its large class."""
    bodies = [b for b in workload.size_mix(count * 2, SEED + offset) if b.size_class != "large"]
    at = workload.timestamp(1).isoformat().replace("+00:00", "Z")
    return [
        {"id": f"{b.id}-{offset}", "updated_at": at, "record": b.record} for b in bodies[:count]
    ]


def body(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


# --- VHS: the local pipeline -------------------------------------------------------------------


def run_vhs(
    endpoint: str, batches: list[list[dict[str, Any]]], log: Path, meter: Meter
) -> list[Throughput]:
    stack = LocalStack(
        endpoint,
        table_name="pipe-vhs",
        bucket_name="pipe-vhs-bodies",
        staging_bucket="pipe-vhs-staging",
        queue_name="pipe-vhs",
    ).provision()
    sqs = client("sqs", endpoint)
    producer = Producer(
        stack.queue_url,
        sqs_client=sqs,
        s3_client=client("s3", endpoint),
        staging_bucket=stack.staging_bucket,
        validate=False,  # the handler validates; the floor does not validate at all
    )
    results = []
    # Under load every batch fills to 10 at once; with the deployed 5 s window the run's
    # last, partial batch would wait it out: latency at the end of a finite run, not
    # throughput. So the window is 0 here.
    with LocalPipeline(stack, function_log=log, batching_window_seconds=0) as pipeline:
        assert pipeline.source is not None
        done = threading.Condition()
        pipeline.source.on_invocation = lambda _: _notify(done)
        for n, records in enumerate(batches):
            base = pipeline.source.stats.deleted
            started = meter.start()
            for start in range(0, len(records), 10):
                with done:
                    done.wait_for(
                        lambda s=start, b=base: (
                            s - (pipeline.source.stats.deleted - b) < MAX_WAITING
                        ),
                        timeout=60,
                    )
                report = producer.send(records[start : start + 10])
                if not report.ok:
                    raise RuntimeError(f"send failed: {(report.refused + report.not_sent)[:3]}")
            pipeline.drain(timeout=600)
            measured = meter.stop("VHS pipeline", len(records), started)
            if pipeline.source.stats.item_failures:
                raise RuntimeError(f"the handler failed messages: {pipeline.source.stats}")
            if n:  # the first batch is the warm-up
                results.append(measured)
    return results


def _notify(condition: threading.Condition) -> None:
    with condition:
        condition.notify_all()


# --- the raw floor -----------------------------------------------------------------------------


class RawPipelineFloor:
    """The fewest calls that take records from a queue into a table, one after another."""

    def __init__(self, endpoint: str, name: str) -> None:
        self.sqs = client("sqs", endpoint)
        self.dynamodb = client("dynamodb", endpoint)
        self.table = name
        self.dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.queue_url = self.sqs.create_queue(QueueName=name)["QueueUrl"]

    def put(self, message: dict[str, Any]) -> None:
        data = json.dumps(message["record"], separators=(",", ":"), ensure_ascii=False)
        stamp = message["updated_at"]
        item = {"id": {"S": message["id"]}, "t": {"S": stamp}, "b": {"B": data.encode()}}
        condition = "attribute_not_exists(id) OR t < :t"
        put_if(self.dynamodb, self.table, item, condition, {":t": {"S": stamp}})

    def through_queue(self, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), 10):
            chunk = records[start : start + 10]
            self.sqs.send_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(n), "MessageBody": body(m)} for n, m in enumerate(chunk)],
            )
            received: list[dict[str, Any]] = []
            while len(received) < len(chunk):
                received += self.sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=1,
                ).get("Messages", [])
            for message in received:
                self.put(json.loads(message["Body"]))
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                    for n, m in enumerate(received)
                ],
            )


def run_floor(endpoint: str, batches: list[list[dict[str, Any]]], meter: Meter) -> list[Throughput]:
    floor = RawPipelineFloor(endpoint, "pipe-raw")
    writes = RawPipelineFloor(endpoint, "pipe-raw-writes")
    results = []
    for n, records in enumerate(batches):
        started = meter.start()
        floor.through_queue(records)
        queued = meter.stop("raw floor", len(records), started)
        renamed = [{**m, "id": m["id"] + "-w"} for m in records]
        started = meter.start()
        for message in renamed:
            writes.put(message)
        direct = meter.stop(WRITES_RAW, len(records), started)
        if n:
            results += [queued, direct]
    return results


def run_store_writes(
    endpoint: str, batches: list[list[dict[str, Any]]], meter: Meter
) -> list[Throughput]:
    from vhs import VersionedHybridStore, resources

    s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)
    resources.create_store_resources(
        dynamodb, s3, table_name="pipe-writes", bucket_name="pipe-writes", region="us-east-1"
    )
    store = VersionedHybridStore(
        "pipe-writes", "pipe-writes", s3_client=s3, dynamodb_client=dynamodb
    )
    results = []
    for n, records in enumerate(batches):
        started = meter.start()
        for m in records:
            store.put(m["id"], m["record"], updated_at=m["updated_at"])
        measured = meter.stop(WRITES_VHS, len(records), started)
        if n:
            results.append(measured)
    return results


def why(result: dict[str, Any]) -> str:
    """One sentence on what bounds the ratio, from this run's numbers."""
    t = result["throughput"]
    vhs, floor, put, raw = (t[k] for k in ("VHS pipeline", "raw floor", WRITES_VHS, WRITES_RAW))
    if None in (vhs.server_cpu, floor.server_cpu, put.server_cpu, raw.server_cpu):
        return ""
    ms = lambda x: x.server_cpu / x.records * 1000  # noqa: E731
    return (
        f"What bounds the ratio here: moto's server spends {ms(vhs):.1f} ms of CPU per record "
        f"in the VHS pipeline against {ms(floor):.1f} ms for the floor, and most of the "
        f"difference is the write itself: {ms(put):.1f} ms for VHS's conditional UpdateItem "
        f"(its expressions, and the item's history lists) against {ms(raw):.1f} ms for a bare "
        f"PutItem. moto serves DynamoDB one request at a time on one core, so concurrency in "
        f"the handler overlaps the client's work and the network with the server's, but cannot "
        f"make the server's work smaller; on DynamoDB both writes are one request of similar "
        f"latency and the server is not shared."
    )


# --- cold start ----------------------------------------------------------------------------------


def import_times(runs: int) -> list[float]:
    """handlers.ingest's cumulative import time (ms), each in a fresh interpreter."""
    times = []
    pattern = re.compile(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|\s*handlers\.ingest\s*$")
    for _ in range(runs + 1):  # the first warms the file cache and is dropped
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import handlers.ingest"],
            cwd=LAMBDAS,
            capture_output=True,
            text=True,
            check=True,
        )
        found = [m for line in done.stderr.splitlines() if (m := pattern.search(line))]
        if not found:
            raise RuntimeError("no handlers.ingest line in the -X importtime output")
        times.append(int(found[-1].group(1)) / 1000)
    return times[1:]


# --- the report ----------------------------------------------------------------------------------


def run(settings: Settings, console: Console) -> dict[str, Any]:
    started = time.monotonic()

    def say(text: str) -> None:
        console.print(f"[dim]{time.monotonic() - started:6.1f}s[/] {text}")

    records = messages(settings.records)
    warm = messages(WARM_UP, offset=1)
    say(f"{settings.records} records (+{WARM_UP} to warm up), catalogue mix without 1-5 MB")
    with MotoServer() as server, tempfile.TemporaryDirectory() as scratch:
        meter = Meter(server.process.pid if server.process else None)
        say(f"moto server on {server.endpoint}: the raw floor")
        floor = run_floor(server.endpoint, [warm, records], meter)
        say("the VHS pipeline")
        vhs = run_vhs(server.endpoint, [warm, records], Path(scratch) / "ingest.log", meter)
        say("VHS's writes alone")
        vhs += run_store_writes(server.endpoint, [warm, records], meter)
    say(f"cold-start import time, {settings.import_runs} fresh interpreters")
    imports = import_times(settings.import_runs)
    order = ["VHS pipeline", "raw floor", WRITES_VHS, WRITES_RAW]
    results = {t.name: t for t in sorted([*vhs, *floor], key=lambda t: order.index(t.name))}
    return {
        "settings": settings,
        "throughput": results,
        "ratio": results["VHS pipeline"].per_second / results["raw floor"].per_second,
        "imports": imports,
        "import_ms": statistics.median(imports),
        "seconds": time.monotonic() - started,
    }


COLUMNS = (
    "system",
    "records",
    "seconds",
    "records/s",
    "vs raw floor",
    "moto CPU ms/record",
    "client CPU ms/record",
)


def row(t: Throughput, floor: float) -> list[str]:
    return [
        t.name,
        str(t.records),
        f"{t.seconds:.2f}",
        f"{t.per_second:.0f}",
        f"{t.per_second / floor:.2f}x",
        t.per_record_ms(t.server_cpu),
        t.per_record_ms(t.client_cpu),
    ]


def tables(result: dict[str, Any]) -> tuple[Table, Table]:
    through = Table(title="records per second through the ingest pipeline (one run)")
    for column in COLUMNS:
        through.add_column(column, justify="left" if column == "system" else "right")
    floor = result["throughput"]["raw floor"].per_second
    for t in result["throughput"].values():
        through.add_row(*row(t, floor))
    goals = Table(title="goals")
    for column in ("goal", "target", "measured", "met"):
        goals.add_column(column)
    imports = ", ".join(f"{ms:.0f}" for ms in result["imports"])
    goals.add_row(
        "VHS pipeline vs raw floor (records/s)",
        f">= {THROUGHPUT_GOAL:.1f}x",
        f"{result['ratio']:.2f}x",
        "yes" if result["ratio"] >= THROUGHPUT_GOAL else "no",
    )
    goals.add_row(
        "handler cold-start import (median)",
        f"<= {IMPORT_GOAL_MS:.0f} ms",
        f"{result['import_ms']:.0f} ms ({imports})",
        "yes" if result["import_ms"] <= IMPORT_GOAL_MS else "no",
    )
    return through, goals


def markdown(result: dict[str, Any]) -> str:
    settings: Settings = result["settings"]
    floor = result["throughput"]["raw floor"].per_second
    versions = {name: metadata.version(name) for name in ("boto3", "moto")}
    lines = [
        "## The ingest pipeline",
        "",
        "Generated by `benchmarks/pipeline.py --write docs/benchmarks.md` (part of `make bench`);",
        "it rewrites only this section. "
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, mode {settings.mode}, "
        f"{result['seconds']:.0f} s; Python {platform.python_version()}, boto3 "
        f"{versions['boto3']}, moto {versions['moto']} (server mode), {os.cpu_count()} CPUs.",
        "",
        f"{settings.records} catalogue records (the size mix above without its 1-5 MB class)"
        " through one moto server, after a warm-up of "
        f"{WARM_UP}. **VHS pipeline**: the producer sends while the event-source emulator runs "
        "the real ingest handler (Powertools, validation, the store's conditional writes, a "
        "batch's ten messages stored concurrently), timed from the first send until the queue "
        "is empty; batching window 0 (the deployed 5 s only delays a finite run's last, "
        "partial batch). **raw floor**: per 10 records one SendMessageBatch, one "
        "ReceiveMessage, one conditional PutItem each and one DeleteMessageBatch, one call "
        "after another. **writes only**: the writes alone, one after another, no queue: "
        "VHS's `store.put` (one conditional UpdateItem, or PutObject + UpdateItem over the "
        "inline threshold) and the floor's PutItem. The CPU columns say where the time goes: "
        "the moto server (one process, DynamoDB requests one at a time) and this process "
        "(producer, emulator and handler threads).",
        "",
        why(result),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "| --- |" + " ---: |" * (len(COLUMNS) - 1),
    ]
    for t in result["throughput"].values():
        lines.append("| " + " | ".join(row(t, floor)) + " |")
    imports = ", ".join(f"{ms:.0f}" for ms in result["imports"])
    met = "met" if result["ratio"] >= THROUGHPUT_GOAL else "not met"
    import_met = "met" if result["import_ms"] <= IMPORT_GOAL_MS else "not met"
    lines += [
        "",
        "| goal | target | measured | |",
        "| --- | --- | --- | --- |",
        f"| VHS pipeline vs raw floor, records/s | >= {THROUGHPUT_GOAL:.1f}x | "
        f"{result['ratio']:.2f}x | {met} |",
        f"| handler cold-start import, median of {len(result['imports'])} fresh interpreters "
        f'(`python -X importtime -c "import handlers.ingest"` in lambdas/, cumulative) | '
        f"<= {IMPORT_GOAL_MS:.0f} ms | {result['import_ms']:.0f} ms ({imports}) | {import_met} |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.records} records")
    parser.add_argument("--write", metavar="PATH", help="write this section of PATH")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    result = run(QUICK if args.quick else FULL, console)
    out = Console()
    for table in tables(result):
        out.print(table)
    if args.write:
        sections.write_section(args.write, SECTION, markdown(result))
        console.print(f"wrote the pipeline section of {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
