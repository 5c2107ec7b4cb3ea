"""Where a bulk import's lines come from: local files and S3 objects, read as streams (never
a whole file in memory), from any byte offset, with every line's number and end offset.

* `split_lines` cuts a byte stream into lines on LF (a CR before it is dropped, as `vhs send`
  reads files), numbering them and skipping blank ones. A CSV row may hold line breaks inside
  quotes: `csv_rows` joins such lines back into one row, numbered by its first line.
* A source is a local file or directory, or ``s3://bucket/prefix``. A directory or a prefix
  is imported file by file, in key order, taking only the files whose suffix is the format's
  (`bulk.SUFFIXES`: .jsonl or .ndjson, .csv); everything else under it is skipped and
  counted, so a shared bucket's other objects are never read.
* `plan_chunks` cuts an object into chunks of whole lines (rows, for CSV) for the cloud's
  Distributed Map: each item names a byte range and the number of its first line, so every
  worker reports the file's own line numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from .bulk import FORMATS, SUFFIXES, Line, csv_header

READ_CHUNK_BYTES = 1024 * 1024
_MAX_HEADER_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    """One file to import: a local path or an S3 object, with what identifies its content
    (size and modification time, or ETag), so that a resumed import knows it is the same."""

    name: str  # the path, or s3://bucket/key: what the report calls it
    fmt: str
    size: int
    version: str  # mtime_ns locally, the ETag in S3
    bucket: str | None = None
    key: str | None = None

    @property
    def is_s3(self) -> bool:
        return self.bucket is not None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "format": self.fmt, "size": self.size, "version": self.version}


def format_of(name: str, fmt: str | None) -> str | None:
    """The format to read `name` as: `fmt` if its suffix is that format's, else None; with
    no `fmt`, whichever format its suffix names."""
    lowered = name.lower()
    for candidate in (fmt,) if fmt else FORMATS:
        if lowered.endswith(SUFFIXES[candidate]):
            return candidate
    return None


def resolve_sources(
    sources: Iterable[str], fmt: str | None, s3: Any = None
) -> tuple[list[SourceFile], list[str]]:
    """The files to import, in order, and the names of those skipped (not the format's). A
    file named on its own is taken whatever its suffix when `fmt` is given."""
    files: list[SourceFile] = []
    skipped: list[str] = []
    for source in sources:
        if source.startswith("s3://"):
            if s3 is None:
                raise InvalidInput("SOURCE", f"{source}: no S3 client")
            found, ignored = _s3_files(s3, source, fmt)
        else:
            found, ignored = _local_files(Path(source), fmt)
        files.extend(found)
        skipped.extend(ignored)
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise InvalidInput("SOURCE", "a file is named twice")
    return files, skipped


def _local_files(path: Path, fmt: str | None) -> tuple[list[SourceFile], list[str]]:
    if path.is_file():
        chosen = format_of(path.name, fmt) or fmt
        if chosen is None:
            raise InvalidInput(
                "--format", f"{path}: cannot tell its format from its name; give --format"
            )
        return [_local(path, chosen)], []
    if not path.is_dir():
        raise InvalidInput("SOURCE", f"{path}: no such file or directory")
    found, ignored = [], []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            each = Path(root) / name
            chosen = format_of(name, fmt)
            if chosen is None:
                ignored.append(str(each))
            else:
                found.append(_local(each, chosen))
    return found, ignored


def _local(path: Path, fmt: str) -> SourceFile:
    stat = path.stat()
    return SourceFile(str(path), fmt, stat.st_size, str(stat.st_mtime_ns))


def _s3_files(s3: Any, uri: str, fmt: str | None) -> tuple[list[SourceFile], list[str]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise InvalidInput("SOURCE", f"{uri}: no bucket")
    found, ignored = [], []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            name = f"s3://{bucket}/{key}"
            chosen = format_of(key, fmt)
            if chosen is None and key == prefix and fmt:
                chosen = fmt  # the object named exactly: taken whatever its suffix
            if chosen is None or key.endswith("/"):
                ignored.append(name)
                continue
            found.append(
                SourceFile(name, chosen, obj["Size"], obj.get("ETag", ""), bucket=bucket, key=key)
            )
    return found, ignored


# --- reading -------------------------------------------------------------------------------


def read_chunks(
    file: SourceFile, s3: Any = None, start: int = 0, end: int | None = None
) -> Iterator[bytes]:
    """The bytes of `file` from `start` (to `end`, exclusive), a megabyte at a time."""
    if file.is_s3:
        if end is not None and end <= start:
            return
        ranged = f"bytes={start}-{'' if end is None else end - 1}"
        response = s3.get_object(Bucket=file.bucket, Key=file.key, Range=ranged)
        try:
            yield from response["Body"].iter_chunks(READ_CHUNK_BYTES)
        finally:
            response["Body"].close()
        return
    with open(file.name, "rb") as handle:
        handle.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            data = handle.read(READ_CHUNK_BYTES if left is None else min(left, READ_CHUNK_BYTES))
            if not data:
                return
            if left is not None:
                left -= len(data)
            yield data


def split_lines(
    chunks: Iterable[bytes],
    source: str,
    *,
    first_line: int = 1,
    offset: int = 0,
    keep_blank: bool = False,
) -> Iterator[Line]:
    """The lines of a byte stream that starts at line `first_line`, byte `offset`: their bytes
    without the terminator (LF, or CRLF), and the offset just past them. Blank lines are
    skipped (their numbers are not) unless `keep_blank` (CSV: a blank line may be inside a
    quoted field)."""
    number, buffer = first_line, bytearray()
    start = offset  # the offset of buffer[0]
    for chunk in chunks:
        buffer += chunk
        position = 0
        while (found := buffer.find(b"\n", position)) >= 0:
            data = bytes(buffer[position:found]).removesuffix(b"\r")
            if keep_blank or data.strip():
                yield Line(source, number, data, start + found + 1)
            number += 1
            position = found + 1
        del buffer[:position]
        start += position
    if buffer.strip():
        yield Line(source, number, bytes(buffer).removesuffix(b"\r"), start + len(buffer))


def csv_rows(lines: Iterable[Line]) -> Iterator[Line]:
    """Physical lines joined into CSV rows: a line break inside a quoted field continues the
    row (RFC 4180: quotes inside a field are doubled, so an odd count of quotes so far means
    a field is still open). A row is numbered by its first line."""
    row: Line | None = None
    quotes = 0
    for line in lines:
        if row is None:
            row = line
        else:
            span = line.number - row.number + 1
            row = Line(row.source, row.number, row.data + b"\n" + line.data, line.end, span)
        quotes += line.data.count(b'"')
        if quotes % 2 == 0:
            if row.data.strip():
                yield row
            row, quotes = None, 0
    if row is not None:
        yield row  # an unclosed quote: the csv module reports it on this row


def file_lines(
    file: SourceFile, s3: Any = None, *, first_line: int = 1, offset: int = 0
) -> Iterator[Line]:
    """The lines (CSV: rows, past the header) of `file` from a resume point."""
    csv = file.fmt == "csv"
    lines = split_lines(
        read_chunks(file, s3, offset),
        file.name,
        first_line=first_line,
        offset=offset,
        keep_blank=csv,
    )
    if not csv:
        return lines
    rows = csv_rows(lines)
    if offset == 0:
        next(rows, None)  # the header
    return rows


def read_header(file: SourceFile, s3: Any = None) -> tuple[list[str], int]:
    """A CSV file's columns, and the offset just past its header line."""
    for line in split_lines(read_chunks(file, s3, 0, _MAX_HEADER_BYTES), file.name):
        if line.number != 1:
            break
        return csv_header(line.data, file.name), line.end
    raise InvalidInput("header", f"{file.name}: no header line (the first line is empty)")


# --- the cloud: chunks of whole lines for a Distributed Map --------------------------------


def plan_chunks(file: SourceFile, s3: Any, *, chunk_lines: int) -> Iterator[dict[str, Any]]:
    """Items of `chunk_lines` lines (rows) each: {key, format, start, end, first_line} byte
    ranges of whole lines (first_line: the number of the line at `start`), and a CSV file's
    header. Reads the file once, as a stream."""
    header_text: str | None = None
    start, first = 0, 1
    if file.fmt == "csv":
        header, start = read_header(file, s3)
        header_text = ",".join(_quoted(c) for c in header)
        first = 2
    lines = file_lines(file, s3, first_line=first, offset=start)
    count, end = 0, start
    for line in lines:
        count += 1
        end = line.end
        if count == chunk_lines:
            yield _item(file, start, end, first, header_text)
            count, start, first = 0, end, line.next_number
    if count:
        yield _item(file, start, end, first, header_text)


def _quoted(column: str) -> str:
    if any(c in column for c in ',"\r\n'):
        return '"' + column.replace('"', '""') + '"'
    return column


def _item(
    file: SourceFile, start: int, end: int, first_line: int, header: str | None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "key": file.key,
        "format": file.fmt,
        "start": start,
        "end": end,
        "first_line": first_line,
    }
    if header is not None:
        item["header"] = header
    return item
