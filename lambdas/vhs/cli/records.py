"""Records: `vhs put`, `get`, `history` and `delete`."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .output import console, emit_json, now


def open_store() -> Any:
    from ..store import VersionedHybridStore

    return VersionedHybridStore.from_env()


def cmd_put(args: argparse.Namespace) -> int:
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    record: Any = data
    if not args.raw:
        try:
            record = json.loads(data)
        except ValueError:
            print(f"{args.file} is not JSON; pass --raw to store it as bytes", file=sys.stderr)
            return 2
    result = open_store().put(
        args.id, record, updated_at=args.updated_at or now(), content_type=args.content_type
    )
    if args.json:
        emit_json(
            {
                "id": result.id,
                "outcome": str(result.outcome),
                "version": result.version,
                "content_hash": result.content_hash,
                "location": result.location,
            }
        )
    else:
        print(f"{result.id}: {result.outcome}, version {result.version} ({result.location})")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    record = open_store().get(args.id, version=args.version)
    if args.json:
        out: dict[str, Any] = {
            "id": record.id,
            "version": record.version,
            "updated_at": record.updated_at.isoformat(),
            "content_type": record.content_type,
            "content_hash": record.content_hash,
        }
        if record.content_type == "application/json":
            out["record"] = record.json()
        else:
            out["body_base64"] = base64.b64encode(record.body).decode()
        emit_json(out)
    else:
        sys.stdout.buffer.write(record.body)
        if sys.stdout.isatty():
            sys.stdout.write("\n")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    versions = open_store().history(args.id)
    if args.json:
        emit_json([{**asdict(v), "updated_at": v.updated_at.isoformat()} for v in versions])
        return 0
    from rich.table import Table

    table = Table(title=f"history of {args.id}")
    for column in ("version", "updated_at", "size", "sha256", "where"):
        table.add_column(column, justify="right" if column in {"version", "size"} else "left")
    for v in versions:
        table.add_row(
            str(v.version),
            v.updated_at.isoformat(),
            "-" if v.deleted else f"{v.size:,}",
            "(deleted)" if v.deleted else (v.content_hash or "")[:16] + "…",
            v.location or "",
        )
    console().print(table)
    return 0


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
