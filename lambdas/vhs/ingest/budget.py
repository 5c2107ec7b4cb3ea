"""What one ingest invocation may spend at once: memory, /tmp and time, shared by the messages
of a batch that it stores concurrently.

A message reserves what it will hold before it holds it (a claim check's payload before it is
read, a staged body before it is downloaded) and gives it back when it is stored. While the
others hold the budget it waits, but never past the invocation's time: then it is a transient
failure, retried in a later batch. What could never fit, however the batch went, is refused for
good with its reason (an InvalidMessage, so dead-lettered at once), and its neighbours are not
touched: one oversized message never takes a batch down, by memory, by /tmp or by time.

The budgets come from the function's configuration: its memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
which Lambda sets), less what the runtime itself needs; the free space of /tmp when the
function starts; and its timeout (shapes.INGEST, the value the CDK app deploys), at a
transfer rate VHS assumes and states (TRANSFER_FLOOR_BYTES_PER_SECOND).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..bodies.s3 import MULTIPART_CONCURRENCY, MULTIPART_PART_SIZE, MULTIPART_THRESHOLD
from ..errors import BudgetTimeout, OverBudget
from ..shapes import INGEST

MIB = 2**20
# Kept apart for the runtime, the handler's imports and clients (about 55 MiB measured by
# benchmarks/ingest_budget.py), its threads and buffers.
RUNTIME_RESERVE_BYTES = 192 * MIB
# How much memory a claim check's JSON payload may take while it is stored, per byte of it:
# the bytes read, the parsed values and the canonical body. Python objects are many times their
# JSON, and a producer chooses the JSON: benchmarks/ingest_budget.py measures Python's
# allocations at about 7x for catalogue records and up to about 36x for nested one-element
# lists, the worst shape it knows, and the process's resident memory at about a third more
# (the allocator's arenas). The budget plans for the worst, so no payload can take more than
# it reserved.
JSON_PAYLOAD_EXPANSION = 56
# A staged body up to this size is spooled in memory; past it, to /tmp (ingestor.py).
SPOOL_IN_MEMORY = MULTIPART_THRESHOLD
# The slowest S3 transfer the budget plans for: download, hash and upload, one after the
# other, in a 1 GB function (S3 gives a single stream of one function roughly 60 to 90 MB/s).
TRANSFER_FLOOR_BYTES_PER_SECOND = 30 * 10**6
# /tmp space never planned for: other files, and the filesystem's own.
TMP_MARGIN = 0.9


@dataclass
class Budget:
    """An amount (bytes of memory, or of /tmp) that the messages a batch handles at once
    share. `hold(n)` waits, without polling, until `n` is free."""

    name: str
    total: int
    _used: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @contextlib.contextmanager
    def hold(self, amount: int, *, deadline: float | None = None) -> Iterator[None]:
        """Hold `amount` while the block runs. Raises OverBudget if it exceeds the whole
        budget, and BudgetTimeout if it is not free by `deadline` (time.monotonic())."""
        if amount <= 0:
            yield
            return
        if amount > self.total:
            raise OverBudget(self, amount)
        with self._changed:
            while self._used + amount > self.total:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise BudgetTimeout(
                        f"{amount / MIB:,.0f} MiB of {self.name} stayed taken by the batch's "
                        "other messages for the time this invocation had left"
                    )
                self._changed.wait(left)
            self._used += amount
        try:
            yield
        finally:
            with self._changed:
                self._used -= amount
                self._changed.notify_all()

    @property
    def used(self) -> int:
        with self._changed:
            return self._used


@dataclass(frozen=True)
class Cost:
    """What storing one message holds while it is stored."""

    memory: int = 0
    tmp: int = 0
    transfer: int = 0  # bytes moved from the staging bucket to the body bucket


def claim_check_cost(payload_bytes: int) -> Cost:
    return Cost(memory=payload_bytes * JSON_PAYLOAD_EXPANSION)


def staged_body_cost(size: int) -> Cost:
    """A `record_location` body: spooled in memory up to SPOOL_IN_MEMORY and read once more
    whole for a single PUT (three copies at the peak, with the request's: measured by
    benchmarks/ingest_budget.py); past it, spooled to /tmp and uploaded in parts,
    MULTIPART_CONCURRENCY of them at once, each read and sent (two copies a part)."""
    if size <= SPOOL_IN_MEMORY:
        return Cost(memory=3 * size, transfer=size)
    return Cost(memory=2 * MULTIPART_CONCURRENCY * MULTIPART_PART_SIZE, tmp=size, transfer=size)


@dataclass
class Budgets:
    """The memory and /tmp budgets of one function instance, and its time."""

    memory: Budget
    tmp: Budget
    timeout_seconds: float = float(INGEST.function_timeout_seconds)
    # Seconds this invocation has left (set per invocation by the handler; None: no limit).
    remaining: Callable[[], float] | None = None

    @classmethod
    def of_this_function(cls) -> Budgets:
        memory_mb = int(
            os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") or INGEST.function_memory_mb
        )
        free_tmp = shutil.disk_usage(tempfile.gettempdir()).free
        return cls(
            memory=Budget("memory", max(0, memory_mb * MIB - RUNTIME_RESERVE_BYTES)),
            tmp=Budget("ephemeral storage (/tmp)", int(free_tmp * TMP_MARGIN)),
        )

    def check_time(self, cost: Cost) -> str | None:
        """Why `cost`'s transfer could never finish within the function's timeout, or None."""
        seconds = cost.transfer / TRANSFER_FLOOR_BYTES_PER_SECOND
        if seconds <= self.timeout_seconds:
            return None
        return (
            f"moving {cost.transfer / MIB:,.0f} MiB takes about {seconds:,.0f} s at "
            f"{TRANSFER_FLOOR_BYTES_PER_SECOND / 10**6:.0f} MB/s, longer than the function's "
            f"{self.timeout_seconds:.0f} s timeout"
        )

    @contextlib.contextmanager
    def hold(self, cost: Cost) -> Iterator[None]:
        """Hold `cost`'s memory, then its /tmp (always in that order, so two messages never
        wait for each other), until the invocation's time runs out."""
        deadline = None
        if self.remaining is not None:
            deadline = time.monotonic() + max(0.0, self.remaining())
        with (
            self.memory.hold(cost.memory, deadline=deadline),
            self.tmp.hold(cost.tmp, deadline=deadline),
        ):
            yield
