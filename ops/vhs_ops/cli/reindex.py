"""`vhs reindex`: replay every current record (or a selection) to the change feed.

Here, it runs the worker of the deployed function (vhs.changes.reindex.reindex_segment) in
this process, one thread per Scan segment, against whatever AWS_ENDPOINT_URL points at (the
local stack, or AWS). Every page moves a segment's cursor, and the checkpoint file (the run
id, the selection, the rate and every segment's cursor and counts) is written after every
page, atomically: an interrupted run (Ctrl-C, a crash, a publish SNS refused) resumes where it
stopped with `--resume FILE`, under the same run id, so a replay retried within SNS's 5-minute
window is dropped as a duplicate and nothing confirmed is published again.

With `--cloud` (or `--state-machine ARN`) it starts the deployed state machine instead
(infra/reindex.py) and prints the execution's ARN and its console link.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhs import settings
from vhs.changes.reindex import (
    Counts,
    SegmentResult,
    Selection,
    Target,
    TokenBucket,
    reindex_segment,
    run_options,
)
from vhs.errors import ConfigurationError, InvalidInput
from vhs.shapes import REINDEX

from .boundary import first_request, in_existing_directory
from .output import cli_time, console_err, emit_json, now, print_counts, tracking

CHECKPOINT_DIR = Path(".vhs") / "reindex"
CHECKPOINT_VERSION = 1


@dataclass
class SegmentState:
    cursor: str | None = None
    done: bool = False
    counts: Counts = field(default_factory=Counts)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "done": self.done,
            "counts": self.counts.as_dict(),
            "error": self.error,
        }


@dataclass
class Checkpoint:
    """A run's state, as written to its file after every page."""

    path: Path
    run_id: str
    total_segments: int
    selection: Selection
    rate: float
    page_size: int
    started_at: str
    segments: list[SegmentState]
    foreign_ids: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def new(
        cls,
        path: Path | None,
        *,
        selection: Selection,
        total_segments: int,
        rate: float,
        page_size: int,
        run_id: str | None = None,
    ) -> Checkpoint:
        run_id = run_id or f"reindex-{uuid.uuid4().hex[:12]}"
        return cls(
            path=path or CHECKPOINT_DIR / f"{run_id}.json",
            run_id=run_id,
            **run_options(total_segments, rate, page_size),
            selection=selection,
            started_at=now(),
            segments=[SegmentState() for _ in range(total_segments)],
        )

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            why = getattr(error, "strerror", None) or error
            raise InvalidInput("resume", f"cannot read the checkpoint {path}: {why}") from None
        if not isinstance(data, dict) or data.get("version") != CHECKPOINT_VERSION:
            raise InvalidInput("resume", f"{path} is not a vhs reindex checkpoint")
        segments = [
            SegmentState(s.get("cursor"), bool(s.get("done")), Counts.from_dict(s.get("counts")))
            for s in data["segments"]
        ]
        return cls(
            path=path,
            run_id=data["run_id"],
            **run_options(len(segments), data["rate"], data["page_size"]),
            selection=Selection.from_dict(data.get("selection") or {}),
            started_at=data["started_at"],
            segments=segments,
            foreign_ids=list(data.get("foreign_ids") or []),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "selection": self.selection.as_dict(),
            "rate": self.rate,
            "page_size": self.page_size,
            "segments": [s.as_dict() for s in self.segments],
            "foreign_ids": self.foreign_ids,
        }

    def record(self, result: SegmentResult, before: Counts) -> None:
        """Take a segment's position after a page (its counts are this call's, added to
        `before`, what earlier runs counted) and write the file."""
        with self._lock:
            state = self.segments[result.segment]
            state.cursor, state.done, state.error = result.cursor, result.done, result.error
            state.counts = Counts(**before.as_dict())
            state.counts.add(result.counts)
            for id in result.foreign_ids:
                if id not in self.foreign_ids and len(self.foreign_ids) < 10:
                    self.foreign_ids.append(id)
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(json.dumps(self.as_dict(), indent=1))
        os.replace(partial, self.path)  # atomic: a crash leaves the old or the new file

    def totals(self) -> Counts:
        total = Counts()
        for state in self.segments:
            total.add(state.counts)
        return total

    @property
    def done(self) -> bool:
        return all(state.done for state in self.segments)


