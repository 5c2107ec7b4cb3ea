"""Records: `vhs put`, `get`, `history`, `diff` and `delete`."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vhs.errors import InvalidInput
from vhs.strict_json import parse_document

from .output import console, emit_json, now


def open_store() -> Any:
    from vhs.store import VersionedHybridStore

    return VersionedHybridStore.from_env()


# `--part NAME=FILE;type=TYPE`: curl's -F spelling of a part's content type.
PART_TYPE = ";type="


def part_spec(spec: str) -> tuple[str, str, str | None]:
    """(name, file, content type or None) of a `--part NAME=FILE[;type=TYPE]`."""
    name, equals, rest = spec.partition("=")
    path, typed, content_type = rest.rpartition(PART_TYPE) if PART_TYPE in rest else (rest, "", "")
    if not equals or not name or not path or (typed and not content_type):
        raise InvalidInput(
            "--part", f"{spec!r}: expected NAME=FILE or NAME=FILE;type=TYPE, e.g. scan=scan.tiff"
        )
    return name, path, content_type or None


def cmd_put(args: argparse.Namespace) -> int:
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    record: Any = data
    if not args.raw:
        # The rules of every door (strict_json): a duplicate key or 1e400 is refused here as
        # a message carrying it would be.
        try:
            record = parse_document(data, "FILE")
        except InvalidInput as error:
            raise InvalidInput(
                "FILE", f"{args.file} is not JSON: {error.reason}; pass --raw to store it as bytes"
            ) from None
    with contextlib.ExitStack() as files:
        parts: dict[str, Any] = {}
        for spec in getattr(args, "part", None) or []:
            name, path, content_type = part_spec(spec)
            if name in parts:
                raise InvalidInput("--part", f"{name!r} is given twice")
            part = files.enter_context(open(path, "rb"))
            parts[name] = part if content_type is None else (part, content_type)
        result = open_store().put(
            args.id,
            record,
            updated_at=args.updated_at or now(),
            content_type=args.content_type,
            parts=parts or None,
        )
    if args.json:
        out = {
            "id": result.id,
            "outcome": str(result.outcome),
            "version": result.version,
            "content_hash": result.content_hash,
            "location": result.location,
        }
        if result.parts:
            out["body_hash"] = result.body_hash
            out["parts"] = {name: asdict(part) for name, part in result.parts.items()}
        emit_json(out)
    else:
        where = f" ({result.location})" if result.location else ""
        print(f"{result.id}: {result.outcome}, version {result.version}{where}")
        for name, part in result.parts.items():
            print(f"  part {name}: {part.size:,} bytes ({part.location})")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    record = open_store().get(
        args.id,
        version=args.version,
        as_of=getattr(args, "as_of", None),
        source_as_of=getattr(args, "source_as_of", None),
    )
    name = getattr(args, "part", None)
    output = getattr(args, "output", None)
    if name is not None or output is not None:
        data = record.body if name is None else record.part(name)
        if output is not None:
            Path(output).write_bytes(data)
        elif args.json:
            part = record.parts[name]  # type: ignore[index]
            emit_json({**asdict(part), "body_base64": base64.b64encode(data).decode()})
        else:
            write_out(data)
        return 0
    if args.json:
        out: dict[str, Any] = {
            "id": record.id,
            "version": record.version,
            "updated_at": record.updated_at.isoformat(),
            "content_type": record.content_type,
            "content_hash": record.content_hash,
        }
        if record.parts:
            out["body_hash"] = record.body_hash
            out["parts"] = {name: asdict(part) for name, part in record.parts.items()}
        if record.content_type == "application/json":
            out["record"] = record.json()
        else:
            out["body_base64"] = base64.b64encode(record.body).decode()
        emit_json(out)
    else:
        write_out(record.body)
    return 0


# A body is written in pieces of this size, each flushed: a reader that stops (`| head -c
# 10`) stops the command at the next piece, exit 141 as docs/cli.md says, rather than after
# one write of the whole body has filled whatever the pipe would take.
WRITE_PIECE_BYTES = 64 * 1024


def write_out(data: bytes) -> None:
    """The bytes of a body or part on standard output: exactly them to a pipe or file; on a
    terminal, with a newline after them if they do not end with one, so the prompt starts
    on a line of its own."""
    out = sys.stdout.buffer
    view = memoryview(data)
    for start in range(0, len(view), WRITE_PIECE_BYTES):
        out.write(view[start : start + WRITE_PIECE_BYTES])
        out.flush()
    if sys.stdout.isatty() and not data.endswith(b"\n"):
        out.write(b"\n")
    out.flush()


def cmd_history(args: argparse.Namespace) -> int:
    versions = open_store().history(args.id)
    if args.json:
        emit_json([_version_json(v) for v in versions])
        return 0
    from rich.table import Table

    table = Table(title=f"history of {args.id}")
    for column in ("version", "updated_at", "size", "sha256", "where", "parts"):
        table.add_column(column, justify="right" if column in {"version", "size"} else "left")
    for v in versions:
        table.add_row(
            str(v.version),
            v.updated_at.isoformat(),
            "-" if v.deleted else f"{v.size:,}",
            "(deleted)" if v.deleted else (v.content_hash or "")[:16] + "…",
            v.location or "",
            ", ".join(v.parts),
        )
    console().print(table)
    return 0


def _version_json(version: Any) -> dict[str, Any]:
    out = {**asdict(version), "updated_at": version.updated_at.isoformat()}
    if not version.parts:
        del out["parts"]  # the shape of a record without parts is as it always was
    return out


def cmd_diff(args: argparse.Namespace) -> int:
    diff = open_store().diff(args.id, args.a, args.b)
    if args.json:
        emit_json(diff.as_json())
        return 0
    from rich.table import Table

    old, new = diff.old, diff.new
    table = Table(title=f"{diff.id}: version {old.version} to {new.version}")
    for column in ("", f"version {old.version}", f"version {new.version}", "change"):
        table.add_column(column)
    table.add_row("updated_at", old.updated_at.isoformat(), new.updated_at.isoformat(), "")
    types_differ = "changed" if old.content_type != new.content_type else ""
    table.add_row("content type", old.content_type, new.content_type, types_differ)
    body = "changed" if diff.body_changed else "same"
    table.add_row(
        "body", _described(old.size, old.body_hash), _described(new.size, new.body_hash), body
    )
    for name, part in diff.parts.items():
        sides = [
            _described(p["size"], p["content_hash"]) if p else "-" for p in (part.old, part.new)
        ]
        table.add_row(f"part {name}", *sides, part.change)
    console().print(table)
    if diff.reason is not None:
        console().print(f"no JSON Patch: {diff.reason}", markup=False, highlight=False)
    elif diff.patch == []:
        console().print("JSON Patch: none (the records are the same)", highlight=False)
    elif diff.patch is not None:
        patch = Table(title=f"JSON Patch: {len(diff.patch)} operations")
        for column in ("op", "path", "value"):
            patch.add_column(column)
        for operation in diff.patch:
            value = (
                json.dumps(operation["value"], ensure_ascii=False) if "value" in operation else ""
            )
            patch.add_row(operation["op"], operation["path"], _cut(value, 80))
        console().print(patch)
    return 0


def _described(size: int, content_hash: str) -> str:
    return f"{size:,} bytes, {content_hash[:16]}…"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_delete(args: argparse.Namespace) -> int:
    result = open_store().delete(
        args.id, deleted_at=args.deleted_at or now(), purge=getattr(args, "purge", False)
    )
    if args.json:
        emit_json(
            {
                "id": result.id,
                "outcome": str(result.outcome),
                "version": result.version,
                "purged": result.purged,
            }
        )
    else:
        purged = ", earlier versions purged" if result.purged else ""
        print(f"{result.id}: {result.outcome}, version {result.version}{purged}")
    return 0
