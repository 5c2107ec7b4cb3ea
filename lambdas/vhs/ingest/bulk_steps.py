"""The Import stack's two steps (docs/import.md), as its function (handlers/bulk_import.py) is
asked for them.

Two events, one per state of the state machine:

* **Plan** ``{"plan": {"prefix": "imports/...", "format": "jsonl"|"csv", "mapping": {...}},
  "execution": NAME}``: list the prefix (only the format's files: .jsonl/.ndjson, .csv), read
  each file once to cut it into chunks of whole lines, and write the chunks as a JSON Lines
  manifest (``<results prefix><NAME>/manifest.jsonl``) for the Distributed Map's ItemReader.
  A CSV header that lacks a mapped column fails the plan, before anything is written.
* **Chunks** (the ItemBatcher's ``{"Items": [...], "BatchInput": {...}}``): import each
  chunk's byte range with the CLI's worker (vhs.ingest.bulk), write its refused and failed
  lines to ``<results prefix><NAME>/reports/<file key>/<first line>.jsonl`` (or delete that
  report, when every line is in: a retry's report replaces the earlier attempt's) and return
  the counts, which the ResultWriter collects. An item whose key is not under the import
  prefix, or that has no ETag, is refused (InvalidInput) before anything is read; the range
  is read with If-Match the planned ETag, and an export replaced since the plan raises
  ExportChanged. Both are permanent: the state machine does not retry them. A chunk with a
  line that failed (retries ran out) raises ImportIncomplete after its report is written:
  the child execution fails, the Task retries it, and a redrive of the execution runs only
  such chunks again. Lines already stored are answered "unchanged" by the store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from .. import settings, shapes
from ..errors import ImportIncomplete, InvalidInput
from .bulk import FORMATS, ImportWorker, Problem, Settled, Tally, chunked
from .bulk_csv import CsvMapping, csv_header
from .bulk_lines import csv_rows, split_lines
from .bulk_sources import SourceFile, plan_chunks, read_chunks, read_header, resolve_sources
from .ingestor import Ingestor

SHAPE = shapes.BULK_IMPORT


class Log(Protocol):
    """What a step logs to: a logging.Logger, or the handler's Powertools Logger."""

    def info(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...


def _where() -> tuple[str, str, str]:
    bucket, prefix, results = settings.require(
        settings.IMPORT_BUCKET,
        settings.IMPORT_PREFIX,
        settings.IMPORT_RESULTS_PREFIX,
        hint="the Import stack sets them",
    )
    return bucket, prefix, results


def _format(value: Any) -> str | None:
    if value in (None, "", "auto"):
        return None
    if value not in FORMATS:
        raise InvalidInput("format", f"must be one of {', '.join(FORMATS)} or auto, not {value!r}")
    return str(value)


def _execution(event: dict[str, Any]) -> str:
    name = event.get("execution")
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidInput("execution", "must be the execution's name")
    return name


def plan(event: dict[str, Any], writer: Callable[[], Ingestor], log: Log) -> dict[str, Any]:
    """The Plan state: the chunks of every file under the event's prefix, written as the
    execution's manifest; what was planned. `writer()` is asked for once the event is checked."""
    bucket, allowed, results = _where()
    request = event.get("plan") or {}
    prefix = request.get("prefix")
    if not isinstance(prefix, str) or not prefix.startswith(allowed):
        raise InvalidInput("prefix", f"must be a key prefix under {allowed!r}, not {prefix!r}")
    fmt = _format(request.get("format"))
    mapping = CsvMapping.of(request.get("mapping"))
    execution = _execution(event)
    s3 = writer().s3
    files, skipped = resolve_sources([f"s3://{bucket}/{prefix}"], fmt, s3, field="prefix")
    chunk_lines = settings.whole_number(settings.IMPORT_CHUNK_LINES, SHAPE.chunk_lines)
    manifest = f"{results}{execution}/manifest.jsonl"
    chunks = 0
    lines: list[bytes] = []
    for file in files:  # every header first: a bad mapping fails before any chunk is planned
        if file.fmt == "csv" and file.size:  # an empty file is zero lines, no header
            mapping.check_header(read_header(file, s3)[0], file.name)
    for file in files:
        for item in plan_chunks(file, s3, chunk_lines=chunk_lines):
            lines.append(json.dumps(item, separators=(",", ":")).encode())
            chunks += 1
    # One manifest line per chunk: a 10 GB export in chunks of 2,000 lines is a few MB.
    s3.put_object(Bucket=bucket, Key=manifest, Body=b"\n".join(lines) + b"\n")
    log.info("planned", extra={"files": len(files), "chunks": chunks, "skipped": len(skipped)})
    return {
        "bucket": bucket,
        "manifest_key": manifest,
        "files": len(files),
        "chunks": chunks,
        "bytes": sum(f.size for f in files),
        "skipped": len(skipped),
        "mapping": mapping.as_json(),
    }


def _chunk_file(item: dict[str, Any], bucket: str, allowed: str) -> SourceFile:
    """The object a manifest item names, refused (before anything is read) unless its key is
    under the import prefix and it carries the ETag the plan read."""
    key, etag = item.get("key"), item.get("etag")
    if not isinstance(key, str) or not key.startswith(allowed):
        raise InvalidInput("key", f"must be an object key under {allowed!r}, not {key!r}")
    if not isinstance(etag, str) or not etag:
        raise InvalidInput("etag", f"{key}: the item has no ETag of the planned object")
    for name in ("start", "end", "first_line"):
        value = item.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInput(name, f"{key}: must be a whole number, not {value!r}")
    fmt = _format(item.get("format"))
    if fmt is None:
        raise InvalidInput("format", f"{key}: must be one of {', '.join(FORMATS)}")
    # The size is the range's end: read_chunks never reads past it.
    return SourceFile(f"s3://{bucket}/{key}", fmt, item["end"], etag, bucket=bucket, key=key)


def import_chunks(
    event: dict[str, Any],
    writer: Callable[[], Ingestor],
    log: Log,
    count: Callable[[str, int], None],
) -> dict[str, Any]:
    """The Map's ItemBatcher batch: each chunk imported and its report written (or deleted);
    the counts, each also given to `count(name, n)`. ImportIncomplete when a line failed.
    `writer()` is asked for once the items are checked."""
    bucket, allowed, results = _where()
    batch = event.get("BatchInput") or {}
    execution = _execution(batch)
    mapping = CsvMapping.of(batch.get("mapping"))
    items = event.get("Items") or []
    files = [_chunk_file(item, bucket, allowed) for item in items]
    worker_count = settings.whole_number(settings.IMPORT_WRITE_WORKERS, SHAPE.write_workers)
    tally, reports = Tally(), []
    ingestor = writer()
    s3 = ingestor.s3
    with ImportWorker(ingestor, mapping=mapping, workers=worker_count) as worker:
        for item, file in zip(items, files, strict=True):
            problems: list[Problem] = []

            def settle(settled: Settled, problems: list[Problem] = problems) -> None:
                tally.add(settled)
                if settled.problem is not None:
                    problems.append(settled.problem)

            worker.fmt = file.fmt
            csv = file.fmt == "csv"
            header = csv_header(item["header"].encode(), file.name) if csv else None
            lines = split_lines(
                read_chunks(file, s3, item["start"], item["end"]),
                file.name,
                first_line=item["first_line"],
                offset=item["start"],
                keep_blank=csv,
            )
            # An item is at most the plan's chunk_lines lines: one chunk, coalesced together.
            for chunk in chunked(worker.rows(csv_rows(lines) if csv else lines, header), 100_000):
                worker.chunk(chunk, settle)
            key = f"{results}{execution}/reports/{file.key}/{item['first_line']:012d}.jsonl"
            if problems:
                body = "".join(json.dumps(p.as_json(), ensure_ascii=False) + "\n" for p in problems)
                s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
                reports.append(f"s3://{bucket}/{key}")
            else:
                # A retried chunk (the Task's retry, a redrive) whose earlier attempt left a
                # report: the report describes this attempt's outcome, where every line is in.
                s3.delete_object(Bucket=bucket, Key=key)
    for name, value in tally.as_json().items():
        count(name, value)
    result = {"counts": tally.as_json(), "reports": reports}
    if tally.counts["failed"]:
        log.warning("lines failed", extra=result)
        raise ImportIncomplete(f"{tally.counts['failed']} lines failed: {json.dumps(result)}")
    return result