def run_local(
    target: Target,
    checkpoint: Checkpoint,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    on_page: Callable[[Checkpoint], None] | None = None,
) -> Checkpoint:
    """Run every unfinished segment of `checkpoint` to its end, one thread each, each at the
    checkpoint's rate (so segments x rate records/s in all). Stops, with the cursors saved,
    when `stop` is set or a segment's publish fails (that segment's `error`); the others
    finish their page first."""
    stop = stop or threading.Event()
    # A segment waiting to pay for its page wakes when the run is stopped: it then handles
    # the page it has read and stops, rather than sleeping out the wait (50 s at a rate of 1).
    timing: dict[str, Any] = {"sleep": sleep or stop.wait}
    if clock is not None:
        timing["clock"] = clock

    def segment(number: int) -> None:
        state = checkpoint.segments[number]
        before = Counts(**state.counts.as_dict())

        def page(result: SegmentResult) -> None:
            checkpoint.record(result, before)
            if on_page is not None:
                on_page(checkpoint)

        result = reindex_segment(
            target,
            run_id=checkpoint.run_id,
            segment=number,
            total_segments=checkpoint.total_segments,
            cursor=state.cursor,
            selection=checkpoint.selection,
            limiter=TokenBucket(checkpoint.rate, **timing),
            page_size=checkpoint.page_size,
            keep_going=lambda: not stop.is_set(),
            on_page=page,
        )
        checkpoint.record(result, before)
        if result.error is not None:
            stop.set()  # a refused publish: stop the run, resume it later

    todo = [n for n, state in enumerate(checkpoint.segments) if not state.done]
    checkpoint.save()
    if todo:
        with ThreadPoolExecutor(min(len(todo), 64), thread_name_prefix="vhs-reindex") as pool:
            for future in [pool.submit(segment, n) for n in todo]:
                future.result()
    return checkpoint


# --- the command ------------------------------------------------------------------------------


def _target() -> Target:
    return Target.from_env(hint=f"{settings.LOCAL_ENV_HINT}, or --stack")


def _summary(checkpoint: Checkpoint, status: str) -> dict[str, Any]:
    errors = [s.error for s in checkpoint.segments if s.error and not s.done]
    return {
        "run_id": checkpoint.run_id,
        "status": status,
        "checkpoint": str(checkpoint.path),
        "segments": checkpoint.total_segments,
        "segments_done": sum(s.done for s in checkpoint.segments),
        "rate": checkpoint.rate,
        # The selection's times are kept in the store's form (the checkpoint, the state
        # machine's input); the CLI writes every time in its own.
        "selection": {
            **checkpoint.selection.as_dict(),
            "since": cli_time(checkpoint.selection.since),
            "until": cli_time(checkpoint.selection.until),
        },
        "started_at": checkpoint.started_at,
        "finished_at": now(),
        **checkpoint.totals().as_dict(),
        "foreign_ids": checkpoint.foreign_ids,
        "errors": errors,
    }


