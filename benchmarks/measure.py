"""The store benchmark's measurements: cost per operation, cost of the size mix, storage, and
wall time per operation (runs of the systems interleaved, in a rotating order)."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from . import pricing, workload
from .pricing import Bill
from .scenarios import OPERATIONS, Operation, Samples
from .systems import System

Progress = Callable[[str], None]


@runtime_checkable
class Replayer(Protocol):
    """A system that times another system's recorded requests (peers/raw_vhs_requests.py)."""

    name: str

    def prepare_operation(self, operation: Operation, id: str, samples: Samples) -> Any: ...


def combine(bills: Sequence[Bill]) -> Bill:
    """One bill for many: requests, units and operations added up."""
    requests: dict[str, int] = {}
    for bill in bills:
        for op, count in bill.requests.items():
            requests[op] = requests.get(op, 0) + count
    return Bill(
        requests=requests,
        write_units=sum(b.write_units for b in bills),
        read_units=sum(b.read_units for b in bills),
        operations=sum(b.operations for b in bills),
    )


# --- Cost per operation --------------------------------------------------------------------------


@dataclass
class OperationCost:
    operation: Operation
    bills: dict[str, Bill]  # system name -> bill for one action (or the mean of `repeats`)
    outcomes: dict[str, str]  # system name -> what the system said it did


def cost_per_operation(systems: Sequence[System], samples: Samples) -> list[OperationCost]:
    results = []
    for index, operation in enumerate(OPERATIONS):
        bills: dict[str, Bill] = {}
        outcomes: dict[str, str] = {}
        for system in systems:
            action = operation.prepare(system, f"cost-{index:02d}", samples)
            with system.biller.bill(operations=operation.repeats) as bill:
                results_of_actions = [action() for _ in range(operation.repeats)]
            bills[system.name] = bill
            outcome = results_of_actions[-1]
            outcomes[system.name] = outcome if isinstance(outcome, str) else "ok"
        results.append(OperationCost(operation, bills, outcomes))
    return results


# --- Cost of the size mix ------------------------------------------------------------------------


@dataclass
class MixCost:
    """Bills per system, per put ("1" for the creates, "2" for the first updates, ...) and
    per size class."""

    bodies: list[workload.Body]
    puts: int = 2
    bills: dict[str, dict[str, dict[str, Bill]]] = field(default_factory=dict)

    def total(self, system: str, passes: Sequence[str]) -> Bill:
        return combine([b for p in passes for b in self.bills[system][p].values()])

    def by_class(self, system: str, size_class: str, passes: Sequence[str]) -> Bill:
        return combine([self.bills[system][p][size_class] for p in passes])


def versions(
    bodies: Sequence[workload.Body], seed: int, puts: int
) -> Iterator[tuple[list[dict[str, Any]], datetime]]:
    """Every record's versions, put by put: the records themselves at day 1, then each put a
    cataloguer's edit of the one before (`workload.revise`) at the next day, the same edits for
    every system. Put 2 is the two-version mix's update. Lazy: one version of each record in
    memory at a time (the archives are megabytes)."""
    rngs = [random.Random(f"{seed}/rev/{b.id}") for b in bodies]
    records = [b.record for b in bodies]
    yield records, workload.timestamp(1)
    for put in range(2, puts + 1):
        when = workload.timestamp(put)
        records = [workload.revise(r, rng, when) for r, rng in zip(records, rngs, strict=True)]
        yield records, when


def cost_of_mix(
    systems: Sequence[System],
    bodies: Sequence[workload.Body],
    seed: int,
    puts: int,
    progress: Progress,
) -> MixCost:
    """Put every record `puts` times (a create, then edits), every put billed alone."""
    result = MixCost(list(bodies), puts, {s.name: {} for s in systems})

    def run_system(system: System, name: str, records: list[dict[str, Any]], when: datetime):
        per_class: dict[str, list[Bill]] = {}
        for body, record in zip(bodies, records, strict=True):
            # One bill per put, so the report can break the mix down by size class.
            with system.biller.bill() as bill:
                system.put(body.id, record, when, exists=name != "1")
            per_class.setdefault(body.size_class, []).append(bill)
        return {c: combine(b) for c, b in per_class.items()}

    # Costs do not depend on timing, and each system has its own clients, meters, table and
    # bucket: run the systems side by side, so the client and the server overlap their work.
    with ThreadPoolExecutor(max_workers=len(systems)) as pool:
        for number, (records, when) in enumerate(versions(bodies, seed, puts), start=1):
            name = str(number)
            progress(f"size mix: put {number} of {puts} ({len(records)} records, each system)")
            runs = [pool.submit(run_system, s, name, records, when) for s in systems]
            for system, run in zip(systems, runs, strict=True):
                result.bills[system.name][name] = run.result()
    return result


