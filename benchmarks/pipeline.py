"""The ingest pipeline's benchmark: records per second through the local pipeline against
raw floors, without and with per-request latency in front of the local stack, and the ingest
handler's cold-start import time.

    .venv/bin/python benchmarks/pipeline.py                  print the tables
    .venv/bin/python benchmarks/pipeline.py --quick          smoke mode (about a minute)
    .venv/bin/python benchmarks/pipeline.py --rounds N       N rounds (median per row)
    .venv/bin/python benchmarks/pipeline.py --write PATH     ... and write its section of PATH

`--write` replaces only the section between `<!-- pipeline:start -->` and
`<!-- pipeline:end -->` in PATH (appending it if absent), so it runs after benchmarks/run.py,
which writes the rest of docs/benchmarks.md.

Every system runs twice in each round, on one moto server: as moto answers (no latency, the
figures this benchmark has always reported), and with a fixed delay per request of each
service (benchmarks/latency.py: SQS 20 ms, DynamoDB 5 ms, S3 20 ms, published figures with
their sources), slept on the client before each request is sent.

* **VHS pipeline**: the producer sends the records (SendMessageBatch) to the local stack's
  ingest queue while the event-source emulator runs the real ingest handler (Powertools, the
  message contract, the store's conditional writes, ten messages of a batch stored
  concurrently) and deletes what it acknowledged. Timed from the first send until the queue
  is empty. The producer keeps at most MAX_WAITING messages sent and not yet deleted, as a
  steady feed does: moto's SQS costs grow with a queue's depth, which would bill moto rather
  than the pipeline. Twice: as deployed (delta history: a small put reads the item first,
  GetItem, then writes it, UpdateItem) and with VHS_DELTA_HISTORY=false (one UpdateItem).
* **raw floor, equal concurrency**: the fewest calls that carry the same records through a
  queue into a table, at the VHS pipeline's concurrency: the same producer loop and window,
  the same event-source emulator (one poller receiving a batch ahead, one execution
  environment that invokes and then deletes), and a handler that stores a batch's messages
  in a thread pool of the ingest handler's size (handlers.ingest.CONCURRENCY), one
  conditional PutItem each (body inline). No DLQ handling, no validation, no history, no
  integrity checks.
* **raw floor, one call at a time** (the floor this benchmark reported before): per 10
  records one SendMessageBatch, one ReceiveMessage, one PutItem each and one
  DeleteMessageBatch, one after another in one thread.
* **writes only** (context): the writes alone, sequential, no queue: VHS's `store.put` and
  the floor's conditional PutItem. With the CPU columns they show where the time goes.

The records are the catalogue size mix of benchmarks/workload.py without its 1% of 1-5 MB
records (those travel by claim check, and on moto their S3 copies swamp the timing; the store
benchmark covers them).
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
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
from benchmarks.latency import DELAYS, InjectedLatency  # noqa: E402
from benchmarks.systems import put_if  # noqa: E402
from vhs.ingest.producer import Producer  # noqa: E402
from vhs.local.sqs_source import LocalPipeline, SqsEventSource  # noqa: E402
from vhs.local.stack import LocalStack, MotoServer, client  # noqa: E402

SECTION = "pipeline"  # docs/benchmarks.md's <!-- pipeline:start --> ... <!-- pipeline:end -->
SEED = 2018
LATENCY_GOAL = 0.9  # issue 12: with injected latency, >= 0.9x the equal-concurrency floor
THROUGHPUT_GOAL = 1.0  # the earlier goal: no latency, against the one-call-at-a-time floor
IMPORT_GOAL_MS = 150.0
# Messages a producer keeps sent and not yet deleted: two batches as moto answers (the figure
# this benchmark always used), five with latency, where a batch is sent and received in two
# SQS round trips (2 x 20 ms) while the consumer stores one in about 30: with two, the
# producer's window, not the consumer, would set the pace.
MAX_WAITING = {False: 20, True: 50}
WARM_UP = 20  # records each system handles before its timed run (cold start excluded)
BATCH = 10  # the ingest event source's batch size (resources.INGEST), SendMessageBatch's max
VHS = "VHS pipeline"
VHS_FLAT = "VHS pipeline, delta history off"
FLOOR = "raw floor, equal concurrency"
FLOOR_SERIAL = "raw floor, one call at a time"
WRITES_VHS = "writes only: VHS store.put"
WRITES_RAW = "writes only: raw PutItem"
ORDER = (VHS, VHS_FLAT, FLOOR, FLOOR_SERIAL, WRITES_VHS, WRITES_RAW)
CONDITIONS = (False, True)  # injected latency off, on


def condition_name(latency: bool) -> str:
    return "injected" if latency else "none"


@dataclass(frozen=True)
class Settings:
    mode: str
    records: int
    import_runs: int
    rounds: int


FULL = Settings("full", records=1000, import_runs=7, rounds=3)
QUICK = Settings("quick", records=200, import_runs=3, rounds=1)


@dataclass
class Throughput:
    name: str
    records: int
    seconds: float
    server_cpu: float | None = None  # moto server's CPU seconds during the run
    client_cpu: float | None = None  # this process's (all threads)
    requests: Counter[str] = field(default_factory=Counter)  # HTTP requests by service

    @property
    def per_second(self) -> float:
        return self.records / self.seconds

    def per_record_ms(self, cpu: float | None) -> str:
        return "-" if cpu is None else f"{cpu / self.records * 1000:.1f}"

    def requests_per_record(self, service: str) -> float:
        return self.requests[service] / self.records


class Meter:
    """Wall time, CPU time of the moto server (Linux /proc) and of this process, and the
    requests sent, by service."""

    def __init__(self, server_pid: int | None, latency: InjectedLatency) -> None:
        self.pid = server_pid
        self.latency = latency

    def _server(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start(self) -> tuple[float, float | None, float, Counter[str]]:
        return time.perf_counter(), self._server(), time.process_time(), self.latency.snapshot()

    def stop(self, name: str, records: int, started: tuple[float, float | None, float, Any]):
        wall, server, client, requests = started
        now = self._server()
        return Throughput(
            name,
            records,
            time.perf_counter() - wall,
            None if server is None or now is None else now - server,
            time.process_time() - client,
            self.latency.snapshot() - requests,
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


# --- a steady feed through an event source ---------------------------------------------------


def feed(
    source: SqsEventSource,
    send: Callable[[list[dict[str, Any]]], None],
    records: list[dict[str, Any]],
    window: int,
) -> None:
    """Send `records` in batches of 10, keeping at most `window` sent and not yet deleted,
    then wait until the queue is empty."""
    done = threading.Condition()
    source.on_invocation = lambda _: _notify(done)
    base = source.stats.deleted
    for start in range(0, len(records), BATCH):
        with done:
            done.wait_for(lambda s=start: s - (source.stats.deleted - base) < window, timeout=60)
        send(records[start : start + BATCH])
    source.run_until_idle(timeout=600)
    if source.stats.item_failures or source.stats.failed_invocations:
        raise RuntimeError(f"the handler failed messages: {source.stats}")


def _notify(condition: threading.Condition) -> None:
    with condition:
        condition.notify_all()


# --- VHS: the local pipeline -------------------------------------------------------------------


def run_vhs(
    endpoint: str,
    batches: list[list[dict[str, Any]]],
    log: Path,
    meter: Meter,
    *,
    name: str,
    tag: str,
    window: int,
    delta_history: bool = True,
) -> list[Throughput]:
    stack = LocalStack(
        endpoint,
        table_name=f"pipe-vhs-{tag}",
        bucket_name=f"pipe-vhs-bodies-{tag}",
        staging_bucket=f"pipe-vhs-staging-{tag}",
        queue_name=f"pipe-vhs-{tag}",
        extra_env={} if delta_history else {"VHS_DELTA_HISTORY": "false"},
    ).provision()
    producer = Producer(
        stack.queue_url,
        sqs_client=client("sqs", endpoint),
        s3_client=client("s3", endpoint),
        staging_bucket=stack.staging_bucket,
        validate=False,  # the handler validates; the floor does not validate at all
    )

    def send(chunk: list[dict[str, Any]]) -> None:
        report = producer.send(chunk)
        if not report.ok:
            raise RuntimeError(f"send failed: {(report.refused + report.not_sent)[:3]}")

    results = []
    # Under load every batch fills to 10 at once; with the deployed 5 s window the run's
    # last, partial batch would wait it out: latency at the end of a finite run, not
    # throughput. So the window is 0 here.
    with LocalPipeline(stack, function_log=log, batching_window_seconds=0) as pipeline:
        assert pipeline.source is not None
        for n, records in enumerate(batches):
            started = meter.start()
            feed(pipeline.source, send, records, window)
            measured = meter.stop(name, len(records), started)
            if n:  # the first batch is the warm-up
                results.append(measured)
    return results


def handler_concurrency() -> int:
    """How many messages of a batch the ingest handler stores at once."""
    from handlers.ingest import CONCURRENCY

    return min(CONCURRENCY, BATCH)


# --- the raw floors ----------------------------------------------------------------------------


class RawPipelineFloor:
    """The fewest calls that take records from a queue into a table."""

    def __init__(self, endpoint: str, name: str) -> None:
        self.endpoint = endpoint
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

    def send(self, chunk: list[dict[str, Any]]) -> None:
        self.sqs.send_message_batch(
            QueueUrl=self.queue_url,
            Entries=[{"Id": str(n), "MessageBody": body(m)} for n, m in enumerate(chunk)],
        )

    # --- one call at a time ---

    def through_queue(self, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            self.send(chunk)
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

    # --- at the handler's concurrency ---

    def handler(self, concurrency: int) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        """A Lambda handler that stores a batch's messages `concurrency` at a time."""

        def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            records = event.get("Records") or []
            with ThreadPoolExecutor(max(1, min(concurrency, len(records)))) as pool:
                list(pool.map(lambda r: self.put(json.loads(r["body"])), records))
            return {"batchItemFailures": []}

        return handle