def cmd_reindex(args: argparse.Namespace) -> int:
    if args.state_machine or args.cloud:
        return _start_cloud(args)
    if args.resume:
        if args.ids or args.since or args.until or not {args.segments, args.rate} <= {None}:
            raise InvalidInput("resume", "a resumed run keeps its own selection, segments, rate")
        checkpoint = Checkpoint.load(Path(args.resume))
    else:
        checkpoint = Checkpoint.new(
            in_existing_directory(args.checkpoint, "--checkpoint") if args.checkpoint else None,
            selection=Selection.of(args.ids or None, args.since, args.until),
            total_segments=_or_default(args.segments, REINDEX.default_segments),
            rate=_or_default(args.rate, REINDEX.default_rate),
            page_size=args.page_size,
        )
    target = _target()
    stop = threading.Event()
    err = console_err()
    total = _estimate(target, checkpoint)
    with tracking(
        "replaying records", total=total, unit="records", json=args.json, console=err
    ) as bar:
        runner = threading.Thread(
            target=_run_catching,
            args=(target, checkpoint, stop, lambda c: bar.update(_seen(c), total)),
            name="vhs-reindex-run",
        )
        runner.start()
        try:
            while runner.is_alive():
                runner.join(0.2)
        except KeyboardInterrupt:
            stop.set()  # every segment finishes its page and saves its cursor
            _finish(runner)
    interrupted = stop.is_set() and not checkpoint.done
    status = "done" if checkpoint.done else "interrupted" if interrupted else "failed"
    summary = _summary(checkpoint, status)
    if args.json:
        emit_json(summary)
    else:
        print_counts(
            f"reindex {checkpoint.run_id} ({status})",
            [
                (name, summary[name])
                for name in ("replayed", "deleted", "scanned", "filtered", "foreign", "missing")
            ]
            + [
                ("segments done", summary["segments_done"]),
                ("segments", checkpoint.total_segments),
            ],
        )
        if checkpoint.foreign_ids:
            print(f"not the store's items (skipped): {checkpoint.foreign_ids}", file=sys.stderr)
    if not checkpoint.done:
        for error in summary["errors"]:
            print(f"error: {error}", file=sys.stderr)
        print(f"resume with: vhs reindex --resume {checkpoint.path}", file=sys.stderr)
        return 1
    return 0


def _finish(runner: threading.Thread) -> None:
    """Wait until every segment has recorded the page in hand, so that the summary is what
    the checkpoint holds. Another Ctrl-C cannot cut this short: the segments' threads finish
    their page whatever happens (the process would not exit before them), and a summary
    printed before them would under-report by a page a segment."""
    while True:
        try:
            runner.join()
            return
        except KeyboardInterrupt:
            print("stopping: each segment finishes the page in hand first", file=sys.stderr)


def _or_default(value: Any, default: Any) -> Any:
    """An option's value, or its default when it was not given (never when it is 0)."""
    return default if value is None else value


def _run_catching(
    target: Target, checkpoint: Checkpoint, stop: threading.Event, on_page: Any
) -> None:
    try:
        run_local(target, checkpoint, stop=stop, on_page=on_page)
    except Exception as error:  # reported with the resume hint; the cursors are saved
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        stop.set()


def _seen(checkpoint: Checkpoint) -> int:
    totals = checkpoint.totals()
    return totals.scanned + totals.missing


def _estimate(target: Target, checkpoint: Checkpoint) -> int | None:
    """The progress's total: the ids asked for, or the table's ItemCount (which lags by up to
    6 hours)."""
    table = first_request(target.dynamodb, target.table)
    if checkpoint.selection.ids is not None:
        return len(checkpoint.selection.ids)
    return int(table.get("ItemCount", 0)) or None


def _start_cloud(args: argparse.Namespace) -> int:
    from vhs.aws import aws_client

    arn = args.state_machine or settings.get(settings.REINDEX_STATE_MACHINE_ARN)
    if not arn:
        raise ConfigurationError(
            f"set {settings.REINDEX_STATE_MACHINE_ARN} or pass --state-machine ARN "
            "(or --stack NAME: the Reindex stack's output)"
        )
    if args.ids or args.resume:
        raise InvalidInput(
            "ids" if args.ids else "resume",
            "the state machine replays the table or a time range; replay an id list here, "
            "and resume a failed execution with aws stepfunctions redrive-execution",
        )
    selection = Selection.of(None, args.since, args.until)
    run_id = f"reindex-{uuid.uuid4().hex[:12]}"
    # The run id is the execution's name: the state machine refuses an input naming one.
    run_input = {
        **run_options(
            _or_default(args.segments, REINDEX.default_segments),
            _or_default(args.rate, REINDEX.default_rate),
            args.page_size,
        ),
        "since": selection.since,
        "until": selection.until,
    }
    started = aws_client("stepfunctions").start_execution(
        stateMachineArn=arn, name=run_id, input=json.dumps(run_input)
    )
    execution = started["executionArn"]
    region = execution.split(":")[3]
    console = (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution}"
    )
    result = {"run_id": run_id, "execution_arn": execution, "console": console, **run_input}
    if args.json:
        emit_json(result)
    else:
        print(f"started {execution}")
        print(f"console: {console}")
        print(f"if it fails: aws stepfunctions redrive-execution --execution-arn {execution}")
    return 0
