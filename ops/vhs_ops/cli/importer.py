"""`vhs import`: JSON Lines or CSV files, local or in S3, written into the store in bulk.

The lines go through the ingest handler's validation, coalescing and write path
(vhs.ingest.bulk), file by file, in chunks, several writes at a time. Two files sit beside
each other (by default under .vhs/import/, named by the run: a digest of the sources, the
format, the mapping and the table):

* the report, ``<run>.jsonl``: one JSON line per refused or failed line, {file, line, field,
  reason, outcome} (a local file name's bytes that are not UTF-8 written as ``\\xNN``:
  bulk_sources.display_name, as in the checkpoint);
* the checkpoint, ``<run>.jsonl.checkpoint.json``: per file, the line (and byte offset) below
  which every line is settled, saved after every chunk and on an interruption.

`--resume` starts each file at its checkpoint (S3: a ranged GET from the offset), keeps the
report's entries below it, and drops those past it, which the rerun reports again. A line
that was written after the checkpoint was last saved is written again, which the store
answers "unchanged" (an inline record costs a read, no write: store.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhs.errors import ConfigurationError, InvalidInput
from vhs.ingest.bulk import DEFAULT_CHUNK_LINES, ImportWorker, Problem, Settled, Tally, chunked
from vhs.ingest.bulk_csv import CsvMapping
from vhs.ingest.bulk_lines import Line
from vhs.ingest.bulk_sources import SourceFile, file_lines, read_header, resolve_sources

from .boundary import first_request, in_existing_directory
from .output import emit_json, plural, tracking

DEFAULT_DIRECTORY = Path(".vhs/import")


def run_id(description: dict[str, Any]) -> str:
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class Checkpoint:
    """Per file, where a resumed run starts: the byte offset and line number below which
    every line is settled (stored, unchanged, stale, deleted, or in the report)."""

    path: Path
    run: dict[str, Any]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    tally: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, run: dict[str, Any]) -> Checkpoint:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path, run)
        except ValueError as error:
            raise ConfigurationError(f"{path} is not a checkpoint: {error}") from None
        if saved.get("run") != run:
            raise ConfigurationError(
                f"{path} is the checkpoint of another import (other sources, format, mapping "
                "or table): run without --resume to start over"
            )
        return cls(path, run, saved.get("files", {}), saved.get("tally", {}))

    def start_of(self, file: SourceFile) -> tuple[int, int, bool]:
        """(offset, line number, done) to start `file` at."""
        state = self.files.get(file.name)
        if state is None:
            return 0, 1, False
        if state.get("version") != file.version or state.get("size") != file.size:
            raise InvalidInput(
                "SOURCE",
                f"{file.name} changed since the interrupted run: import it again without --resume",
            )
        return int(state["offset"]), int(state["line"]), bool(state.get("done"))

    def settled_to(self, file: SourceFile, offset: int, line: int, *, done: bool = False) -> None:
        self.files[file.name] = {
            "version": file.version,
            "size": file.size,
            "offset": offset,
            "line": line,
            "done": done,
        }

    def save(self, tally: Tally) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        document = {"run": self.run, "files": self.files, "tally": tally.as_json()}
        temporary.write_text(json.dumps(document, indent=1), encoding="utf-8")
        os.replace(temporary, self.path)  # never half a checkpoint


class Report:
    """The report file: one JSON line per refused or failed line, appended as they settle."""

    def __init__(self, path: Path, keep: Callable[[dict[str, Any]], bool] | None) -> None:
        """`keep`: on a resume, which of the entries already there stay (those below the
        checkpoint); None starts an empty report."""
        path.parent.mkdir(parents=True, exist_ok=True)
        kept: list[str] = []
        if keep is not None and path.exists():
            with path.open(encoding="utf-8") as old:
                kept = [line for line in old if line.strip() and keep(json.loads(line))]
        self.path = path
        self.entries = len(kept)
        self._file = path.open("w", encoding="utf-8")
        self._file.writelines(kept)

    def add(self, problem: Problem) -> None:
        self._file.write(json.dumps(problem.as_json(), ensure_ascii=False) + "\n")
        self.entries += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class _Watermark:
    """The offset and line number below which every line of a file is settled: lines settle
    out of order (several writes at once), the mark moves over those settled in a row."""

    def __init__(self, offset: int, line: int) -> None:
        self.offset, self.line = offset, line
        self._order: list[Line] = []
        self._settled: set[int] = set()
        self._head = 0

    def expect(self, lines: Iterable[Line]) -> None:
        self._order.extend(lines)

    def settle(self, line: Line) -> int:
        """Mark `line` settled; the bytes the mark moved by."""
        self._settled.add(line.number)
        before = self.offset
        while self._head < len(self._order) and self._order[self._head].number in self._settled:
            done = self._order[self._head]
            self.offset, self.line = done.end, done.next_number
            self._settled.discard(done.number)
            self._head += 1
        if self._head > 4096:  # keep memory flat over a long file
            del self._order[: self._head]
            self._head = 0
        return self.offset - before


@dataclass
class ImportRun:
    """One `vhs import`: its files, worker, checkpoint and report."""

    files: list[SourceFile]
    worker: ImportWorker
    checkpoint: Checkpoint
    report: Report
    s3: Any = None
    chunk_lines: int = DEFAULT_CHUNK_LINES
    progress: Callable[[int], None] | None = None  # bytes settled
    # Told of every line as it settles (tests interrupt a run with it).
    on_settled: Callable[[Settled], None] | None = None
    tally: Tally = field(default_factory=Tally)
    name: str = ""  # the run's id (run_id)
    skipped: list[str] = field(default_factory=list)  # files not of the format

    def run(self) -> Tally:
        """Import every file, each as its format. On an interruption (or any error) the
        checkpoint is saved with what is settled, then it propagates."""
        for file in self.files:
            self.worker.fmt = file.fmt
            self._file(file)
        return self.tally

    def _file(self, file: SourceFile) -> None:
        offset, line, done = self.checkpoint.start_of(file)
        self._advance(offset if not done else file.size)
        if done:
            return
        header = None
        if file.fmt == "csv" and file.size:  # an empty file is zero lines, no header
            header, past_header = read_header(file, self.s3)
            self.worker.mapping.check_header(header, file.name)
            if offset == 0:
                offset, line = past_header, 2
                self._advance(past_header)
        mark = _Watermark(offset, line)
        lines = file_lines(file, self.s3, first_line=line, offset=offset)

        def settle(settled: Settled) -> None:
            self.tally.add(settled)
            if settled.problem is not None:
                self.report.add(settled.problem)
            self._advance(mark.settle(settled.line))
            if self.on_settled is not None:
                self.on_settled(settled)

        try:
            for chunk in chunked(self.worker.rows(lines, header), self.chunk_lines):
                mark.expect(p.line for p in chunk)
                self.worker.chunk(chunk, settle)
                self._save(file, mark)
        except BaseException:
            self._save(file, mark)
            raise
        self._advance(file.size - mark.offset)  # trailing blank lines
        self._save(file, mark, done=True)

    def _save(self, file: SourceFile, mark: _Watermark, *, done: bool = False) -> None:
        self.report.flush()  # the report first: a checkpoint never covers an unwritten entry
        self.checkpoint.settled_to(file, mark.offset, mark.line, done=done)
        self.checkpoint.save(self.tally)

    def _advance(self, amount: int) -> None:
        if self.progress and amount > 0:
            self.progress(amount)


def open_run(
    sources: list[str],
    *,
    fmt: str | None,
    mapping: CsvMapping,
    report_path: Path | None,
    resume: bool,
    workers: int,
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    ingestor: Any = None,
    s3: Any = None,
) -> ImportRun:
    """An import of `sources` into the store of the environment (or `ingestor`'s)."""
    from vhs.ingest.ingestor import Ingestor
    from vhs.ingest.staging import StagingLocation
    from vhs.store import VersionedHybridStore

    if chunk_lines < 1:
        raise InvalidInput("--chunk-lines", "must be at least 1")
    needs_s3 = any(s.startswith("s3://") for s in sources)
    if ingestor is None:
        store = VersionedHybridStore.from_env()
        ingestor = Ingestor(
            store,
            sqs_client=None,
            dlq_url="",
            staging=StagingLocation.from_env(),
            s3_client=s3 or store.bodies.s3,
        )
    s3 = s3 or (ingestor.s3 if needs_s3 else None)
    files, skipped = resolve_sources(sources, fmt, s3)
    # Before the report is opened: a line would fail only after its retries.
    first_request(ingestor.store.index.dynamodb, ingestor.store.table_name)
    description = {
        "sources": [s if s.startswith("s3://") else str(Path(s).resolve()) for s in sources],
        "format": fmt,
        "mapping": mapping.as_json(),
        "table": ingestor.store.table_name,
    }
    run = run_id(description)
    report_path = report_path or DEFAULT_DIRECTORY / f"{run}.jsonl"
    checkpoint_path = report_path.with_name(report_path.name + ".checkpoint.json")
    checkpoint = (
        Checkpoint.load(checkpoint_path, description)
        if resume
        else Checkpoint(checkpoint_path, description)
    )
    tally = Tally()
    tally.merge(checkpoint.tally)

    def below_checkpoint(entry: dict[str, Any]) -> bool:
        state = checkpoint.files.get(entry.get("file", ""))
        return state is not None and (state.get("done") or entry.get("line", 0) < state["line"])

    report = Report(report_path, below_checkpoint if resume else None)
    worker = ImportWorker(ingestor, fmt=fmt or "jsonl", mapping=mapping, workers=workers)
    return ImportRun(
        files, worker, checkpoint, report, s3, chunk_lines, tally=tally, name=run, skipped=skipped
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Import the sources, with progress (a bar, or lines on standard error without a
    terminal). Ctrl-C or SIGTERM (the CLI raises KeyboardInterrupt for both) stops it with
    the checkpoint saved and the summary printed."""
    mapping = CsvMapping.parse(args.map or [])
    if args.map and args.format == "jsonl":
        raise InvalidInput("--map", "only goes with CSV")
    started = time.monotonic()
    imported = open_run(
        args.sources,
        fmt=args.format,
        mapping=mapping,
        report_path=in_existing_directory(args.report, "--report") if args.report else None,
        resume=args.resume,
        workers=args.workers,
        chunk_lines=args.chunk_lines,
    )
    total = sum(f.size for f in imported.files)
    interrupted = False
    with tracking(
        f"importing {plural(len(imported.files), 'file')}",
        total=total,
        unit="bytes",
        json=args.json,
        transfer=True,
    ) as tracked:
        imported.progress = tracked.advance
        try:
            tally = imported.run()
        except KeyboardInterrupt:
            interrupted = True
            tally = imported.tally
        finally:
            imported.worker.close()
            imported.report.close()
    seconds = time.monotonic() - started
    result = {
        "run": imported.name,
        "files": len(imported.files),
        "skipped_files": len(imported.skipped),
        "lines": sum(tally.counts.values()),
        **tally.as_json(),
        "report": str(imported.report.path),
        "report_entries": imported.report.entries,
        "checkpoint": str(imported.checkpoint.path),
        "interrupted": interrupted,
        "seconds": round(seconds, 3),
    }
    if args.json:
        emit_json(result)
    else:
        counts = ", ".join(
            f"{name} {tally.counts[name]}" for name in tally.as_json() if name != "coalesced"
        )
        print(
            f"imported {plural(result['lines'], 'line')} of {plural(result['files'], 'file')} "
            f"in {seconds:.1f} s: {counts} ({tally.coalesced} coalesced)"
        )
        if imported.report.entries:
            print(
                f"  report: {imported.report.path} ({plural(imported.report.entries, 'line')})",
                file=sys.stderr,
            )
        if interrupted:
            print("  interrupted: run again with --resume to continue", file=sys.stderr)
    if interrupted:
        return 130
    return 0 if tally.ok else 1