def run_floor(
    endpoint: str, batches: list[list[dict[str, Any]]], meter: Meter, *, tag: str, window: int
) -> list[Throughput]:
    """The floor at the handler's concurrency, through the same event-source emulator."""
    floor = RawPipelineFloor(endpoint, f"pipe-raw-{tag}")
    source = SqsEventSource(
        client("sqs", endpoint),
        floor.queue_url,
        floor.handler(handler_concurrency()),
        batching_window_seconds=0,
        function_name="raw-floor",
    )
    results = []
    with source:
        for n, records in enumerate(batches):
            started = meter.start()
            feed(source, floor.send, records, window)
            measured = meter.stop(FLOOR, len(records), started)
            if n:
                results.append(measured)
    return results


def run_floor_serial(
    endpoint: str,
    batches: list[list[dict[str, Any]]],
    meter: Meter,
    *,
    tag: str,
    writes: bool = True,
) -> list[Throughput]:
    """The floor one call at a time, and (`writes`) its PutItems alone."""
    floor = RawPipelineFloor(endpoint, f"pipe-raw-serial-{tag}")
    direct = RawPipelineFloor(endpoint, f"pipe-raw-writes-{tag}") if writes else None
    results = []
    for n, records in enumerate(batches):
        started = meter.start()
        floor.through_queue(records)
        measured = [meter.stop(FLOOR_SERIAL, len(records), started)]
        if direct is not None:
            renamed = [{**m, "id": m["id"] + "-w"} for m in records]
            started = meter.start()
            for message in renamed:
                direct.put(message)
            measured.append(meter.stop(WRITES_RAW, len(records), started))
        if n:
            results += measured
    return results


