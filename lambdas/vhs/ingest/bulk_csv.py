"""CSV rows made into ingest messages: which columns are the id, the timestamp, the record or
a delete flag (`CsvMapping`, from `vhs import --map` or the cloud's request), and a file's
header read. A mapping is a value, given by the CLI and by the bulk-import handler and used by
`bulk.ImportWorker`: apart from the writing, which does not care where a message came from.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput, InvalidMessage
from ..strict_json import parse_document

MAP_TARGETS = ("id", "updated_at", "record", "deleted")
_TRUE, _FALSE = frozenset({"true", "1"}), frozenset({"", "false", "0"})


@dataclass(frozen=True)
class CsvMapping:
    """Which CSV columns make a message. `id` and `updated_at` name columns; `record` names a
    column holding the record as JSON, or is None: every column that is not mapped becomes a
    string field of a JSON object record. `deleted`, if set, names a column whose `true` (or
    1) makes the row a delete; empty, `false` or 0 is a put."""

    id: str = "id"
    updated_at: str = "updated_at"
    record: str | None = None
    deleted: str | None = None

    @classmethod
    def parse(cls, options: Iterable[str]) -> CsvMapping:
        """From `target=column` options (`--map record=payload`). Raises InvalidInput
        naming the option."""
        given: dict[str, str] = {}
        for option in options:
            target, sep, column = option.partition("=")
            target = target.strip()
            if not sep or not column:
                raise InvalidInput("--map", f"{option!r} is not TARGET=COLUMN")
            if target not in MAP_TARGETS:
                raise InvalidInput(
                    "--map", f"unknown target {target!r}: one of {', '.join(MAP_TARGETS)}"
                )
            if target in given:
                raise InvalidInput(f"--map {target}", "is given twice")
            given[target] = column
        mapping = cls(**given)
        columns = [
            c for c in (mapping.id, mapping.updated_at, mapping.record, mapping.deleted) if c
        ]
        for target, column in mapping.mapped().items():
            if columns.count(column) > 1:
                raise InvalidInput(f"--map {target}", f"column {column!r} is mapped twice")
        return mapping

    @classmethod
    def of(cls, value: Mapping[str, Any] | None) -> CsvMapping:
        """From its JSON form (as_json), as the cloud worker is handed it."""
        return cls.parse(f"{k}={v}" for k, v in (value or {}).items() if v)

    def mapped(self) -> dict[str, str]:
        """{target: column} of the targets that name a column."""
        pairs = {"id": self.id, "updated_at": self.updated_at}
        pairs.update({"record": self.record} if self.record else {})
        pairs.update({"deleted": self.deleted} if self.deleted else {})
        return pairs

    def as_json(self) -> dict[str, str]:
        return self.mapped()

    def check_header(self, header: Sequence[str], source: str) -> None:
        """Raise InvalidInput naming the mapping target whose column `header` lacks."""
        for target, column in self.mapped().items():
            if column not in header:
                raise InvalidInput(
                    f"--map {target}",
                    f"{source} has no column {column!r} (its header: {', '.join(header)})",
                )
        if len(set(header)) != len(header):
            twice = sorted({c for c in header if list(header).count(c) > 1})
            raise InvalidInput("header", f"{source} names column {twice[0]!r} twice")

    def message(self, header: Sequence[str], row: Sequence[str]) -> dict[str, Any]:
        """The ingest message of one row. Raises InvalidMessage naming the column."""
        if len(row) < len(header):
            raise InvalidMessage(
                header[len(row)], f"missing: the row has {len(row)} of {len(header)} columns"
            )
        if len(row) > len(header):
            raise InvalidMessage(
                "row", f"has {len(row)} columns, the header {len(header)}: a stray delimiter?"
            )
        cells = dict(zip(header, row, strict=True))
        for column, cell in cells.items():
            # Bytes that are not UTF-8 were decoded as lone surrogates (surrogateescape).
            if any("\udc80" <= c <= "\udcff" for c in cell):
                raise InvalidMessage(column, "not UTF-8")
        message: dict[str, Any] = {"id": cells[self.id], "updated_at": cells[self.updated_at]}
        if self.deleted:
            flag = cells[self.deleted].strip().lower()
            if flag in _TRUE:
                return {**message, "deleted": True}
            if flag not in _FALSE:
                raise InvalidMessage(self.deleted, f"must be true, false or empty, not {flag!r}")
        if self.record:
            try:
                message["record"] = parse_document(cells[self.record], self.record)
            except InvalidInput as error:
                raise InvalidMessage(self.record, f"not a JSON record: {error.reason}") from None
        else:
            taken = set(self.mapped().values())
            message["record"] = {k: v for k, v in cells.items() if k not in taken}
        return message

    def column_of(self, field: str) -> str:
        """The column a message field came from (its report names what the file has)."""
        root = field.partition(".")[0]
        if root == "record" and self.record is None:
            return field.partition(".")[2] or "record"
        return self.mapped().get(root, field)


def csv_header(data: bytes, source: str) -> list[str]:
    """The column names of a CSV file's first line (UTF-8, a byte order mark allowed)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInput("header", f"{source}: not UTF-8 at byte {error.start}") from None
    header = next(csv.reader([text]), [])
    if not header:
        raise InvalidInput("header", f"{source}: the first line names no columns")
    return header
