"""The pipeline: `vhs local up` (the local stack, its ingest pipeline, change feed and read API)
and `vhs invoke` (a handler on an event, here). `vhs send`, the messages sent into it, is
send.py's."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vhs.errors import InvalidInput

from .output import emit_json, json_value, now, print_env


def cmd_local_up(args: argparse.Namespace) -> int:
    if args.detach:
        from .local_session import detach

        return detach(args, serve_local_stack)
    from ..errors import LocalStackError

    try:
        return serve_local_stack(args)
    except LocalStackError as error:
        print(f"error: the local stack did not start ({error})", file=sys.stderr)
        return 1


# SIGINT (Ctrl-C) and SIGTERM stop `vhs local up`, which then says so and exits 0.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stopped(BaseException):
    """A stop signal arrived: raised in the main thread, wherever it was (a BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way swallows it)."""


def _stopping(signum: int, frame: Any) -> None:
    # Raised, not an Event set: a handler that takes a lock the interrupted code may hold
    # (Event.set in a stop.wait() just entered) deadlocks. Further signals are ignored, so
    # stopping is not cut short.
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise _Stopped


def serve_local_stack(
    args: argparse.Namespace,
    ready: Callable[[dict[str, str], str, str], None] | None = None,
    *,
    detached: bool = False,
) -> int:
    """Run the local stack until SIGINT or SIGTERM: print its environment, then
    `ready(env, endpoint, since)` (by default, the line "ready"); on the way out, a line
    saying it stopped. A port another stack (or program) holds raises LocalStackError
    naming it, before anything is served."""
    from vhs import settings
    from vhs.shapes.local import DEFAULT_PORT

    from ..local.owner import this_owner
    from ..local.stack import MotoServer

    port = (
        settings.whole_number(settings.LOCAL_PORT, DEFAULT_PORT) if args.port is None else args.port
    )
    since = now()
    server = MotoServer(
        port,
        bind=args.host,
        sqs_index=not args.moto_sqs_as_is,
        owner=this_owner(port, detached=detached, since=since),
    )
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stopping)
    # Leaving _serve's ExitStack stops polling and lets the batch in hand finish.
    with contextlib.suppress(_Stopped):
        _serve(args, server, ready, since)
    print(
        f"stopped: the local stack on {server.endpoint}; what it held is gone (moto keeps "
        "it in memory)",
        file=sys.stderr,
        flush=True,
    )
    return 0


def _serve(
    args: argparse.Namespace,
    server: Any,
    ready: Callable[[dict[str, str], str, str], None] | None,
    since: str,
) -> None:
    """Provision the local stack on `server`, start its services, say it is ready, and
    serve until a stop signal."""
    from ..local.stack import DEFAULT_BUCKET, DEFAULT_TABLE, LocalStack

    with server, contextlib.ExitStack() as running:
        stack = LocalStack(
            server.endpoint,
            table_name=args.table or DEFAULT_TABLE,
            bucket_name=args.bucket or DEFAULT_BUCKET,
            pipeline=not args.no_pipeline,
        ).provision()
        pipeline = None if args.no_pipeline else _start_pipeline(args, stack, running)
        env = _start_services(args, stack, running)
        print_env(env, as_json=args.json)
        _tell_where(args, env, stack, pipeline, server.port)
        if ready is None:
            print("ready", flush=True)
        else:
            ready(env, server.endpoint, since)
        threading.Event().wait()  # until a stop signal raises _Stopped here


def _start_pipeline(args: argparse.Namespace, stack: Any, running: contextlib.ExitStack) -> Any:
    """The local ingest pipeline, entered on `running`; its DLQ alarm's transitions and its
    failed batches are shown on standard output (lines, or JSON under --json)."""
    from ..local.runners import LocalPipeline

    console = sys.stdout  # the function's own output goes to its log, not here

    def show(line: str, **fields: Any) -> None:
        text = json.dumps(fields, default=json_value) if args.json else line
        print(text, file=console, flush=True)

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

    pipeline = running.enter_context(
        LocalPipeline(stack, function_log=Path(args.function_log), on_alarm=on_alarm)
    )
    pipeline.running()[0].on_invocation = on_invocation
    return pipeline


def _start_services(
    args: argparse.Namespace, stack: Any, running: contextlib.ExitStack
) -> dict[str, str]:
    """The change feed (with the pipeline) and the read API, entered on `running`; the
    stack's environment, theirs included."""
    from vhs import settings

    from ..local.read_api import LocalReadApi

    env = stack.env()
    if not args.no_pipeline:
        env.update(running.enter_context(_local_change_feed(stack, watch=args.watch_queue)))
    env[settings.READ_API_URL] = running.enter_context(
        LocalReadApi(stack, port=args.read_api_port, function_log=Path(args.read_api_log))
    ).url
    return env


