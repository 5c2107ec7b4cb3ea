"""The `vhs` command line.

    vhs local up [--port N]          start the local stack and print its environment
    vhs put ID FILE --updated-at T   store a record (JSON, or raw bytes with --raw)
    vhs get ID [--version N]         print a record's body
    vhs history ID                   list the retained versions
    vhs delete ID --deleted-at T     delete a record
    vhs send FILE.jsonl              send messages to the ingest queue
    vhs gc [--dry-run] [--grace 1h]  delete bodies nothing references
    vhs verify [--deep]              check every current and retained pointer
    vhs dlq list|redrive|discard     the ingest dead-letter queue
    vhs invoke ingest EVENT.json     run the ingest handler on an event, here

Every command takes --json for output that scripts can parse, and --stack NAME to read its
configuration from a deployed stage's stack outputs. Otherwise configuration comes from the
environment that `vhs local up` prints (or AWS's own, for a deployed stack).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import RecordNotFound, VhsError


def _store() -> Any:
    from ..store import VersionedHybridStore

    return VersionedHybridStore.from_env()


def _console() -> Any:
    from rich.console import Console

    return Console()


def _emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _now() -> str:
    return datetime.now(UTC).isoformat()


# --- local ---------------------------------------------------------------------------------


def cmd_local_up(args: argparse.Namespace) -> int:
    from ..local.stack import DEFAULT_BUCKET, DEFAULT_TABLE, LocalStack, MotoServer

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    console = sys.stdout  # the function's own output goes to its log, not here

    def show(line: str, **fields: Any) -> None:
        text = json.dumps(fields, default=str) if args.json else line
        print(text, file=console, flush=True)

    with MotoServer(args.port) as server, contextlib.ExitStack() as running:
        stack = LocalStack(
            server.endpoint,
            table_name=args.table or DEFAULT_TABLE,
            bucket_name=args.bucket or DEFAULT_BUCKET,
            pipeline=not args.no_pipeline,
        ).provision()
        if not args.no_pipeline:
            from ..local.sqs_source import LocalPipeline

            def on_alarm(t: Any) -> None:
                show(
                    f"alarm {stack.alarm_name}: {t.old} -> {t.new} at {t.at:%H:%M:%S} "
                    f"({t.value:g} visible in the DLQ)",
                    alarm=stack.alarm_name,
                    old=t.old,
                    new=t.new,
                    at=t.at.isoformat(),
                    visible=t.value,
                    reason=t.reason,
                )

            def on_invocation(i: Any) -> None:
                if i.error:
                    show(
                        f"ingest: batch of {len(i.message_ids)} failed: {i.error}",
                        invocation=i.request_id,
                        messages=len(i.message_ids),
                        error=i.error,
                    )

            log = Path(args.function_log)
            pipeline = running.enter_context(
                LocalPipeline(stack, function_log=log, on_alarm=on_alarm)
            )
            pipeline.running()[0].on_invocation = on_invocation
        env = stack.env()
        if not args.no_pipeline:
            env.update(running.enter_context(_local_change_feed(stack)))
        if args.json:
            _emit_json(env)
        else:
            for name, value in env.items():
                print(f"export {name}={value}")
        if not args.no_pipeline:
            print(
                f"ingest: {stack.queue_name} -> handlers.ingest.handler (its logs: {log}); "
                f"DLQ alarm {stack.alarm_name}: {pipeline.alarm.state}",
                file=sys.stderr,
            )
        print("ready", flush=True)
        stop.wait()
        # Leaving the ExitStack stops polling and lets the batch in hand finish.
    return 0


@contextlib.contextmanager
def _local_change_feed(stack: Any) -> Any:
    """The change feed on the local stack: the table's stream drives the real `changes`
    handler, which publishes to an SNS FIFO topic; a FIFO queue subscribed to it lets you
    watch the notifications. Yields the variables to export."""
    from .. import resources
    from ..local.stack import client
    from ..local.stream_source import LocalChangeFeed

    sns, sqs = (
        client("sns", stack.endpoint, stack.region),
        client("sqs", stack.endpoint, stack.region),
    )
    topic_arn = resources.create_change_topic(sns, "vhs-local-changes.fifo")
    dlq_url = sqs.create_queue(
        QueueName="vhs-local-changes-dlq",
        Attributes={
            "MessageRetentionPeriod": str(resources.CHANGES.dlq_retention_seconds),
            "SqsManagedSseEnabled": "true",
        },
    )["QueueUrl"]
    watch_url = resources.subscribe_fifo_queue(sns, sqs, topic_arn, "vhs-local-changes-watch.fifo")
    feed = LocalChangeFeed(
        stack.endpoint,
        stack.table_name,
        topic_arn,
        stack.bucket_name,
        prefix=stack.prefix,
        region=stack.region,
        dlq_url=dlq_url,
    )
    with feed:
        yield {
            "VHS_CHANGE_TOPIC_ARN": topic_arn,
            "VHS_CHANGE_DLQ_URL": dlq_url,
            "VHS_CHANGE_QUEUE_URL": watch_url,
        }


# --- records -------------------------------------------------------------------------------


def cmd_put(args: argparse.Namespace) -> int:
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    record: Any = data
    if not args.raw:
        try:
            record = json.loads(data)
        except ValueError:
            print(f"{args.file} is not JSON; pass --raw to store it as bytes", file=sys.stderr)
            return 2
    result = _store().put(
        args.id, record, updated_at=args.updated_at or _now(), content_type=args.content_type
    )
    if args.json:
        _emit_json(
            {
                "id": result.id,
                "outcome": str(result.outcome),
                "version": result.version,
                "content_hash": result.content_hash,
                "location": result.location,
            }
        )
    else:
        print(f"{result.id}: {result.outcome}, version {result.version} ({result.location})")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    record = _store().get(args.id, version=args.version)
    if args.json:
        out: dict[str, Any] = {
            "id": record.id,
            "version": record.version,
            "updated_at": record.updated_at.isoformat(),
            "content_type": record.content_type,
            "content_hash": record.content_hash,
        }
        if record.content_type == "application/json":
            out["record"] = record.json()
        else:
            out["body_base64"] = base64.b64encode(record.body).decode()
        _emit_json(out)
    else:
        sys.stdout.buffer.write(record.body)
        if sys.stdout.isatty():
            sys.stdout.write("\n")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    versions = _store().history(args.id)
    if args.json:
        _emit_json([v.__dict__ for v in versions])
        return 0
    from rich.table import Table

    table = Table(title=f"history of {args.id}")
    for column in ("version", "updated_at", "size", "sha256", "where"):
        table.add_column(column, justify="right" if column in {"version", "size"} else "left")
    for v in versions:
        table.add_row(
            str(v.version),
            v.updated_at.isoformat(),
            "-" if v.deleted else f"{v.size:,}",
            "(deleted)" if v.deleted else (v.content_hash or "")[:16] + "…",
            v.location or "",
        )
    _console().print(table)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    result = _store().delete(args.id, deleted_at=args.deleted_at or _now())
    if args.json:
        _emit_json({"id": result.id, "outcome": str(result.outcome), "version": result.version})
    else:
        print(f"{result.id}: {result.outcome}, version {result.version}")
    return 0


def cmd_send(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from ..ingest.producer import Producer

    path = Path(args.file)
    total = sum(1 for line in path.open("rb") if line.strip())
    producer = Producer.from_env(validate=not args.no_validate)
    bad_lines: list[tuple[int, str]] = []

    def messages() -> Any:
        for number, line in enumerate(path.open("rb"), start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as error:
                bad_lines.append((number, f"line {number}: not JSON: {error}"))
                progress.advance(task)

    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(
        *columns, disable=args.json or not sys.stderr.isatty(), console=_console_err()
    ) as progress:
        task = progress.add_task(f"sending {path.name}", total=total)
        report = producer.send(messages(), progress=lambda n: progress.advance(task, n))
    failures = [reason for _, reason in bad_lines] + [
        f"message {index + 1}: {reason}" for index, reason in report.failed
    ]
    if args.json:
        _emit_json({"sent": report.sent, "claim_checks": report.claim_checks, "failed": failures})
    else:
        print(f"sent {report.sent} of {total} messages ({report.claim_checks} by claim check)")
        for reason in failures:
            print(f"  not sent: {reason}", file=sys.stderr)
    return 0 if not failures else 1


def cmd_invoke(args: argparse.Namespace) -> int:
    from ..local.invoke import invoke

    event = json.loads(Path(args.event).read_text())
    response = invoke(args.function, event)
    _emit_json(response)
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
    from rich.table import Table

    from ..keys import all_shards
    from ..maintenance.gc import GarbageCollector, GcReport, parse_duration

    try:
        grace = parse_duration(args.grace)
    except ValueError as error:
        print(f"error: --grace: {error}", file=sys.stderr)
        return 2
    shards = args.shard or all_shards()
    collector = GarbageCollector(_store(), grace=grace, dry_run=args.dry_run)
    total = GcReport(dry_run=args.dry_run)
    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_console_err(), disable=args.json) as progress:
        task = progress.add_task("collecting shards", total=len(shards))
        for shard in shards:
            total.add(collector.collect_shard(shard))
            progress.advance(task)
    if args.json:
        _emit_json(total.as_dict())
        return 0
    table = Table(
        title="garbage collection" + (" (dry run: nothing deleted)" if args.dry_run else "")
    )
    table.add_column("")
    table.add_column("", justify="right")
    rows = [
        ("shards", total.shards),
        ("objects listed", total.listed),
        ("within grace", total.young),
        ("referenced", total.referenced),
        ("orphaned", total.orphaned),
        (
            "would delete" if args.dry_run else "deleted",
            total.orphaned if args.dry_run else total.deleted,
        ),
        ("left for a later run", total.skipped),
        ("bytes reclaimed", total.bytes_reclaimed),
        ("markers cleared", total.markers_cleared),
        ("unrecognised keys", total.unrecognised),
    ]
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    _console().print(table)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress
    from rich.table import Table

    from ..maintenance.verify import Verifier

    verifier = Verifier(
        _store(),
        deep=args.deep,
        segments=args.segments,
        workers=args.workers,
        consistent_reads=args.consistent,
    )
    err = _console_err()

    def shown(finding: Any) -> None:
        if not args.json:
            version = f"v{finding.version}" if finding.version is not None else "-"
            err.print(
                f"[red]{finding.kind}[/] {finding.id} {version} {finding.location or ''} "
                f"{finding.detail}",
                highlight=False,
            )

    with Progress(
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        disable=args.json,
    ) as progress:
        task = progress.add_task("verifying items", total=None)

        def advance(state: Any) -> None:
            progress.update(task, completed=state.items, total=state.estimated_items)

        report = verifier.run(args.ids or None, on_finding=shown, progress=advance)
    if args.json:
        _emit_json(report.as_dict())
    else:
        table = Table(title="verification" + (" (deep: every S3 body hashed)" if args.deep else ""))
        table.add_column("")
        table.add_column("", justify="right")
        for name in (
            "items",
            "versions",
            "inline",
            "s3",
            "s3_objects",
            "deletes",
            "unconfirmed",
            "findings_total",
        ):
            table.add_row(name.replace("_", " "), f"{getattr(report, name):,}")
        for kind, count in sorted(report.by_kind.items()):
            table.add_row(f"  {kind}", f"{count:,}")
        _console().print(table)
    return 0 if report.ok else 1


def _dlq() -> Any:
    from ..ingest.dlq import DeadLetterQueue

    return DeadLetterQueue.from_env()


def _dlq_filter(args: argparse.Namespace) -> Any:
    from ..ingest.dlq import RedriveFilter

    return RedriveFilter(
        error_types=frozenset(args.type or ()),
        error_fields=frozenset(args.field or ()),
        id_prefix=args.id_prefix,
        retries_exhausted=args.retries_exhausted,
        max_messages=args.max,
    )


def _age(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if days else f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def cmd_dlq_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    queue = _dlq()
    depth = queue.depth()
    letters = queue.list(limit=args.limit, resolve_claim_checks=args.resolve)
    if args.json:
        _emit_json([letter.as_dict() for letter in letters])
        return 0
    table = Table(
        title=f"dead letters: {depth.visible} visible, {depth.in_flight} in flight (not shown)"
    )
    for column in ("message", "record id", "type", "field", "reason", "age", "receives"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        table.add_row(
            letter.message_id[:8],
            letter.record_id or ("(claim check)" if letter.claim_check else "?"),
            letter.error_type,
            letter.error_field or "",
            letter.reason or "",
            _age(letter.age().total_seconds()),
            str(letter.receive_count),
        )
    _console().print(table)
    return 0


def cmd_dlq_redrive(args: argparse.Namespace) -> int:
    queue = _dlq()
    report = queue.redrive(
        _dlq_filter(args), dry_run=args.dry_run, use_move_task=False if args.no_move_task else None
    )
    if args.json:
        _emit_json(report.as_dict())
    elif report.task_handle:
        print(f"started move task {report.task_handle}: ~{report.to_move} messages")
    else:
        verb = "would move" if args.dry_run else "moved"
        print(
            f"{verb} {report.moved}, skipped {report.skipped}, failed {report.failed}, "
            f"duplicated {report.duplicated} ({report.method})"
        )
        for error in report.errors:
            print(f"  {error}", file=sys.stderr)
    return 0 if not report.failed else 1


def cmd_dlq_discard(args: argparse.Namespace) -> int:
    selection = _dlq_filter(args)
    if selection.selects_everything and not args.all:
        print("error: give a filter, or --all to discard every dead letter", file=sys.stderr)
        return 2
    report = _dlq().discard(selection, everything=args.all, dry_run=args.dry_run)
    if args.json:
        _emit_json(report.as_dict())
    else:
        verb = "would discard" if args.dry_run else "discarded"
        print(f"{verb} {report.discarded}, skipped {report.skipped}, failed {report.failed}")
    return 0 if not report.failed else 1


def _console_err() -> Any:
    from rich.console import Console

    return Console(stderr=True)


# --- wiring --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vhs", description="VHS: a versioned hybrid store")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--stack",
        metavar="NAME",
        help="configure from a deployed stage's stack outputs (e.g. Vhs-prod)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler: Any, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
        p.set_defaults(handler=handler)
        return p

    local = sub.add_parser("local", help="the local stack on moto's server")
    local_sub = local.add_subparsers(dest="local_command", required=True)
    up = local_sub.add_parser("up", help="start it; print its environment, then 'ready'")
    up.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 4567)")
    up.add_argument("--table", help="table name")
    up.add_argument("--bucket", help="bucket name")
    up.add_argument(
        "--no-pipeline", action="store_true", help="the store only: no queues, no ingest"
    )
    up.add_argument(
        "--function-log",
        default=".vhs/logs/ingest.log",
        help="where the ingest function's logs and metrics go (default .vhs/logs/ingest.log)",
    )
    up.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    up.set_defaults(handler=cmd_local_up)

    p = command("put", cmd_put, "store a record")
    p.add_argument("id")
    p.add_argument("file", help="a file, or - for standard input")
    p.add_argument("--updated-at", help="RFC 3339 source timestamp (default: now)")
    p.add_argument("--content-type")
    p.add_argument("--raw", action="store_true", help="store the bytes as they are, not JSON")

    p = command("get", cmd_get, "print a record's body")
    p.add_argument("id")
    p.add_argument("--version", type=int)

    p = command("history", cmd_history, "list the retained versions")
    p.add_argument("id")

    p = command("send", cmd_send, "send a JSON Lines file of messages to the ingest queue")
    p.add_argument("file", help="one message per line (see docs/ingest.md)")
    p.add_argument("--no-validate", action="store_true", help="send lines as they are")

    p = command("gc", cmd_gc, "delete S3 bodies that no retained version references")
    p.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    p.add_argument("--grace", default="1h", help="skip objects younger than this (default 1h)")
    p.add_argument("--shard", action="append", help="only this shard (00-ff); repeatable")

    p = command("verify", cmd_verify, "check every current and retained pointer")
    p.add_argument("ids", nargs="*", help="only these ids (default: the whole table)")
    p.add_argument("--deep", action="store_true", help="read and hash every S3 body")
    p.add_argument("--segments", type=int, default=4, help="parallel scan segments")
    p.add_argument("--workers", type=int, default=16, help="concurrent S3 lookups")
    p.add_argument("--consistent", action="store_true", help="strongly consistent scan")

    dlq = sub.add_parser("dlq", help="the ingest dead-letter queue")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)

    def dlq_command(name: str, handler: Any, help: str) -> argparse.ArgumentParser:
        p = dlq_sub.add_parser(name, help=help)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
        p.set_defaults(handler=handler)
        return p

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument("--type", action="append", help="error type, e.g. InvalidMessage")
        p.add_argument("--field", action="append", help="error field, e.g. updated_at")
        p.add_argument("--id-prefix", help="record ids starting with this")
        p.add_argument(
            "--retries-exhausted",
            action="store_true",
            help="only messages the redrive policy moved (transient failures)",
        )
        p.add_argument("--max", type=int, help="at most this many")
        p.add_argument("--dry-run", action="store_true")

    p = dlq_command("list", cmd_dlq_list, "each dead letter's id, error, reason and age")
    p.add_argument("--limit", type=int)
    p.add_argument("--resolve", action="store_true", help="read claim checks' record ids")
    p = dlq_command("redrive", cmd_dlq_redrive, "move dead letters back to the ingest queue")
    filters(p)
    p.add_argument("--no-move-task", action="store_true", help="never use StartMessageMoveTask")
    p = dlq_command("discard", cmd_dlq_discard, "delete dead letters (e.g. already resent)")
    filters(p)
    p.add_argument("--all", action="store_true", help="every dead letter")

    p = command("invoke", cmd_invoke, "run a handler on an event file, in this process")
    p.add_argument("function", choices=["ingest", "changes", "gc"])
    p.add_argument("event", help="an event JSON file, e.g. events/sqs-small-record.json")

    p = command("delete", cmd_delete, "delete a record")
    p.add_argument("id")
    p.add_argument("--deleted-at", help="RFC 3339 timestamp (default: now)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "port", 0) is None:
        from ..local.stack import DEFAULT_PORT

        args.port = DEFAULT_PORT
    try:
        if args.stack:
            from .stackconfig import env_from_stacks

            os.environ.update(env_from_stacks(args.stack))
        return args.handler(args)
    except RecordNotFound as error:
        print(f"not found: {error}", file=sys.stderr)
        return 3
    except VhsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
