"""docs/benchmarks.md, "The ingest pipeline": latency injected client side (`Meter`)."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session

from vhs import settings, shapes
from vhs.ingest.batch import CONCURRENCY
from vhs_ops.admin.producer import Producer
from vhs_ops.local.runners import LocalPipeline
from vhs_ops.local.sqs_source import SqsEventSource
from vhs_ops.local.stack import LocalStack, MotoServer, client

from . import workload
from .common import Progress, Report, goals_table, run_line, table
from .systems import new_store, plain_table, put_if

LATENCY_GOAL = 0.9  # with injected latency, at least this x the equal-concurrency floor
THROUGHPUT_GOAL = 1.0  # no latency, against the one-call-at-a-time floor
IMPORT_GOAL_MS = 150.0
# Messages a producer keeps sent and not yet deleted (why these: docs/benchmarks.md).
MAX_WAITING = {False: 20, True: 50}
WARM_UP = 20  # records each system handles before its timed run
BATCH = shapes.INGEST.batch_size
VHS = "VHS pipeline"
VHS_FLAT = "VHS pipeline, delta history off"
FLOOR = "raw floor, equal concurrency"
FLOOR_SERIAL = "raw floor, one call at a time"
WRITES_VHS = "writes only: VHS store.put"
WRITES_RAW = "writes only: raw PutItem"
ORDER = (VHS, VHS_FLAT, FLOOR, FLOOR_SERIAL, WRITES_VHS, WRITES_RAW)
SETTINGS = {False: (1000, 7), True: (200, 3)}  # by --quick: records, import runs
OPTIONS = {"--rounds": (int, 3, 1, "rounds, each row the median run")}


# Milliseconds per request, by botocore service id: published figures (docs/benchmarks.md).
DELAYS = {"sqs": 20.0, "dynamodb": 5.0, "s3": 20.0}


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

    def requests_per_record(self, service: str) -> float:
        return self.requests[service] / self.records

    def cpu_ms(self, cpu: float | None, per: int = 1) -> float:
        return float("nan") if cpu is None else cpu / self.records * per * 1000


class Meter:
    """Wall time, moto's CPU (/proc, `pid`) and this process's, and requests by service;
    while `latency` is on, a `before-send` sleep of DELAYS[service] on every client made in
    the `with` (the handler's too; sleeping releases the GIL: requests wait concurrently)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.latency = False
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        service = event_name.split(".")[1] if event_name.count(".") >= 2 else ""
        with self._lock:
            self.counts[service] += 1
        if self.latency and DELAYS.get(service):
            time.sleep(DELAYS[service] / 1000)

    def __enter__(self) -> Meter:
        original = self._original = botocore.session.Session.create_client

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(session, *args, **kwargs)
            made.meta.events.register("before-send", self._before_send)
            return made

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        botocore.session.Session.create_client = self._original  # type: ignore[method-assign]

    def _server(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def timed(self, name: str, batches: list, each: Callable, size: Callable = len) -> list:
        """`each(batch)` per batch, measured; the first batch is the warm-up."""
        results = []
        for batch in batches:
            with self._lock:
                requests, server = Counter(self.counts), self._server()
            wall, cpu = time.perf_counter(), time.process_time()
            each(batch)
            seconds, cpu = time.perf_counter() - wall, time.process_time() - cpu
            now = self._server()
            moto = None if server is None or now is None else now - server
            with self._lock:
                requests = self.counts - requests
            results.append(Throughput(name, size(batch), seconds, moto, cpu, requests))
        return results[1:]


def messages(count: int, offset: int = 0) -> list[dict[str, Any]]:
    """`count` contract messages of the catalogue mix without its 1-5 MB class."""
    bodies = [
        b for b in workload.size_mix(count * 2, workload.SEED + offset) if b.size_class != "large"
    ]
    at = workload.timestamp(1).isoformat().replace("+00:00", "Z")
    return [
        {"id": f"{b.id}-{offset}", "updated_at": at, "record": b.record} for b in bodies[:count]
    ]


def feed(source: SqsEventSource, send: Callable, records: list[dict], window: int) -> None:
    """Send `records` in batches, at most `window` sent and not yet deleted; wait until drained."""
    done = threading.Condition()

    def notify(_: Any) -> None:
        with done:
            done.notify_all()

    source.on_invocation = notify
    base = source.stats.deleted
    for start in range(0, len(records), BATCH):
        with done:
            done.wait_for(lambda s=start: s - (source.stats.deleted - base) < window, timeout=60)
        send(records[start : start + BATCH])
    source.run_until_idle(timeout=600)
    if source.stats.item_failures or source.stats.failed_invocations:
        raise RuntimeError(f"the handler failed messages: {source.stats}")


def run_vhs(endpoint: str, batches: list[list[dict]], log: Path, meter: Meter, *, name: str,
            tag: str, window: int, delta_history: bool = True) -> list[Throughput]:  # fmt: skip
    """The producer feeding the local pipeline (the real ingest handler), batching window 0."""
    env = {} if delta_history else {settings.DELTA_HISTORY: "false"}
    stack = LocalStack(endpoint, table_name=f"pipe-vhs-{tag}", bucket_name=f"pipe-vhs-bodies-{tag}",
                       staging_bucket=f"pipe-vhs-staging-{tag}", queue_name=f"pipe-vhs-{tag}",
                       extra_env=env).provision()  # fmt: skip
    # validate=False: the handler validates.
    producer = Producer(stack.queue_url, sqs_client=client("sqs", endpoint), validate=False,
                        s3_client=client("s3", endpoint),
                        staging_bucket=stack.staging_bucket)  # fmt: skip

    def send(chunk: list[dict[str, Any]]) -> None:
        sent = producer.send(chunk)
        if not sent.ok:
            raise RuntimeError(f"send failed: {(sent.refused + sent.not_sent)[:3]}")

    with LocalPipeline(stack, function_log=log, batching_window_seconds=0) as pipeline:
        assert pipeline.source is not None
        return meter.timed(name, batches, lambda r: feed(pipeline.source, send, r, window))


class RawPipelineFloor:
    """The fewest calls that take records from a queue into a table."""

    def __init__(self, endpoint: str, name: str) -> None:
        self.sqs, self.dynamodb = client("sqs", endpoint), client("dynamodb", endpoint)
        self.table = name
        self.dynamodb.create_table(**plain_table(name))
        self.queue_url = self.sqs.create_queue(QueueName=name)["QueueUrl"]

    def put(self, message: dict[str, Any]) -> None:
        data = json.dumps(message["record"], separators=(",", ":"), ensure_ascii=False)
        stamp = {"S": message["updated_at"]}
        item = {"id": {"S": message["id"]}, "t": stamp, "b": {"B": data.encode()}}
        put_if(self.dynamodb, self.table, item, "attribute_not_exists(id) OR t < :t", {":t": stamp})

    def send(self, chunk: list[dict[str, Any]]) -> None:
        entries = [{"Id": str(n), "MessageBody": json.dumps(m)} for n, m in enumerate(chunk)]
        self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)

    def through_queue(self, records: list[dict[str, Any]]) -> None:
        """One call at a time: send, receive, a PutItem each, delete."""
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            self.send(chunk)
            got: list[dict[str, Any]] = []
            while len(got) < len(chunk):
                got += self.sqs.receive_message(
                    QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
            for message in got:
                self.put(json.loads(message["Body"]))
            handles = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                       for n, m in enumerate(got)]  # fmt: skip
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=handles)

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """A Lambda handler that stores a batch's messages at the ingest handler's concurrency."""
        records = event.get("Records") or []
        with ThreadPoolExecutor(max(1, min(CONCURRENCY, BATCH, len(records)))) as pool:
            list(pool.map(lambda r: self.put(json.loads(r["body"])), records))
        return {"batchItemFailures": []}


