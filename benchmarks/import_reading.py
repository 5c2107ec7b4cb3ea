"""docs/benchmarks.md, "Bulk import: reading hostile files", each in a fresh process."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Progress, Report, peak_rss_mb, run_child, run_line, table

MB = 1_000_000
BLOCK_LINES = 10_000
SETTINGS = {False: ((10 * MB, 100 * MB, 1000 * MB), 300 * MB), True: ((MB, 10 * MB), 30 * MB)}


def jsonl_block(start: int) -> bytes:
    line = b'{"id":"rec-%09d","updated_at":"2024-05-01T00:00:00Z","record":{"title":"An item of '
    line += b'the catalogue","year":1851,"tags":["a","b","c"]}}\n'
    return b"".join(line % n for n in range(start, start + BLOCK_LINES))


def csv_block(start: int) -> bytes:
    line = b'rec-%09d,2024-05-01T00:00:00Z,"{""title"": ""An item, quoted""}",LP %d\n'
    return b"".join(line % (n, n) for n in range(start, start + BLOCK_LINES))


def fill(path: Path, head: bytes, block: Any, size: int) -> None:
    with path.open("wb") as out:
        out.write(head)
        written, start = len(head), 0
        while written < size:
            data = block(start)
            data = data[: data.rfind(b"\n", 0, size - written) + 1] or data[: data.find(b"\n") + 1]
            out.write(data)
            written, start = written + len(data), start + BLOCK_LINES


def make_inputs(directory: Path, sizes: tuple[int, ...], long_line: int) -> list[tuple]:
    """(label, path, format) of every input, written under `directory`."""
    (directory / "empty.jsonl").write_bytes(b"")
    inputs = [("empty file", directory / "empty.jsonl", "jsonl")]
    for size in sizes:
        fill(directory / f"lines-{size}.jsonl", b"", jsonl_block, size)
        inputs.append((f"JSON Lines {size // MB:,} MB", directory / f"lines-{size}.jsonl", "jsonl"))
    for size in sizes:
        # A stray quote in the first row's unquoted field: every later row is its own.
        head = b'id,updated_at,doc,title\nfirst,2024-05-01T00:00:00Z,{},12" vinyl\n'
        fill(directory / f"stray-{size}.csv", head, csv_block, size)
        inputs.append(
            (f"CSV, a stray quote, {size // MB:,} MB", directory / f"stray-{size}.csv", "csv")
        )
    path = directory / "long-line.jsonl"
    with path.open("wb") as out:
        out.write(jsonl_block(0)[:1000].rsplit(b"\n", 1)[0] + b"\n")
        for _ in range(long_line // MB):
            out.write(b"x" * MB)
        out.write(b"\n" + jsonl_block(1)[:1000].rsplit(b"\n", 1)[0] + b"\n")
    return [*inputs, (f"a {long_line // MB:,} MB line among short ones", path, "jsonl")]


def child(path: str, fmt: str) -> dict[str, Any]:
    """Read `path` as an import reads it: the counts, seconds and memory."""
    from vhs.ingest.bulk_sources import file_lines, read_header, resolve_sources

    (file,), _ = resolve_sources([path], fmt)
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: reading alone
    before = peak_rss_mb()
    started = time.perf_counter()
    offset, first = 0, 1
    if fmt == "csv" and file.size:
        _, offset = read_header(file)
        first = 2
    rows = refused = longest = 0
    for line in file_lines(file, first_line=first, offset=offset):
        rows += 1
        refused += line.refused is not None
        longest = max(longest, len(line.data))
    seconds = time.perf_counter() - started
    return {"bytes": file.size, "rows": rows, "refused": refused, "longest_row": longest,
            "seconds": seconds, "rss_before_mb": before, "peak_rss_mb": peak_rss_mb()}  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    from vhs.ingest.bulk_lines import MAX_LINE_BYTES

    results = []
    with tempfile.TemporaryDirectory(prefix="vhs-import-reading-") as directory:
        for label, path, fmt in make_inputs(Path(directory), *SETTINGS[args.quick]):
            progress(f"reading {label}")
            results.append({"input": label, "format": fmt, **run_child(__name__, str(path), fmt)})
    rows = []
    for r in results:
        size, growth = r["bytes"] / MB, r["peak_rss_mb"] - r["rss_before_mb"]
        rows.append([r["input"], f"{size:,.0f}" if size >= 1 or not r["bytes"] else f"{size:.2f}",
                     f"{r['rows']:,}", f"{r['refused']:,}", f"{r['longest_row']:,} B",
                     f"{r['seconds']:.2f}", f"{r['seconds'] / size:.4f}" if r["bytes"] else "-",
                     f"{growth:.1f} MiB"])  # fmt: skip
    base = min(r["rss_before_mb"] for r in results)
    headers = ["input", "MB", "rows", "refused", "longest row", "s", "s/MB", "peak RSS growth"]
    text = "\n\n".join([
        run_line("quick" if args.quick else "full", progress.elapsed)
        + f" Lines capped at {MAX_LINE_BYTES:,} bytes; resident set before reading about "
        f"{base:.0f} MiB.",
        table(headers, rows),
    ])  # fmt: skip
    return Report({"import-reading": text}, results)
