"""Framing: a byte stream cut into lines, and lines joined into CSV rows, each numbered and
bound, never held whole. Apart from where the bytes come from (bulk_sources.py: files and S3
objects) and from what a line means (bulk.py judges it as a message; bulk_csv.py maps a row to
one): the CLI's `vhs send` reads its lines here too.

* `split_lines` cuts a byte stream into lines on LF (a CR before it is dropped, as `vhs send`
  reads files), numbering them and skipping blank ones. A line longer than the largest
  ingest message (`MAX_LINE_BYTES`) is refused without being held. A UTF-8 byte order mark
  at the start of a file is the file's, not its first line's (editors write one, JSONL and
  CSV alike): it is skipped, whatever the format. A message that starts with one is still
  refused (strict_json: RFC 8259 allows none in a JSON text).
* A CSV row may hold line breaks inside quotes: `csv_rows` joins such lines back into one row
  by the csv module's rules, numbered by its first line, and refuses a row past the same
  bound.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..shapes import INGEST

# The longest line (a CSV row: all its physical lines) an import reads: the largest message the
# ingest queue accepts, so a line is refused exactly when the queue path would refuse it.
MAX_LINE_BYTES = INGEST.max_message_bytes
UTF8_BOM = b"\xef\xbb\xbf"


class Line(NamedTuple):
    """One line (a CSV row, which may span lines) of a source, as read. A tuple: a file is
    millions of them, and a tuple is built several times faster than a frozen dataclass."""

    source: str  # a path, or s3://bucket/key
    number: int  # its first line's number in the file, from 1
    data: bytes  # without its terminator
    end: int  # the byte offset just past it: where a resumed read starts
    span: int = 1  # the physical lines it covers (a CSV row with line breaks in quotes)
    # (field, reason): a line refused as it was read (over MAX_LINE_BYTES); its bytes are
    # not held (`data` is empty).
    refused: tuple[str, str] | None = None

    @property
    def next_number(self) -> int:
        """The number of the line after it: where a resumed read's numbering starts."""
        return self.number + self.span


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
