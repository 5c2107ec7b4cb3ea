"""The ingest dead-letter queue: `vhs dlq list`, `vhs dlq redrive` and `vhs dlq discard`."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from vhs.errors import InvalidInput

from .output import console, emit_json, tracking


def _dlq() -> Any:
    from ..admin.dlq import DeadLetterQueue

    return DeadLetterQueue.from_env()


def _dlq_filter(args: argparse.Namespace) -> Any:
    from ..admin.dlq import RedriveFilter

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


def _reason(letter: Any) -> str:
    if letter.trusted:
        return letter.reason
    return f"{letter.reason}\n(it claims, unverified: {letter.unverified_reason})"


@contextlib.contextmanager
def _sweeping(queue: Any, description: str, args: argparse.Namespace) -> Iterator[Any]:
    """Progress over one pass of the DLQ: a step per message looked at, of those visible."""
    with tracking(description, total=queue.depth().visible, unit="messages", json=args.json) as bar:
        yield lambda report: bar.advance()


def add_filters(p: argparse.ArgumentParser, count: Callable[[str], int]) -> None:
    """The options that select dead letters (redrive and discard); `count`: the type of
    --max, the app's one check of a count."""
    p.add_argument("--type", action="append", help="error type, e.g. InvalidMessage")
    p.add_argument("--field", action="append", help="error field, e.g. updated_at")
    p.add_argument("--id-prefix", help="record ids starting with this")
    p.add_argument(
        "--retries-exhausted",
        action="store_true",
        help="only messages the redrive policy moved (transient failures)",
    )
    p.add_argument("--max", type=count, help="at most this many")
    p.add_argument("--dry-run", action="store_true")


def cmd_dlq_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    queue = _dlq()
    depth = queue.depth()
    with tracking(
        "reading dead letters", total=depth.visible, unit="messages", json=args.json
    ) as bar:
        letters = queue.list(
            limit=args.limit,
            resolve_claim_checks=args.resolve,
            progress=lambda n: bar.update(n, depth.visible),
        )
    if args.json:
        emit_json([letter.as_dict() for letter in letters])
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
            _reason(letter),
            _age(letter.age().total_seconds()),
            str(letter.receive_count),
        )
    console().print(table)
    return 0


def cmd_dlq_redrive(args: argparse.Namespace) -> int:
    queue = _dlq()
    with _sweeping(queue, "redriving dead letters", args) as advance:
        report = queue.redrive(
            _dlq_filter(args),
            dry_run=args.dry_run,
            use_move_task=False if args.no_move_task else None,
            progress=advance,
        )
    if args.json:
        emit_json(report.as_dict())
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
        raise InvalidInput("--all", "give a filter, or --all to discard every dead letter")
    queue = _dlq()
    with _sweeping(queue, "discarding dead letters", args) as advance:
        report = queue.discard(
            selection,
            everything=args.all,
            include_unverified=args.include_unverified,
            dry_run=args.dry_run,
            progress=advance,
        )
    if args.json:
        emit_json(report.as_dict())
    else:
        verb = "would discard" if args.dry_run else "discarded"
        print(f"{verb} {report.discarded}, skipped {report.skipped}, failed {report.failed}")
        if report.unverified_kept:
            print(
                f"kept {report.unverified_kept} whose claimed reason VHS did not write "
                "(see vhs dlq list; --include-unverified discards them too)",
                file=sys.stderr,
            )
    return 0 if not report.failed else 1
