"""`vhs send`: a JSON Lines file of messages sent to the ingest queue, as `vhs import` reads
its lines, with a progress bar, a summary, and Ctrl-C that stops between batches and says
where to resume. The producer's side of the pipeline, apart from `vhs local up` and `vhs
invoke` (pipeline.py), which run the pipeline and its handlers.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from vhs.errors import InvalidInput, InvalidMessage

from .output import emit_json, plural, tracking


def jsonl_lines(stream: BinaryIO, name: str) -> Iterator[tuple[int, bytes | InvalidMessage]]:
    """(number, line) for each line of a JSON Lines stream that is not blank: its bytes as
    they are, without the line terminator (LF or CRLF), read as `vhs import` reads a file
    (bulk_lines.split_lines: the same bound on a line, and a byte order mark at the start
    skipped). A line over the bound comes as the InvalidMessage that refuses it, with the
    reason `vhs import` reports, its bytes never held."""
    from vhs.ingest.bulk_lines import split_lines
    from vhs.ingest.bulk_sources import READ_CHUNK_BYTES

    stream.seek(0)
    for line in split_lines(iter(lambda: stream.read(READ_CHUNK_BYTES), b""), name):
        yield line.number, line.data if line.refused is None else InvalidMessage(*line.refused)


@contextlib.contextmanager
def _opened(name: str) -> Iterator[BinaryIO]:
    """The file `name`, or for `-` standard input, spooled to a temporary file: the lines
    are read twice (counted, then sent), and a pipe can be read once."""
    if name != "-":
        with Path(name).open("rb") as file:
            yield file
        return
    with tempfile.TemporaryFile() as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        yield spool


def cmd_send(args: argparse.Namespace) -> int:
    """Send a JSON Lines file (`-`: standard input). Against a local endpoint it waits while
    the queue is full (the pipeline is then the bottleneck, and the progress bar says so);
    Ctrl-C stops it between batches with a summary of what was sent and the --from-line that
    sends only the rest."""
    with _opened(args.file) as stream:
        return _send_file(args, stream)


def _send_file(args: argparse.Namespace, stream: BinaryIO) -> int:
    import time

    from ..admin.producer import Producer

    name = "standard input" if args.file == "-" else args.file
    shown = Path(args.file)
    # One pass to count (the bar's total, the summary's last line), then the lines stream:
    # a large file is never held in memory.
    total, last, last_of_all = 0, None, None
    for number, _ in jsonl_lines(stream, name):
        last_of_all = number
        if number >= args.from_line:
            total, last = total + 1, number
    if total == 0 and last_of_all is not None:
        raise InvalidInput(
            "--from-line",
            f"{name} has no line from line {args.from_line} on (its last is line {last_of_all})",
        )
    if total == 0:
        print(f"nothing to send: {name} holds no line", file=sys.stderr)
    lines = ((n, line) for n, line in jsonl_lines(stream, name) if n >= args.from_line)
    producer = Producer.from_env(validate=not args.no_validate, max_queued=args.max_queued)
    stop = threading.Event()
    started = time.monotonic()
    with (
        _stop_on_interrupt(stop),
        tracking(
            f"sending {shown.name or name}", total=total, unit="lines", json=args.json, rate="msg"
        ) as tracked,
    ):

        def waiting(held: int | None) -> None:
            status = (
                ""
                if held is None
                else f"waiting: the queue holds {held:,} (the pipeline is the bottleneck)"
            )
            tracked.waiting(held, status)

        report = producer.send_lines(lines, progress=tracked.advance, stop=stop, waiting=waiting)
    seconds = time.monotonic() - started
    summary = {
        "lines": total,
        "from_line": args.from_line,
        "sent": report.sent,
        "claim_checks": report.claim_checks,
        "refused": [asdict(refusal) for refusal in report.refused],
        "not_sent": [asdict(unsent) for unsent in report.not_sent],
        "interrupted": report.interrupted,
        "next_line": report.next_line,
        "seconds": round(seconds, 3),
        "rate": round(report.sent / seconds, 1) if seconds > 0 else None,
        "max_queued": producer.max_queued,
        "queue_waits": report.queue_waits,
        "queue_wait_seconds": round(report.queue_wait_seconds, 3),
    }
    if args.json:
        emit_json(summary)
    else:
        _print_send_summary(args.file, summary, report, last)
    if report.interrupted:
        return 130  # as a shell reports a command stopped by SIGINT
    return 0 if report.ok else 1


def _print_send_summary(path: str, summary: dict[str, Any], report: Any, last: int | None) -> None:
    print(
        f"sent {report.sent:,} of {plural(summary['lines'], 'line')} "
        f"({report.claim_checks} by claim check), "
        f"refused {len(report.refused)}, not sent {len(report.not_sent)} "
        f"in {summary['seconds']:.1f}s ({summary['rate'] or 0:,.1f} messages/s)"
    )
    if report.queue_waits:
        print(
            f"waited {report.queue_wait_seconds:.1f}s for the queue to hold under "
            f"{summary['max_queued']:,} messages: the pipeline, not the sender, set the pace",
            file=sys.stderr,
        )
    for refusal in report.refused:
        reason = f"{refusal.field}: {refusal.reason}"
        print(f"  refused: line {refusal.line}: {reason}", file=sys.stderr)
    for unsent in report.not_sent:
        print(f"  not sent: line {unsent.line}: {unsent.reason}", file=sys.stderr)
    if report.interrupted:
        first = summary["from_line"]
        done = f"lines {first}-{report.next_line - 1}" if report.next_line > first else "no line"
        print(
            f"interrupted: {done} accounted for (sent, or listed above); "
            f"lines {report.next_line}-{last} not sent",
            file=sys.stderr,
        )
        print(f"to send the rest: vhs send {path} --from-line {report.next_line}", file=sys.stderr)


@contextlib.contextmanager
def _stop_on_interrupt(stop: threading.Event) -> Iterator[None]:
    """The first Ctrl-C (or SIGTERM) sets `stop`, so the send ends between batches with its
    summary; a second Ctrl-C stops at once."""

    def first(signum: int, frame: Any) -> None:
        stop.set()
        print("\nstopping after the batch in hand (Ctrl-C again to stop at once)", file=sys.stderr)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    saved = {s: signal.signal(s, first) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