def run_store_writes(
    endpoint: str, batches: list[list[dict[str, Any]]], meter: Meter, *, tag: str
) -> list[Throughput]:
    from vhs import VersionedHybridStore, resources

    s3, dynamodb = client("s3", endpoint), client("dynamodb", endpoint)
    name = f"pipe-writes-{tag}"
    resources.create_store_resources(
        dynamodb, s3, table_name=name, bucket_name=name, region="us-east-1"
    )
    store = VersionedHybridStore(name, name, s3_client=s3, dynamodb_client=dynamodb)
    results = []
    for n, records in enumerate(batches):
        started = meter.start()
        for m in records:
            store.put(m["id"], m["record"], updated_at=m["updated_at"])
        measured = meter.stop(WRITES_VHS, len(records), started)
        if n:
            results.append(measured)
    return results


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
    batches = [warm, records]
    say(f"{settings.records} records (+{WARM_UP} to warm up), catalogue mix without 1-5 MB")
    runs: dict[tuple[bool, str], list[Throughput]] = {}
    with InjectedLatency() as latency, tempfile.TemporaryDirectory() as scratch:
        for round_ in range(settings.rounds):
            with MotoServer() as server:
                meter = Meter(server.process.pid if server.process else None, latency)
                for on in CONDITIONS:
                    tag = f"{round_}-{'l' if on else 'n'}"
                    window = MAX_WAITING[on]
                    head = f"round {round_ + 1}/{settings.rounds}, latency {condition_name(on)}"
                    with latency.enabled(on):
                        say(f"{head}: the VHS pipeline, delta history on and off")
                        log = Path(scratch) / f"ingest-{tag}.log"
                        got = run_vhs(
                            server.endpoint,
                            batches,
                            log,
                            meter,
                            name=VHS,
                            tag=f"{tag}-d",
                            window=window,
                        )
                        got += run_vhs(
                            server.endpoint,
                            batches,
                            log,
                            meter,
                            name=VHS_FLAT,
                            tag=f"{tag}-f",
                            window=window,
                            delta_history=False,
                        )
                        say(f"{head}: the raw floors, VHS's writes alone")
                        got += run_floor(server.endpoint, batches, meter, tag=tag, window=window)
                        got += run_floor_serial(
                            server.endpoint, batches, meter, tag=tag, writes=not on
                        )
                        if not on:  # context for moto's CPU; with latency, 2d against d
                            got += run_store_writes(server.endpoint, batches, meter, tag=tag)
                    for t in got:
                        runs.setdefault((on, t.name), []).append(t)
                    ratio = got[0].per_second / next(t for t in got if t.name == FLOOR).per_second
                    say(f"{head}: VHS {got[0].per_second:.0f} records/s, {ratio:.2f}x the floor")
    say(f"cold-start import time, {settings.import_runs} fresh interpreters")
    imports = import_times(settings.import_runs)
    return {
        "settings": settings,
        "runs": runs,
        "throughput": {key: median_run(ts) for key, ts in runs.items()},
        "concurrency": handler_concurrency(),
        "imports": imports,
        "import_ms": statistics.median(imports),
        "seconds": time.monotonic() - started,
    }