# --- Storage after the mix -----------------------------------------------------------------------


@dataclass(frozen=True)
class Storage:
    """What one system's table and bucket hold: items and their bytes (each as DynamoDB bills
    storage: the item's size plus 100 bytes of overhead), objects and their bytes."""

    items: int
    item_bytes: int
    objects: int
    object_bytes: int

    def gb_month(self, records: int) -> tuple[float, float]:
        """GB (2^30 bytes) held per record, in DynamoDB and in S3."""
        return (
            self.item_bytes / records / pricing.GB,
            self.object_bytes / records / pricing.GB,
        )

    def dollars_per_million_records(self, records: int) -> float:
        """$ per month for a million records held as these are."""
        dynamodb, s3 = self.gb_month(records)
        return pricing.storage_dollars(dynamodb, s3) * 1e6


def stored(s3: Any, dynamodb: Any, *, table: str, bucket: str) -> Storage:
    """Scan `table` and list `bucket` with un-metered clients: what is actually kept."""
    items = item_bytes = 0
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items += 1
            item_bytes += pricing.item_size(item) + pricing.DYNAMODB_ITEM_OVERHEAD
    objects = object_bytes = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            objects += 1
            object_bytes += entry["Size"]
    return Storage(items, item_bytes, objects, object_bytes)


# --- Wall time -----------------------------------------------------------------------------------


@dataclass
class WallTime:
    operation: Operation
    seconds: dict[str, list[float]]  # system name -> one time per repetition
    baseline: str

    def median(self, system: str) -> float:
        return statistics.median(self.seconds[system])

    def ratio(self, system: str) -> float:
        """Median time over the baseline's median time."""
        return self.median(system) / self.median(self.baseline)

    def paired_spread(self, system: str) -> tuple[float, float]:
        """Quartiles of the per-repetition ratios: how much the noise moves the ratio."""
        ratios = [
            s / b for s, b in zip(self.seconds[system], self.seconds[self.baseline], strict=True)
        ]
        if len(ratios) < 4:
            return min(ratios), max(ratios)
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        return q1, q3


def _timed(action: Callable[[], Any]) -> float:
    # Garbage collection off inside the timed call: a collection triggered by one system's
    # allocations would otherwise land on whichever call happens to be running.
    gc.disable()
    try:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start
    finally:
        gc.enable()


def wall_times(
    systems: Sequence[System | Replayer],
    samples: Samples,
    baseline: str,
    repetitions: Callable[[Operation], tuple[int, int]],
    progress: Progress,
) -> list[WallTime]:
    """Per operation, `warmup + reps` rounds; each round runs every system once on a fresh
    id, starting from a different system each round so no system always goes first."""
    results = []
    for index, operation in enumerate(o for o in OPERATIONS if o.timed):
        warmup, reps = repetitions(operation)
        progress(f"wall time: {operation.name} ({reps} rounds)")
        seconds: dict[str, list[float]] = {s.name: [] for s in systems}
        for round_ in range(warmup + reps):
            shift = round_ % len(systems)
            for system in [*systems[shift:], *systems[:shift]]:
                id = f"wall-{index:02d}-{round_:03d}"
                if isinstance(system, Replayer):  # diagnostic: replays VHS's requests
                    action = system.prepare_operation(operation, id, samples)
                else:
                    action = operation.prepare(system, id, samples)
                elapsed = _timed(action)
                if round_ >= warmup:
                    seconds[system.name].append(elapsed)
        results.append(WallTime(operation, seconds, baseline))
    return results
