"""`make demo`: the ingest pipeline on the local stack (moto's server on 127.0.0.1).

Starts the local stack with its pipeline (the ingest queue, the DLQ with the deployed redrive
policy, the event-source emulator running the real Lambda handler, the DLQ alarm) and sends a
scripted workload through the producer, in three waves so that the order of arrival is the
script's: small records, a 5 MB record that goes by claim check, an update that arrives after
a newer one, duplicates, a delete and a put that arrives after it, and poison messages. Then
it prints what happened to each id, the DLQ with the reasons, and the alarm.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import signal
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from vhs import shapes
from vhs.ingest.staging import S3Location, claim_check_body
from vhs.settings import STAGING_PREFIX
from vhs.store import VersionedHybridStore

from ..admin.producer import Producer
from .function_logs import read_function_log
from .process_environment import environment
from .runners import LocalPipeline
from .stack import LocalStack, client, local_stack

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
FUNCTION_LOG = Path(".vhs/logs/demo-ingest.log")
IDS = ("b1000001", "b1000002", "b1000003", "scan-0001.tiff")
OUTCOMES = ("stored", "deleted", "stale", "unchanged")


def _at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat().replace("+00:00", "Z")


def _large(size: int) -> bytes:
    # Incompressible, so it really goes to S3.
    out, block = bytearray(), b"vhs-demo"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


def _put(id: str, hours: float, record: Any) -> dict[str, Any]:
    return {"id": id, "updated_at": _at(hours), "record": record}


def waves(staging_bucket: str) -> list[tuple[str, list[dict[str, Any]], list[str]]]:
    """(what the wave shows, contract messages, raw poison bodies), sent in this order."""
    scan = _large(5 * 1024 * 1024)
    moby = {"title": "Moby-Dick", "creator": "Melville, Herman"}
    middlemarch = {"title": "Middlemarch", "creator": "Eliot, George"}
    missing_claim_check = claim_check_body(
        S3Location(staging_bucket, f"{shapes.STAGING_PREFIX}claim-checks/never-uploaded.json")
    )
    return [
        (
            "small records, and a 5 MB scan that goes by claim check",
            [
                _put("b1000001", 0, moby),
                _put("b1000002", 0, middlemarch),
                _put("b1000003", 0, {"title": "Bleak House"}),
                {
                    "id": "scan-0001.tiff",
                    "updated_at": _at(0),
                    "body_base64": base64.b64encode(scan).decode(),
                    "content_type": "image/tiff",
                },
            ],
            [],
        ),
        (
            "an update, duplicates, a delete, and poison",
            [
                _put("b1000001", 2, {**moby, "title": "Moby-Dick; or, The Whale"}),
                _put("b1000002", 0, middlemarch),
                _put("b1000002", 0, middlemarch),
                {"id": "b1000003", "updated_at": _at(3), "deleted": True},
                {"id": "b1000004", "record": {"title": "no timestamp"}},
                {"id": "b1000005", "updated_at": "2026-11-01T09:00:00", "record": {}},
                {"id": "b1000006", "updated_at": _at(0), "record": {}, "isbn": "0-14"},
            ],
            ["this is not JSON", missing_claim_check],
        ),
        (
            "an older update arriving late, and a put that arrives after the delete",
            [
                _put("b1000001", 1, {**moby, "title": "Moby Dick (draft)"}),
                _put("b1000003", 2, {"title": "Bleak House (late)"}),
            ],
            [],
        ),
    ]


def main() -> int:
    """The demo; on Ctrl-C (or SIGTERM), the stack stopped and one line, exit 130."""
    started = time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _demo(started)
    except KeyboardInterrupt:
        print(
            f"stopped: interrupted (Ctrl-C or SIGTERM) after {time.monotonic() - started:.1f}s; "
            "the local stack is stopped and what it held is gone",
            file=sys.stderr,
        )
        return 130


def _demo(started: float) -> int:
    # Bound to stdout now: while the pipeline runs, other threads' output goes to the log.
    console = Console(file=sys.stdout)
    if not console.is_terminal:
        console = Console(file=sys.stdout, width=120)
    FUNCTION_LOG.parent.mkdir(parents=True, exist_ok=True)
    FUNCTION_LOG.write_text("")
    with contextlib.ExitStack() as running:
        with console.status("starting the local stack (moto's server on 127.0.0.1)"):
            stack = running.enter_context(local_stack())
        running.enter_context(environment(stack.env()))
        _run(console, stack, started)
    console.print(f"done in {time.monotonic() - started:.1f}s")
    return 0


def _run(console: Console, stack: LocalStack, started: float) -> None:
    shape = _shape()
    console.print(
        f"[bold]local stack[/] at {stack.endpoint}: queue {stack.queue_name} "
        f"(visibility {shape.visibility_timeout_seconds}s, DLQ after {shape.max_receive_count} "
        f"receives), batch size {shape.batch_size}, batching window "
        f"{shape.max_batching_window_seconds}s"
    )
    console.print(f"the function's logs and EMF metrics go to {FUNCTION_LOG}")

    def on_alarm(t: Any) -> None:
        console.print(
            f"  [bold red]alarm[/] {stack.alarm_name}: {t.old} -> {t.new} at {t.at:%H:%M:%S} "
            f"({t.value:g} visible in the DLQ)"
        )

    sqs = client("sqs", stack.endpoint, stack.region)
    producer = Producer(
        stack.queue_url,
        sqs_client=sqs,
        s3_client=client("s3", stack.endpoint, stack.region),
        staging_bucket=stack.staging_bucket,
        staging_prefix=stack.env()[STAGING_PREFIX],
        validate=False,  # the poison goes out too
    )
    sent = 0
    with LocalPipeline(stack, function_log=FUNCTION_LOG, on_alarm=on_alarm) as pipeline:
        source, alarm = pipeline.running()
        for number, (what, messages, raw) in enumerate(waves(stack.staging_bucket), start=1):
            wave_started = time.monotonic()
            report = producer.send(messages)
            for body in raw:
                sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)
            sent += report.sent + len(raw)
            count = report.sent + len(raw)
            claim = f" ({report.claim_checks} by claim check)" if report.claim_checks else ""
            console.print(f"wave {number}: {what}: sent {count} message{'s' * (count != 1)}{claim}")
            pipeline.drain(timeout=45)
            console.print(f"  queue empty after {time.monotonic() - wave_started:.1f}s")
        final_state = alarm.evaluate()
        transitions = list(alarm.transitions)
        stats = source.stats
    # The pipeline (and the alarm evaluator) have stopped: reading the DLQ now cannot move
    # the alarm.
    store = VersionedHybridStore.from_env()
    console.print(_outcomes_table(store))
    dead = _dead_letters(sqs, stack.dlq_url)
    console.print(_dlq_table(dead))
    console.print(_alarm_table(stack, transitions, final_state))
    console.print(
        f"{sent} messages sent; the event source made {stats.invocations} invocations on "
        f"{stats.received} deliveries ({stats.redeliveries} redelivered), deleted "
        f"{stats.deleted}; {len(dead)} dead-lettered; "
        f"{time.monotonic() - started:.1f}s since start"
    )


def _shape() -> Any:
    from vhs.shapes import INGEST

    return INGEST


def _outcomes_table(store: VersionedHybridStore) -> Table:
    outcomes: dict[str, list[str]] = defaultdict(list)
    for line in read_function_log(FUNCTION_LOG):
        if line.get("message") in OUTCOMES and line.get("record_id"):
            outcomes[line["record_id"]].append(_outcome(line))
    table = Table(title="what the pipeline did with each id, in arrival order")
    for column in ("id", "outcomes", "current", "versions held", "body"):
        table.add_column(column)
    for rid in IDS:
        history = store.history(rid)
        latest = history[-1] if history else None
        if latest is None:
            body = "(never stored)"
        elif latest.deleted:
            body = "(deleted)"
        else:
            record = store.get(rid)
            body = (
                _short(record.body.decode(), 48)
                if record.content_type == "application/json"
                else f"{record.content_type}, {len(record.body):,} bytes in S3, sha256 verified"
            )
        table.add_row(
            rid,
            "\n".join(outcomes.get(rid, [])),
            f"v{latest.version}" if latest else "-",
            ", ".join(f"v{h.version}" + (" (delete)" if h.deleted else "") for h in history),
            body,
        )
    return table


def _outcome(line: dict[str, Any]) -> str:
    """One message's outcome from its log line: with the version it wrote or found, or, for
    a message coalesced into another of its batch (vhs.ingest.coalesce), the one it was
    coalesced into (its line names no version: it wrote nothing)."""
    if line.get("coalesced_into"):
        return f"{line['message']} (coalesced)"
    version = line.get("version")
    return line["message"] if version is None else f"{line['message']} (v{version})"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _dead_letters(sqs: Any, dlq_url: str) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        messages = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            found[message["MessageId"]] = message
    return list(found.values())


def _dlq_table(dead: list[dict[str, Any]]) -> Table:
    table = Table(title=f"the dead-letter queue: {len(dead)} messages, with their reasons")
    for column in ("body", "error", "field", "reason", "first seen"):
        table.add_column(column, overflow="fold")
    for message in dead:
        attributes = {k: v.get("StringValue", "") for k, v in message["MessageAttributes"].items()}
        body = message["Body"]
        table.add_row(
            _short(body, 40),
            attributes.get("vhs-error-type", ""),
            attributes.get("vhs-error-field", ""),
            attributes.get("vhs-error-message", ""),
            attributes.get("vhs-first-seen", "")[11:19],
        )
    return table


def _alarm_table(stack: LocalStack, transitions: list[Any], final_state: str) -> Table:
    cloudwatch = client("cloudwatch", stack.endpoint, stack.region)
    alarm = cloudwatch.describe_alarms(AlarmNames=[stack.alarm_name])["MetricAlarms"][0]
    table = Table(
        title=f"the DLQ alarm {stack.alarm_name}: {alarm['StateValue']} "
        f"(CloudWatch's state; last evaluation {final_state})"
    )
    for column in ("at", "from", "to", "why"):
        table.add_column(column, overflow="fold")
    for t in transitions:
        table.add_row(f"{t.at:%H:%M:%S}", t.old, t.new, t.reason)
    if not transitions:
        table.add_row("-", alarm["StateValue"], alarm["StateValue"], "no change")
    return table


if __name__ == "__main__":
    raise SystemExit(main())
