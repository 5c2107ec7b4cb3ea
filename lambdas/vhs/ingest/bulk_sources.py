"""Where a bulk import's lines come from: local files and S3 objects, read as streams (never
a whole file in memory), from any byte offset, with every line's number and end offset.

* `split_lines` cuts a byte stream into lines on LF (a CR before it is dropped, as `vhs send`
  reads files), numbering them and skipping blank ones. A line longer than the largest
  ingest message (`bulk.MAX_LINE_BYTES`) is refused without being held. A CSV row may hold
  line breaks inside quotes: `csv_rows` joins such lines back into one row by the csv
  module's rules, numbered by its first line, and refuses a row past the same bound. A UTF-8
  byte order mark at the start of a file is the file's, not its first line's (editors write
  one, JSONL and CSV alike): it is skipped, whatever the format. A message that starts with
  one is still refused (strict_json: RFC 8259 allows none in a JSON text).
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

import itertools
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from ..aws import error_code, is_object_missing
from ..errors import ExportChanged, InvalidInput
from .bulk import FORMATS, MAX_LINE_BYTES, SUFFIXES, Line, csv_header

READ_CHUNK_BYTES = 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"


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


def _too_long(source: str, number: int, size: int, end: int, max_bytes: int) -> Line:
    reason = f"is {size} bytes, over the limit of {max_bytes} bytes (the largest ingest message)"
    return Line(source, number, b"", end, refused=("line", reason))


def _last_line(source: str, number: int, data: bytes, end: int, max_bytes: int) -> Line | None:
    """The last line of a stream, one with no LF after it: refused if over `max_bytes`; None
    if blank (kept blank or not: no line follows it)."""
    data = data.removesuffix(b"\r")
    if not data.strip():
        return None
    if len(data) > max_bytes:
        return _too_long(source, number, len(data), end, max_bytes)
    return Line(source, number, data, end)


def _carry(held: bytearray, dropped: int, rest: memoryview, limit: int) -> int:
    """Carry a chunk's end, the start of the line being read, to the next chunk: into `held`
    while the line is within `limit`, else counted and dropped. The new `dropped`."""
    if dropped >= 0:
        return dropped + len(rest)
    if len(held) + len(rest) > limit:
        dropped = len(held) + len(rest)
        held.clear()
        return dropped
    held += rest
    return -1


def split_lines(
    chunks: Iterable[bytes],
    source: str,
    *,
    first_line: int = 1,
    offset: int = 0,
    keep_blank: bool = False,
    max_bytes: int = MAX_LINE_BYTES,
) -> Iterator[Line]:
    """The lines of a byte stream that starts at line `first_line`, byte `offset`: their bytes
    without the terminator (LF, or CRLF), and the offset just past them. Blank lines are
    skipped (their numbers are not) unless `keep_blank` (CSV: a blank line may be inside a
    quoted field). A line of more than `max_bytes` bytes (its terminator apart) is yielded
    refused, without its bytes: they are dropped as they are read, up to its LF, so memory
    stays within `max_bytes` and one read chunk whatever the file, and every byte is looked
    at once. At `offset` 0, a UTF-8 byte order mark is skipped (it is the file's)."""
    number, base = first_line, offset  # base: the offset of the chunk's first byte
    if offset == 0:
        chunks, base = _past_bom(iter(chunks))
    held = bytearray()  # the start of the line being read, while within the bound
    dropped = -1  # >= 0: the line being read is over the bound; its bytes so far
    limit = max_bytes + 1  # room for a CR before the LF
    for chunk in chunks:
        position = 0
        while (found := chunk.find(b"\n", position)) >= 0:
            end = base + found + 1
            if dropped < 0 and len(held) + found - position <= limit:
                if held:
                    held += memoryview(chunk)[position:found]
                    data = bytes(held)
                else:
                    data = chunk[position:found]
                # Inline, not a helper like `_last_line`: a call per line made this loop about
                # 7 % slower (200,000 lines of 77 bytes, median of 5); it reads every line.
                data = data.removesuffix(b"\r")
                if len(data) > max_bytes:
                    yield _too_long(source, number, len(data), end, max_bytes)
                elif keep_blank or data.strip():
                    yield Line(source, number, data, end)
            else:
                size = max(dropped, len(held)) + found - position
                yield _too_long(source, number, size, end, max_bytes)
            held.clear()
            dropped = -1
            number += 1
            position = found + 1
        dropped = _carry(held, dropped, memoryview(chunk)[position:], limit)
        base += len(chunk)
    if dropped >= 0:
        yield _too_long(source, number, dropped, base, max_bytes)
    elif (line := _last_line(source, number, bytes(held), base, max_bytes)) is not None:
        yield line


def _past_bom(chunks: Iterator[bytes]) -> tuple[Iterator[bytes], int]:
    """The chunks without a leading UTF-8 byte order mark, and the offset they start at."""
    start = b""
    for chunk in chunks:  # the first bytes, however the stream was cut
        start += chunk
        if len(start) >= len(UTF8_BOM):
            break
    if start.startswith(UTF8_BOM):
        return itertools.chain([start[len(UTF8_BOM) :]], chunks), len(UTF8_BOM)
    return itertools.chain([start], chunks), 0


_COMMA = ord(",")
# A row of one line whose every field is unquoted (no quote at all) or quoted and closed
# right before a delimiter: the common case, decided in one match (no field can be read two
# ways, so a failed match backtracks little), the rest by `_ends_in_quotes`.
_PLAIN_ROW = re.compile(rb'(?:[^",]*|"(?:[^"]|"")*")(?:,(?:[^",]*|"(?:[^"]|"")*"))*')


def _ends_in_quotes(data: bytes, inside: bool) -> bool:
    """Whether a quoted field is still open at the end of a line that starts inside one
    (`inside`) or at the start of a row, by the csv module's rules (the excel dialect,
    strict off): a quote opens a quoted field only as a field's first character; inside one,
    a doubled quote is a quote and a single one closes it; any other quote is data. Looks
    only at the quotes (bytes.find), so a line is scanned once."""
    if not inside and _PLAIN_ROW.fullmatch(data) is not None:
        return False
    position, field_start = 0, 0
    while True:
        found = data.find(b'"', position)
        if found < 0:
            return inside
        if inside:
            if data[found + 1 : found + 2] == b'"':
                position = found + 2
                continue
            inside, field_start = False, -1  # what follows a closing quote is the same field
        elif found == field_start or (found > 0 and data[found - 1] == _COMMA):
            inside = True
        position = found + 1


def csv_rows(lines: Iterable[Line], *, max_bytes: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """Physical lines joined into CSV rows as the csv module joins them: a line break inside
    a quoted field continues the row (`_ends_in_quotes`). A row is numbered by its first line.
    A row that grows past `max_bytes` (a quoted field that never closes) is yielded refused,
    covering its lines so far, and the next line starts a row afresh; so is a quoted field
    still open at the end. Every line is in one row, every row held is at most `max_bytes`,
    and each line is scanned once."""
    parts: list[bytes] = []  # the lines of a row still open
    first: Line | None = None  # its first line
    last: Line | None = None
    size = 0
    for line in lines:
        last = line
        data = line.data
        if first is None:
            if line.refused is not None:
                yield line
            elif data and not data.isspace():  # else a blank line between rows
                if _ends_in_quotes(data, False):
                    first, parts, size = line, [data], len(data)
                else:
                    yield line  # a row of one line: as it was read
            continue
        parts.append(data)
        size += 1 + len(data)
        span = line.number - first.number + 1
        if line.refused is not None or size > max_bytes:
            reason = (
                f"a quoted field opened on line {first.number} is still open on line "
                f"{line.number}, past the limit of {max_bytes} bytes for a row"
            )
            yield Line(first.source, first.number, b"", line.end, span, ("row", reason))
            first, parts = None, []
        elif not _ends_in_quotes(data, True):
            yield Line(first.source, first.number, b"\n".join(parts), line.end, span)
            first, parts = None, []
    if first is not None and last is not None:
        # A quoted field open at the end of the input (a cut file): what the csv module's
        # strict mode calls "unexpected end of data", refused rather than guessed at.
        reason = f"a quoted field opened on line {first.number} is not closed at the end"
        span = last.number - first.number + 1
        yield Line(first.source, first.number, b"", last.end, span, ("row", reason))


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