def median_run(runs: list[Throughput]) -> Throughput:
    """The run of median wall time (of an even number, the faster middle one)."""
    return sorted(runs, key=lambda t: t.seconds)[(len(runs) - 1) // 2]


def ratio(result: dict[str, Any], on: bool, name: str, floor: str = FLOOR) -> float:
    t = result["throughput"]
    return t[on, name].per_second / t[on, floor].per_second


def round_ratios(result: dict[str, Any], on: bool, name: str, floor: str = FLOOR) -> list[float]:
    """The ratio in each round (each round's two runs were measured minutes apart at most)."""
    runs = result["runs"]
    return [
        a.per_second / b.per_second for a, b in zip(runs[on, name], runs[on, floor], strict=True)
    ]


COLUMNS = (
    "system",
    "latency",
    "seconds",
    "records/s",
    "vs floor, equal concurrency",
    "vs floor, one call at a time",
    "moto CPU ms/record",
    "client CPU ms/record",
    "requests/record: DynamoDB, S3, SQS",
)


def row(result: dict[str, Any], on: bool, name: str) -> list[str]:
    t = result["throughput"][on, name]
    requests = ", ".join(f"{t.requests_per_record(s):.2f}" for s in ("dynamodb", "s3", "sqs"))
    return [
        t.name,
        condition_name(on),
        f"{t.seconds:.2f}",
        f"{t.per_second:.0f}",
        f"{ratio(result, on, name):.2f}x",
        f"{ratio(result, on, name, FLOOR_SERIAL):.2f}x",
        t.per_record_ms(t.server_cpu),
        t.per_record_ms(t.client_cpu),
        requests,
    ]


def rows(result: dict[str, Any]) -> list[list[str]]:
    t = result["throughput"]
    return [row(result, on, name) for name in ORDER for on in CONDITIONS if (on, name) in t]


def goals(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(goal, target, measured, met)."""

    def spread(on: bool, name: str, floor: str = FLOOR) -> str:
        each = round_ratios(result, on, name, floor)
        rounds = ", ".join(f"{r:.2f}" for r in each)
        return f"{ratio(result, on, name, floor):.2f}x" + (
            f" (rounds: {rounds})" if len(each) > 1 else ""
        )

    imports = ", ".join(f"{ms:.0f}" for ms in result["imports"])
    return [
        (
            "VHS pipeline vs raw floor of equal concurrency, injected latency (issue 12)",
            f">= {LATENCY_GOAL:.1f}x",
            spread(True, VHS),
            ratio(result, True, VHS) >= LATENCY_GOAL,
        ),
        (
            "... the same, delta history off (context)",
            f">= {LATENCY_GOAL:.1f}x",
            spread(True, VHS_FLAT),
            ratio(result, True, VHS_FLAT) >= LATENCY_GOAL,
        ),
        (
            "VHS pipeline vs raw floor one call at a time, no latency (the earlier goal)",
            f">= {THROUGHPUT_GOAL:.1f}x",
            spread(False, VHS, FLOOR_SERIAL),
            ratio(result, False, VHS, FLOOR_SERIAL) >= THROUGHPUT_GOAL,
        ),
        (
            f"handler cold-start import, median of {len(result['imports'])} fresh interpreters "
            '(`python -X importtime -c "import handlers.ingest"` in lambdas/, cumulative)',
            f"<= {IMPORT_GOAL_MS:.0f} ms",
            f"{result['import_ms']:.0f} ms ({imports})",
            result["import_ms"] <= IMPORT_GOAL_MS,
        ),
    ]


def tables(result: dict[str, Any]) -> tuple[Table, Table]:
    rounds = result["settings"].rounds
    through = Table(
        title=f"records per second through the ingest pipeline (median of {rounds} rounds)"
    )
    for column in COLUMNS:
        through.add_column(column, justify="left" if column in COLUMNS[:2] else "right")
    for cells in rows(result):
        through.add_row(*cells)
    table = Table(title="goals")
    for column in ("goal", "target", "measured", "met"):
        table.add_column(column)
    for goal, target, measured, met in goals(result):
        table.add_row(goal, target, measured, "yes" if met else "no")
    return through, table


def model(result: dict[str, Any]) -> dict[str, float]:
    """The latency arithmetic (ms per batch of 10 in the consumer, the stage that bounds a
    pipeline whose producer and poller each spend one SQS round trip per batch)."""
    delay = {d.service: d.ms for d in DELAYS}
    d, s, u = delay["dynamodb"], delay["sqs"], delay["s3"]
    t = result["throughput"]
    f = t[True, VHS_FLAT].requests_per_record("s3")  # bodies over the inline threshold
    p = 1 - (1 - f) ** BATCH  # batches with at least one such body
    floor = d + s  # 10 PutItems at once, then DeleteMessageBatch
    flat = d + p * u + s  # UpdateItem; PutObject first for a body over the threshold
    read_first = 2 * d + p * max(0.0, u - d) + s  # GetItem + UpdateItem, or PutObject + UpdateItem
    return {
        "d": d,
        "s": s,
        "u": u,
        "f": f,
        "p": p,
        "floor": floor,
        "flat": flat,
        "read_first": read_first,
        "serial": 3 * s + BATCH * d,
        "ratio": floor / read_first,
        "ratio_flat": floor / flat,
        "d_max": s / 8,  # (d + s) / (2d + s) >= 0.9  <=>  d <= s / 8, with no S3 body
    }


def per_batch_ms(t: Throughput) -> float:
    return BATCH * 1000 / t.per_second


def cpu_per_batch_ms(cpu: float | None, t: Throughput) -> float:
    return float("nan") if cpu is None else cpu / t.records * BATCH * 1000


def why(result: dict[str, Any]) -> list[str]:
    """What bounds each ratio, with this run's numbers."""
    t = result["throughput"]
    m = model(result)
    c = result["concurrency"]
    vhs, flat, floor = t[True, VHS], t[True, VHS_FLAT], t[True, FLOOR]
    n_vhs, n_floor = t[False, VHS], t[False, FLOOR_SERIAL]
    put, raw = t[False, WRITES_VHS], t[False, WRITES_RAW]
    ms = lambda x: cpu_per_batch_ms(x.server_cpu, x) / BATCH  # noqa: E731
    moto = lambda x: cpu_per_batch_ms(x.server_cpu, x)  # noqa: E731
    mine = lambda x: cpu_per_batch_ms(x.client_cpu, x)  # noqa: E731
    return [
        f"**Without latency** (the figures this section always reported): moto's server "
        f"spends {ms(n_vhs):.1f} ms of CPU per record in the VHS pipeline against "
        f"{ms(n_floor):.1f} ms for the one-call-at-a-time floor, and most of the difference is "
        f"the write itself: {ms(put):.1f} ms for VHS's `store.put` (GetItem, then a conditional "
        f"UpdateItem with its expressions and the item's history) against {ms(raw):.1f} ms for "
        f"a bare PutItem. moto serves DynamoDB one request at a time on one core, so "
        f"concurrency in the handler overlaps the client's work and the network with the "
        f"server's but cannot make the server's work smaller: the ratio is moto's CPU ratio.",
        f"**The latency arithmetic.** With d = {m['d']:.0f} ms per DynamoDB request, "
        f"s = {m['s']:.0f} ms per SQS request and u = {m['u']:.0f} ms per S3 request, the "
        f"producer and the poller each spend one SQS round trip per batch of 10 (s), while the "
        f"execution environment stores the batch, {c} messages at once, then deletes it "
        f"(DeleteMessageBatch, s): that consumer is the slowest stage, so it sets the pace. "
        f"Per batch the floor takes d + s = {m['floor']:.0f} ms (ten PutItems at once). With "
        f"delta history off VHS takes d + P·u + s = {m['flat']:.1f} ms, where "
        f"f = {m['f']:.3f} of the records have a body over the inline threshold (PutObject "
        f"before the UpdateItem; measured: S3 requests per record) and "
        f"P = 1 - (1 - f)^10 = {m['p']:.2f} of the batches wait for one. As deployed, a small "
        f"put reads the item first (GetItem, then UpdateItem): 2d + P·(u - d) + s = "
        f"{m['read_first']:.1f} ms. So on AWS, at these latencies and this concurrency, VHS "
        f"would run at {m['floor']:.0f} / {m['read_first']:.1f} = **{m['ratio']:.2f}x** the "
        f"floor as deployed and {m['floor']:.0f} / {m['flat']:.1f} = {m['ratio_flat']:.2f}x "
        f"with delta history off, before any CPU. The read-first alone costs d per batch: "
        f"(d + s) / (2d + s) ≥ {LATENCY_GOAL} holds only for d ≤ s / 8 = {m['d_max']:.1f} ms. "
        f"The one-call-at-a-time floor pays 3s + 10d = {m['serial']:.0f} ms per batch, which "
        f"is why the concurrent pipelines pass it once round trips cost something "
        f"(VHS {ratio(result, True, VHS, FLOOR_SERIAL):.2f}x it, measured).",
        f"**With latency, measured**: a batch takes {per_batch_ms(floor):.0f} ms in the "
        f"floor of equal concurrency, {per_batch_ms(flat):.0f} ms in VHS with delta history "
        f"off and {per_batch_ms(vhs):.0f} ms as deployed (the model: {m['floor']:.0f}, "
        f"{m['flat']:.0f}, {m['read_first']:.0f}). The difference is moto's CPU, which the "
        f"delays do not replace but add to: per batch its server spent {moto(floor):.0f} ms "
        f"for the floor, {moto(flat):.0f} ms for VHS with delta history off and "
        f"{moto(vhs):.0f} ms as deployed, on one core, while this process (producer, emulator, "
        f"handler threads) spent {mine(floor):.0f}, {mine(flat):.0f} and {mine(vhs):.0f} ms on "
        f"the other, on a shared 2-core machine. moto's time per batch exceeds each "
        f"pipeline's latency chain, so moto's server, not the round trips, is still what "
        f"bounds the measured ratio ({ratio(result, True, VHS):.2f}x; moto's CPU ratio "
        f"{moto(floor) / moto(vhs):.2f}x): measuring the latency bound itself needs a server "
        f"that does a request in well under d, i.e. AWS. The measured ratio is the goal's "
        f"figure; the model above is what AWS's published latencies leave of it.",
    ]


def markdown(result: dict[str, Any]) -> str:
    settings: Settings = result["settings"]
    versions = {name: metadata.version(name) for name in ("boto3", "moto")}
    delays = "; ".join(
        f"**{d.service}** {d.ms:.0f} ms: {d.figure}, [{d.source}]({d.url})" for d in DELAYS
    )
    lines = [
        "## The ingest pipeline",
        "",
        "Generated by `benchmarks/pipeline.py --write docs/benchmarks.md` (part of `make bench`);",
        "it rewrites only this section. "
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, mode {settings.mode}, "
        f"{result['seconds']:.0f} s; Python {platform.python_version()}, boto3 "
        f"{versions['boto3']}, moto {versions['moto']} (server mode), {os.cpu_count()} CPUs "
        "shared with other work. Each row is the median of "
        f"{settings.rounds} rounds (a fresh moto server each); a ratio is of the two medians.",
        "",
        f"{settings.records} catalogue records (the size mix above without its 1-5 MB class) "
        f"through one moto server, after a warm-up of {WARM_UP}, each system twice per round: "
        "as moto answers (latency **none**, the figures this section always reported), and "
        "with latency **injected**: a fixed delay per request, slept on the client before it "
        "is sent (a botocore `before-send` hook on every client of the process, the handler's "
        "included: benchmarks/latency.py), on top of moto's own time. The delays, published "
        f"figures: {delays}. CloudWatch (the DLQ alarm, off the path) gets none.",
        "",
        "**VHS pipeline**: the producer sends while the event-source emulator runs the real "
        "ingest handler (Powertools, validation, the store's conditional writes, a batch's "
        f"messages stored {result['concurrency']} at a time), timed from the first send until "
        "the queue is empty; batching window 0 (the deployed 5 s only delays a finite run's "
        "last, partial batch); as deployed (delta history: GetItem, then UpdateItem) and with "
        "`VHS_DELTA_HISTORY=false` (UpdateItem alone). **raw floor, equal concurrency**: the "
        "fewest calls, at the pipeline's concurrency: the same producer loop, the same emulator "
        "(one poller receiving a batch ahead, one execution environment that invokes, then "
        "deletes), and a handler that makes one conditional PutItem per message (body inline), "
        f"{result['concurrency']} at a time. The producers keep at most "
        f"{MAX_WAITING[False]} messages sent and not deleted ({MAX_WAITING[True]} with "
        "latency, where sending and receiving a batch takes two SQS round trips: with two "
        "batches the producer, not the consumer, would set the pace). **raw floor, one call "
        "at a time** (the floor reported before): per 10 records one SendMessageBatch, one "
        "ReceiveMessage, one PutItem each and one DeleteMessageBatch, one after another. "
        "**writes only**: the writes alone, one after another, no queue. CPU: the moto server "
        "(one process, DynamoDB requests one at a time) and this process (producer, emulator "
        "and handler threads). Requests: HTTP requests sent per record, retries included "
        "(SQS's include the poller's empty receives and the drain's depth reads).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "| --- | --- |" + " ---: |" * (len(COLUMNS) - 2),
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows(result)]
    lines += ["", *[p + "\n" for p in why(result)]]
    lines += ["| goal | target | measured | |", "| --- | --- | --- | --- |"]
    for goal, target, measured, met in goals(result):
        lines.append(f"| {goal} | {target} | {measured} | {'met' if met else 'not met'} |")
    m = model(result)
    verdict = ratio(result, True, VHS)
    lines += [
        "",
        f"**Verdict (issue 12): {'met' if verdict >= LATENCY_GOAL else 'not met'}.** With "
        f"injected latency the VHS pipeline runs at {verdict:.2f}x the raw floor of equal "
        f"concurrency against a goal of {LATENCY_GOAL}x"
        + (
            ""
            if verdict >= LATENCY_GOAL
            else f", short by {LATENCY_GOAL - verdict:.2f}: moto's one-core server still "
            f"bounds the measurement, and even with its CPU taken away the latency arithmetic "
            f"gives {m['ratio']:.2f}x as deployed ({m['ratio_flat']:.2f}x with delta history "
            f"off), short by {max(0.0, LATENCY_GOAL - m['ratio']):.2f}: the read-first costs "
            f"one DynamoDB round trip per batch ({m['d']:.0f} ms on {m['floor']:.0f}) and the "
            f"bodies over the inline threshold one S3 round trip in {m['p']:.0%} of the "
            f"batches, neither of which the floor makes"
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.records} records")
    parser.add_argument("--rounds", type=int, help="rounds (the median of each row is kept)")
    parser.add_argument("--write", metavar="PATH", help="write this section of PATH")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = Settings(settings.mode, settings.records, settings.import_runs, args.rounds)
    result = run(settings, console)
    out = Console(width=200)
    for table in tables(result):
        out.print(table)
    if args.write:
        sections.write_section(args.write, SECTION, markdown(result))
        console.print(f"wrote the pipeline section of {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
