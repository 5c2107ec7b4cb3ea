"""The pipeline: `vhs local up` (the local stack, its ingest pipeline, change feed and read API),
`vhs send` (messages to the ingest queue) and `vhs invoke` (a handler on an event, here)."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .output import console_err, emit_json, json_value, progress


def cmd_local_up(args: argparse.Namespace) -> int:
    from .. import settings
    from ..local.read_api import LocalReadApi
    from ..local.stack import DEFAULT_BUCKET, DEFAULT_PORT, DEFAULT_TABLE, LocalStack, MotoServer

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    console = sys.stdout  # the function's own output goes to its log, not here

    def show(line: str, **fields: Any) -> None:
        text = json.dumps(fields, default=json_value) if args.json else line
        print(text, file=console, flush=True)

    port = DEFAULT_PORT if args.port is None else args.port
    with MotoServer(port, bind=args.host) as server, contextlib.ExitStack() as running:
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
        env[settings.READ_API_URL] = running.enter_context(
            LocalReadApi(stack, port=args.read_api_port, function_log=Path(args.read_api_log))
        ).url
        if args.json:
            emit_json(env)
        else:
            for name, value in env.items():
                print(f"export {name}={value}")
        if args.sam_env_vars:
            from ..local.sam import write_env_vars_file

            written = write_env_vars_file(Path(args.sam_env_vars), env, server.port)
            print(f"sam local invoke: --env-vars {written}", file=sys.stderr)
        if not args.no_pipeline:
            print(
                f"ingest: {stack.queue_name} -> handlers.ingest.handler (its logs: {log}); "
                f"DLQ alarm {stack.alarm_name}: {pipeline.alarm.state}",
                file=sys.stderr,
            )
        print(
            f"read API: {env[settings.READ_API_URL]} -> handlers.read_api.handler, SigV4 "
            f"(service lambda) with these credentials (its logs: {args.read_api_log})",
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
    from .. import resources, settings
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
            settings.CHANGE_TOPIC_ARN: topic_arn,
            settings.CHANGE_DLQ_URL: dlq_url,
            settings.CHANGE_QUEUE_URL: watch_url,
        }


def jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number, line) for each line of a JSON Lines file that is not blank: its bytes as they
    are, without the line terminator (LF or CRLF)."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            line = line.removesuffix(b"\n").removesuffix(b"\r")
            if line.strip():
                yield number, line


def cmd_send(args: argparse.Namespace) -> int:
    from ..ingest.producer import Producer

    path = Path(args.file)
    total = sum(1 for _ in jsonl_lines(path))
    producer = Producer.from_env(validate=not args.no_validate)
    with progress(console=console_err(), disable=args.json or not sys.stderr.isatty()) as bar:
        from rich.markup import escape

        # The description column reads markup: a file name is data.
        task = bar.add_task(f"sending {escape(path.name)}", total=total)
        report = producer.send_lines(jsonl_lines(path), progress=lambda n: bar.advance(task, n))
    if args.json:
        emit_json(
            {
                "lines": total,
                "sent": report.sent,
                "claim_checks": report.claim_checks,
                "refused": [asdict(refusal) for refusal in report.refused],
                "not_sent": [asdict(unsent) for unsent in report.not_sent],
            }
        )
    else:
        print(
            f"sent {report.sent} of {total} lines ({report.claim_checks} by claim check), "
            f"refused {len(report.refused)}, not sent {len(report.not_sent)}"
        )
        for refusal in report.refused:
            reason = f"{refusal.field}: {refusal.reason}"
            print(f"  refused: line {refusal.line}: {reason}", file=sys.stderr)
        for unsent in report.not_sent:
            print(f"  not sent: line {unsent.line}: {unsent.reason}", file=sys.stderr)
    return 0 if report.ok else 1


def read_event(name: str) -> Any:
    """The event JSON in the file `name`, or on standard input for `-` (SAM's `-e -`)."""
    text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    return json.loads(text)


def cmd_invoke(args: argparse.Namespace) -> int:
    """Run a handler as Lambda would: only its response on standard output (one JSON
    document), everything it writes (Powertools' logs and metrics, print) on standard error;
    an error is one line on standard error (the traceback with --debug) and exit status 1."""
    import traceback

    from ..local.invoke import describe, invoke, output_to

    where = "standard input" if args.event == "-" else args.event
    try:
        event = read_event(args.event)
    except OSError as error:
        print(
            f"error: cannot read the event from {where}: {error.strerror or error}", file=sys.stderr
        )
        return 2
    except ValueError as error:
        print(f"error: the event in {where} is not JSON: {error}", file=sys.stderr)
        return 2

    failures: list[str] = []

    def handed_on(event: dict[str, Any], response: Any) -> None:
        # Lambda returns only the first response; what it hands on is reported on stderr.
        print(
            json.dumps({"handed_on": event, "response": response}, default=json_value),
            file=sys.stderr,
        )

    def hand_on_failed(event: dict[str, Any], error: BaseException) -> None:
        if args.debug:
            traceback.print_exception(error, file=sys.stderr)
        failures.append(describe(error))
        handed = json.dumps(event, default=json_value)
        print(f"error: {args.function} (handed on {handed}): {failures[-1]}", file=sys.stderr)

    with output_to(sys.stderr) as stdout:
        try:
            response = invoke(
                args.function,
                event,
                timeout_seconds=args.timeout,
                on_handed_on=handed_on,
                on_handed_on_error=hand_on_failed,
            )
        except Exception as error:  # the handler's error: what Lambda reports as a function error
            if args.debug:
                traceback.print_exception(error, file=sys.stderr)
            print(f"error: {args.function}: {describe(error)}", file=sys.stderr)
            return 1
    emit_json(response, file=stdout)
    return 1 if failures else 0