def run_floors(endpoint: str, batches: list, meter: Meter, tag: str, on: bool) -> list:
    """The raw floors (docs/benchmarks.md) and, without latency, the writes alone."""
    floor = RawPipelineFloor(endpoint, f"pipe-raw-{tag}")
    source = SqsEventSource(client("sqs", endpoint), floor.queue_url, floor.handler,
                            batching_window_seconds=0, function_name="raw-floor")  # fmt: skip
    with source:
        found = meter.timed(FLOOR, batches, lambda r: feed(source, floor.send, r, MAX_WAITING[on]))
    serial = RawPipelineFloor(endpoint, f"pipe-raw-serial-{tag}")
    found += meter.timed(FLOOR_SERIAL, batches, serial.through_queue)
    if on:  # with latency, 2d against d: context for moto's CPU only without
        return found
    direct = RawPipelineFloor(endpoint, f"pipe-raw-writes-{tag}")
    found += meter.timed(WRITES_RAW, batches, lambda r: [direct.put(m) for m in r])
    store = new_store(client("s3", endpoint), client("dynamodb", endpoint), f"pipe-writes-{tag}")
    put = lambda r: [store.put(m["id"], m["record"], updated_at=m["updated_at"]) for m in r]  # noqa: E731
    return found + meter.timed(WRITES_VHS, batches, put)


