"""`make demo`: the store's main job on the local stack (moto's server on 127.0.0.1).

Starts the local stack, writes a small scripted workload (small and large records, an update
that arrives out of order, a duplicate, a delete and a put that arrives after it) and prints
what the store made of each write, then the state of each id.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.table import Table

from .local import LocalStack, environment, local_stack
from .store import VersionedHybridStore

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _large(size: int) -> bytes:
    # Incompressible, so it really goes to S3.
    out, block = bytearray(), b"vhs-demo"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


def workload() -> list[tuple[str, str, object, datetime]]:
    """(action, id, record, timestamp) in arrival order."""
    return [
        ("put", "b1000001", {"title": "Moby-Dick", "creator": "Melville, Herman"}, T0),
        ("put", "b1000002", {"title": "Middlemarch", "creator": "Eliot, George"}, T0),
        ("put", "scan-0001.tiff", _large(5 * 1024 * 1024), T0),
        ("put", "b1000001", {"title": "Moby-Dick; or, The Whale"}, T0 + timedelta(hours=2)),
        ("put", "b1000001", {"title": "Moby Dick (draft)"}, T0 + timedelta(hours=1)),
        ("put", "b1000002", {"title": "Middlemarch", "creator": "Eliot, George"}, T0),
        ("delete", "b1000002", None, T0 + timedelta(hours=3)),
        ("put", "b1000002", {"title": "Middlemarch (late)"}, T0 + timedelta(hours=2)),
    ]


def main() -> int:
    console = Console()
    started = time.monotonic()
    with contextlib.ExitStack() as running:
        with console.status("starting the local stack (moto's server on 127.0.0.1)"):
            stack = running.enter_context(local_stack())
        running.enter_context(environment(stack.env()))
        _run(console, stack)
    console.print(f"done in {time.monotonic() - started:.1f}s")
    return 0


def _run(console: Console, stack: LocalStack) -> None:
    console.print(
        f"[bold]local stack[/] at {stack.endpoint}: table {stack.table_name}, "
        f"bucket {stack.bucket_name}"
    )
    store = VersionedHybridStore.from_env()
    writes = Table(title="writes, in arrival order")
    for column in ("#", "action", "id", "updated_at", "outcome", "version", "where"):
        writes.add_column(column)
    for n, (action, rid, record, when) in enumerate(workload(), start=1):
        if action == "put":
            result = store.put(rid, record, updated_at=when)
            where = result.location.replace(f"s3://{stack.bucket_name}/", "s3:…/")
            if result.outcome != "stored":
                where = ""
            writes.add_row(
                str(n),
                action,
                rid,
                when.strftime("%d %b %H:%M"),
                str(result.outcome),
                str(result.version),
                where,
            )
        else:
            deleted = store.delete(rid, deleted_at=when)
            writes.add_row(
                str(n),
                action,
                rid,
                when.strftime("%d %b %H:%M"),
                str(deleted.outcome),
                str(deleted.version),
                "",
            )
    console.print(writes)

    state = Table(title="state of each id")
    for column in ("id", "current", "versions held", "body"):
        state.add_column(column)
    for rid in ("b1000001", "b1000002", "scan-0001.tiff"):
        history = store.history(rid)
        latest = history[-1]
        if latest.deleted:
            body = "(deleted)"
        else:
            record = store.get(rid)
            body = (
                record.body.decode()
                if record.content_type == "application/json"
                else f"{len(record.body):,} bytes, sha256 verified"
            )
        state.add_row(rid, f"v{latest.version}", ", ".join(f"v{h.version}" for h in history), body)
    console.print(state)


if __name__ == "__main__":
    raise SystemExit(main())
