"""The peak memory of one call, measured in a process of its own.

A fresh process, because memory that earlier work freed (in a test run, hundreds of tests'
worth) would be reused by the call without growing the process, hiding part of its peak. The
kernel's high-water mark of the process's resident set (Linux: writing 5 to
/proc/self/clear_refs resets it, so it starts at the call) counts every page the call touches,
allocator overhead included. Where there is no /proc, tracemalloc measures it instead: it hooks
every allocation, which made a 2 MiB diff of deep JSON 6 to 12 times slower (100 s).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vhs.history.diffs import Diff
from vhs_testing.backends import open_backend
from vhs_testing.records import at

T = TypeVar("T")
PROC = Path("/proc/self")


def _resident(field: str) -> int:
    """A size in bytes from /proc/self/status (VmRSS: now; VmHWM: the high-water mark)."""
    for line in (PROC / "status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0]) * 1024
    raise LookupError(f"no {field} in /proc/self/status")


def peak_bytes(call: Callable[[], T]) -> tuple[int, T]:
    """How far `call` grows this process at its peak, in bytes, and what it returned."""
    gc.collect()
    try:
        (PROC / "clear_refs").write_text("5")
    except OSError:
        tracemalloc.start()
        try:
            result = call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return peak, result
    before = _resident("VmRSS")
    result = call()
    return _resident("VmHWM") - before, result


def _diff_of_a_pair(rid: str, first: bytes, second: bytes) -> tuple[int, Diff]:
    with open_backend("inprocess", None) as backend:
        store = backend.store()
        for version, body in enumerate((first, second), 1):
            store.put(rid, json.loads(body), updated_at=at(version))
        return peak_bytes(lambda: store.diff(rid, 1, 2))


def diff_peak(rid: str, first: bytes, second: bytes) -> tuple[int, Diff]:
    """`first` and `second` put as versions 1 and 2 of `rid` on in-process moto, in a process
    of its own: the peak memory of `diff(rid, 1, 2)` there, in bytes, and the diff."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_diff_of_a_pair, (rid, first, second))