def import_times(runs: int) -> list[float]:
    """handlers.ingest's cumulative import time (ms), each in a fresh interpreter."""
    pattern = re.compile(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|\s*handlers\.ingest\s*$", re.M)
    lambdas = Path(settings.__file__).resolve().parent.parent
    times = []
    for _ in range(runs + 1):  # the first warms the file cache and is dropped
        command = [sys.executable, "-X", "importtime", "-c", "import handlers.ingest"]
        done = subprocess.run(command, cwd=lambdas, capture_output=True, text=True, check=True)
        times.append(int(pattern.findall(done.stderr)[-1]) / 1000)
    return times[1:]


def measure(records_count: int, rounds: int, progress: Progress) -> dict[tuple[bool, str], list]:
    records, warm = messages(records_count), messages(WARM_UP, offset=1)
    batches = [warm, records]
    runs: dict[tuple[bool, str], list[Throughput]] = {}
    with Meter() as meter, tempfile.TemporaryDirectory() as scratch:
        for round_ in range(rounds):
            with MotoServer() as server:
                meter.pid = server.process.pid if server.process else None
                for on in (False, True):
                    tag = f"{round_}-{'l' if on else 'n'}"
                    progress(f"round {round_ + 1}/{rounds}, latency {on}")
                    log = Path(scratch) / f"ingest-{tag}.log"
                    run = {"log": log, "meter": meter, "window": MAX_WAITING[on]}
                    meter.latency = on
                    got = run_vhs(server.endpoint, batches, name=VHS, tag=f"{tag}-d", **run)
                    got += run_vhs(server.endpoint, batches, name=VHS_FLAT, tag=f"{tag}-f",
                                   delta_history=False, **run)  # fmt: skip
                    got += run_floors(server.endpoint, batches, meter, tag, on)
                    meter.latency = False
                    for t in got:
                        runs.setdefault((on, t.name), []).append(t)
    return runs


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    records, import_runs = SETTINGS[args.quick]
    runs = measure(records, options.rounds, progress)
    progress(f"cold-start import time, {import_runs} fresh interpreters")
    imports = import_times(import_runs)
    # The run of median wall time (of an even number, the faster middle one).
    t = {k: sorted(ts, key=lambda x: x.seconds)[(len(ts) - 1) // 2] for k, ts in runs.items()}

    def ratio(on: bool, name: str, floor: str = FLOOR) -> float:
        return t[on, name].per_second / t[on, floor].per_second

    def spread(on: bool, name: str, floor: str = FLOOR) -> str:
        pairs = zip(runs[on, name], runs[on, floor], strict=True)
        each = [a.per_second / b.per_second for a, b in pairs]
        rounds = f" (rounds: {', '.join(f'{r:.2f}' for r in each)})" if len(each) > 1 else ""
        return f"{ratio(on, name, floor):.2f}x{rounds}"

    rows = [
        [name, "injected" if on else "none", f"{t[on, name].seconds:.2f}",
         f"{t[on, name].per_second:.0f}", f"{ratio(on, name):.2f}x",
         f"{ratio(on, name, FLOOR_SERIAL):.2f}x",
         f"{t[on, name].cpu_ms(t[on, name].server_cpu):.1f}",
         f"{t[on, name].cpu_ms(t[on, name].client_cpu):.1f}",
         ", ".join(f"{t[on, name].requests_per_record(s):.2f}" for s in ("dynamodb", "s3", "sqs"))]
        for name in ORDER for on in (False, True) if (on, name) in t
    ]  # fmt: skip
    headers = ["system", "latency", "seconds", "records/s", "vs floor, equal concurrency",
               "vs floor, one call at a time", "moto CPU ms/record", "client CPU ms/record",
               "requests/record: DynamoDB, S3, SQS"]  # fmt: skip
    d, s, u = (DELAYS[name] for name in ("dynamodb", "sqs", "s3"))
    f = t[True, VHS_FLAT].requests_per_record("s3")  # bodies over the inline threshold
    p = 1 - (1 - f) ** BATCH  # batches with at least one such body
    floor, flat, read_first = d + s, d + p * u + s, 2 * d + p * max(0.0, u - d) + s
    model = [
        ["d, s, u: ms per DynamoDB, SQS, S3 request", f"{d:g}, {s:g}, {u:g}"],
        ["f: records with a body over the inline threshold (S3 requests per record)", f"{f:.3f}"],
        ["P = 1 - (1 - f)^10: batches that wait for an S3 PUT", f"{p:.2f}"],
        ["floor, per batch: d + s", f"{floor:.1f} ms"],
        ["VHS, delta history off: d + P·u + s", f"{flat:.1f} ms"],
        ["VHS as deployed: 2d + P·(u - d) + s", f"{read_first:.1f} ms"],
        ["floor one call at a time: 3s + 10d", f"{3 * s + BATCH * d:.0f} ms"],
        ["VHS over the floor on AWS's latencies, as deployed", f"**{floor / read_first:.2f}x**"],
        ["... with delta history off", f"{floor / flat:.2f}x"],
        ["(d + s) / (2d + s) ≥ 0.9 needs d ≤ s / 8", f"{s / 8:.1f} ms"],
    ]
    per_batch = ["with latency", "ms per batch", "moto CPU ms per batch", "client CPU ms per batch"]
    measured = [
        [name, f"{BATCH * 1000 / t[True, name].per_second:.0f}",
         f"{t[True, name].cpu_ms(t[True, name].server_cpu, BATCH):.0f}",
         f"{t[True, name].cpu_ms(t[True, name].client_cpu, BATCH):.0f}"]
        for name in (FLOOR, VHS_FLAT, VHS)
    ]  # fmt: skip
    median_import = statistics.median(imports)
    goals = [
        ["VHS pipeline vs raw floor of equal concurrency, injected latency",
         f">= {LATENCY_GOAL}x", spread(True, VHS), ratio(True, VHS) >= LATENCY_GOAL],
        ["... the same, delta history off (context)", f">= {LATENCY_GOAL}x",
         spread(True, VHS_FLAT), ratio(True, VHS_FLAT) >= LATENCY_GOAL],
        ["VHS pipeline vs raw floor one call at a time, no latency", f">= {THROUGHPUT_GOAL}x",
         spread(False, VHS, FLOOR_SERIAL), ratio(False, VHS, FLOOR_SERIAL) >= THROUGHPUT_GOAL],
        [f"handler cold-start import, median of {len(imports)} fresh interpreters "
         '(`python -X importtime -c "import handlers.ingest"` in lambdas/, cumulative)',
         f"<= {IMPORT_GOAL_MS:.0f} ms",
         f"{median_import:.0f} ms ({', '.join(f'{ms:.0f}' for ms in imports)})",
         median_import <= IMPORT_GOAL_MS],
    ]  # fmt: skip
    sections = {
        "pipeline": run_line("quick" if args.quick else "full", progress.elapsed)
        + f" {records} records, median of {options.rounds} rounds; the ingest "
        f"handler stores {min(CONCURRENCY, BATCH)} messages of a batch at a time.\n\n"
        + table(headers, rows, right=2),
        "pipeline.model": table(["quantity", "value"], model, right=1),
        "pipeline.measured": table(per_batch, measured, right=1),
        "pipeline.goals": goals_table(goals),
    }
    data = {"runs": {f"{k[1]}, latency {k[0]}": v for k, v in runs.items()}, "imports_ms": imports}
    return Report(sections, data)