def _tell_where(
    args: argparse.Namespace, env: dict[str, str], stack: Any, pipeline: Any, port: int
) -> None:
    """On standard error: the SAM environment file written, and where ingest and the read
    API run and log."""
    from vhs import settings

    if args.sam_env_vars:
        from ..local.sam import write_env_vars_file

        written = write_env_vars_file(Path(args.sam_env_vars), env, port)
        print(f"sam local invoke: --env-vars {written}", file=sys.stderr)
    if pipeline is not None:
        print(
            f"ingest: {stack.queue_name} -> handlers.ingest.handler "
            f"(its logs: {Path(args.function_log)}); "
            f"DLQ alarm {stack.alarm_name}: {pipeline.alarm.state}",
            file=sys.stderr,
        )
    print(
        f"read API: {env[settings.READ_API_URL]} -> handlers.read_api.handler, SigV4 "
        f"(service lambda) with these credentials (its logs: {args.read_api_log})",
        file=sys.stderr,
    )


@contextlib.contextmanager
def _local_change_feed(stack: Any, *, watch: bool = False) -> Any:
    """The change feed on the local stack: the table's stream drives the real `changes`
    handler, which publishes to an SNS FIFO topic. With `watch`, a FIFO queue subscribed to
    it lets you read the notifications; it is opt-in because nothing drains it, so it would
    hold a message per version stored (memory, in moto's server) for as long as the stack
    runs. Yields the variables to export."""
    from vhs import settings, shapes
    from vhs_ops import provisioning

    from ..local.runners import LocalChangeFeed
    from ..local.stack import client

    sns, sqs = (
        client("sns", stack.endpoint, stack.region),
        client("sqs", stack.endpoint, stack.region),
    )
    topic_arn = provisioning.create_change_topic(sns, "vhs-local-changes.fifo")
    dlq_url = sqs.create_queue(
        QueueName="vhs-local-changes-dlq",
        Attributes={
            "MessageRetentionPeriod": str(shapes.CHANGES.dlq_retention_seconds),
            "SqsManagedSseEnabled": "true",
        },
    )["QueueUrl"]
    watched = {}
    if watch:
        watched[settings.CHANGE_QUEUE_URL] = provisioning.subscribe_fifo_queue(
            sns, sqs, topic_arn, "vhs-local-changes-watch.fifo"
        )
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
            **watched,
        }


def read_event(name: str) -> Any:
    """The event JSON in the file `name`, or on standard input for `-` (SAM's `-e -`)."""
    text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    return json.loads(text)


def cmd_invoke(args: argparse.Namespace) -> int:
    """Run a handler as Lambda would: only its response on standard output (one JSON
    document), everything it writes (Powertools' logs and metrics, print) on standard error;
    an error is one line on standard error (the traceback with --debug) and exit status 1."""
    import traceback

    from ..errors import WrongEvent, describe_error
    from ..local.event_shapes import check_event
    from ..local.invoke import invoke, output_to

    where = "standard input" if args.event == "-" else args.event
    try:
        event = read_event(args.event)
    except OSError as error:
        raise InvalidInput("EVENT", f"cannot read {where}: {error.strerror or error}") from None
    except ValueError as error:
        raise InvalidInput("EVENT", f"the event in {where} is not JSON: {error}") from None
    try:
        check_event(args.function, event)
    except WrongEvent as error:
        raise InvalidInput(
            "EVENT", f"the event in {where} is not one for {args.function}: {error}"
        ) from None

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
        failures.append(describe_error(error))
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
            print(f"error: {args.function}: {describe_error(error)}", file=sys.stderr)
            return 1
    emit_json(response, file=stdout)
    return 1 if failures else 0
