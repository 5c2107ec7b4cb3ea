"""Where a bulk import's lines come from: local files and S3 objects, read as streams (never
a whole file in memory), from any byte offset, with every line's number and end offset (the
bytes are cut into lines and CSV rows by bulk_lines.py).

* A file is read from the content that was listed: an S3 object with If-Match its ETag, a
  local file checked against its size and mtime; anything else raises ExportChanged.
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

from botocore.exceptions import ClientError

from ..aws import error_code, is_object_missing
from ..errors import ExportChanged, InvalidInput
from .bulk import FORMATS, SUFFIXES
from .bulk_csv import csv_header
from .bulk_lines import Line, csv_rows, split_lines

READ_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    """One file to import: a local path or an S3 object, with what identifies its content
    (size and modification time, or ETag), so that a resumed import knows it is the same."""

    name: str  # the path (escaped: `display_name`), or s3://bucket/key: what reports call it
    fmt: str
    size: int
    version: str  # mtime_ns locally, the ETag in S3
    bucket: str | None = None
    key: str | None = None
    path: str = ""  # a local file's path as the OS gives it (undecodable bytes and all)

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
    sources: Iterable[str], fmt: str | None, s3: Any = None, *, field: str = "SOURCE"
) -> tuple[list[SourceFile], list[str]]:
    """The files to import, in order, and the names of those skipped (not the format's). A
    file named on its own is taken whatever its suffix when `fmt` is given. A directory or
    prefix with no file of the format is refused (InvalidInput naming `field`): an import
    that matched nothing says so, rather than reporting 0 lines."""
    files: list[SourceFile] = []
    skipped: list[str] = []
    for source in sources:
        if source.startswith("s3://"):
            if s3 is None:
                raise InvalidInput(field, f"{source}: no S3 client")
            found, ignored = _s3_files(s3, source, fmt, field)
        else:
            found, ignored = _local_files(Path(source), fmt)
        if not found:
            kinds = (fmt,) if fmt else FORMATS
            suffixes = ", ".join(suffix for kind in kinds for suffix in SUFFIXES[kind])
            others = f" ({len(ignored)} other files under it, skipped)" if ignored else ""
            raise InvalidInput(field, f"{source} holds no {suffixes} file{others}")
        files.extend(found)
        skipped.extend(ignored)
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise InvalidInput(field, "a file is named twice")
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


def display_name(path: str) -> str:
    """`path` as reports and checkpoints name it: a local name's bytes that are not UTF-8
    (which Python holds as lone surrogates, and which no UTF-8 file can hold) written as
    `\\xNN`, so the name is recognisable and the report is valid UTF-8."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _local(path: Path, fmt: str) -> SourceFile:
    stat = path.stat()
    name = str(path)
    return SourceFile(display_name(name), fmt, stat.st_size, str(stat.st_mtime_ns), path=name)


def _s3_files(s3: Any, uri: str, fmt: str | None, field: str) -> tuple[list[SourceFile], list[str]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise InvalidInput(field, f"{uri}: no bucket")
    found, ignored = [], []
    for page in _listed(s3, uri, bucket, prefix, field):
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


def _listed(s3: Any, uri: str, bucket: str, prefix: str, field: str) -> Iterator[dict[str, Any]]:
    """The pages of the listing of a source prefix. A source bucket that is not there, or
    that these credentials may not list, is the source's fault (named by `field`), not the
    store's configuration's."""
    try:
        yield from s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    except ClientError as error:
        code = error_code(error)
        if code == "NoSuchBucket":
            raise InvalidInput(field, f"{uri}: no such bucket {bucket!r}") from None
        if code in ("AccessDenied", "AllAccessDisabled"):
            raise InvalidInput(
                field, f"{uri}: these credentials may not list bucket {bucket!r} ({code})"
            ) from None
        raise


# --- reading -------------------------------------------------------------------------------


def read_chunks(
    file: SourceFile, s3: Any = None, start: int = 0, end: int | None = None
) -> Iterator[bytes]:
    """The bytes of `file` from `start` to `end` (exclusive; at most its size), a megabyte
    at a time, from the content that was listed: an S3 object is read with If-Match its
    listed ETag, a local file is checked against its listed size and mtime, before and after
    reading; either raises ExportChanged. An empty range is never requested (S3 answers 416
    to `bytes=0-` of an empty object)."""
    stop = file.size if end is None else min(end, file.size)
    if stop <= start:
        return
    if file.is_s3:
        yield from _s3_chunks(file, s3, start, stop)
        return
    with open(file.path or file.name, "rb") as handle:
        _check_unchanged(file, os.fstat(handle.fileno()))
        handle.seek(start)
        left = stop - start
        while left > 0:
            data = handle.read(min(left, READ_CHUNK_BYTES))
            if not data:
                break
            left -= len(data)
            yield data
        _check_unchanged(file, os.fstat(handle.fileno()))


def _s3_chunks(file: SourceFile, s3: Any, start: int, stop: int) -> Iterator[bytes]:
    condition = {"IfMatch": file.version} if file.version else {}
    try:
        response = s3.get_object(
            Bucket=file.bucket, Key=file.key, Range=f"bytes={start}-{stop - 1}", **condition
        )
    except ClientError as error:
        if error_code(error) != "PreconditionFailed":
            raise
        raise ExportChanged(file.name, f"ETag {file.version}", _current_etag(s3, file)) from None
    try:
        yield from response["Body"].iter_chunks(READ_CHUNK_BYTES)
    finally:
        response["Body"].close()


def _current_etag(s3: Any, file: SourceFile) -> str:
    try:
        return f"ETag {s3.head_object(Bucket=file.bucket, Key=file.key)['ETag']}"
    except ClientError as error:
        if is_object_missing(error):
            return "deleted"
        raise


def _check_unchanged(file: SourceFile, stat: os.stat_result) -> None:
    if file.version and (stat.st_size, str(stat.st_mtime_ns)) != (file.size, file.version):
        raise ExportChanged(
            file.name,
            f"{file.size} bytes, mtime_ns {file.version}",
            f"{stat.st_size} bytes, mtime_ns {stat.st_mtime_ns}",
        )


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
    """A CSV file's columns, and the offset just past its header line (read up to its LF
    only; a header is a line, bound as any line is)."""
    lines = split_lines(read_chunks(file, s3), file.name)
    try:
        for line in lines:
            if line.number != 1:
                break
            if line.refused is not None:
                raise InvalidInput("header", f"{file.name}: the header line {line.refused[1]}")
            return csv_header(line.data, file.name), line.end
    finally:
        lines.close()  # the rest of the file is not read
    raise InvalidInput("header", f"{file.name}: no header line (the first line is empty)")


# --- the cloud: chunks of whole lines for a Distributed Map --------------------------------


def plan_chunks(file: SourceFile, s3: Any, *, chunk_lines: int) -> Iterator[dict[str, Any]]:
    """Items of `chunk_lines` lines (rows) each: {key, etag, format, start, end, first_line},
    byte ranges of whole lines (first_line: the number of the line at `start`; etag: the
    object's, which the chunk's read must match), and a CSV file's header. Reads the file
    once, as a stream. An empty file has no chunks (and no header to read)."""
    if file.size == 0:
        return
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
        "etag": file.version,
    }
    if header is not None:
        item["header"] = header
    return item
