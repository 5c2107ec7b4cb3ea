"""The store benchmark's operations and measurements: `Operation.prepare(system, id, samples)`
sets `id` up, untimed, and returns the action that is billed or timed."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import pricing, workload
from .pricing import Bill
from .systems import Action, Operation, Prepare, System
from .workload import Samples

Progress = Callable[[str], None]
STEADY_STATE_PRIOR_VERSIONS = 6  # enough for VHS's default retention to be full
STEADY_STATE_UPDATES = 4  # billed updates, averaged, so trims show at their real rate
T1, T2, T3 = workload.timestamp(1), workload.timestamp(2), workload.timestamp(3)


def combine(bills: Sequence[Bill]) -> Bill:
    requests = sum((Counter(b.requests) for b in bills), Counter())
    units = sum(b.write_units for b in bills), sum(b.read_units for b in bills)
    return Bill(dict(requests), *units, operations=sum(b.operations for b in bills))


@dataclass
class OperationCost:
    operation: Operation
    bills: dict[str, Bill]  # system name -> bill for one action (the mean of `repeats`)
    outcomes: dict[str, str]  # system name -> what the system said it did


def cost_per_operation(systems: Sequence[System], samples: Samples) -> list[OperationCost]:
    results = []
    for index, operation in enumerate(OPERATIONS):
        cost = OperationCost(operation, {}, {})
        for system in systems:
            action = operation.prepare(system, f"cost-{index:02d}", samples)
            with system.biller.bill(operations=operation.repeats) as bill:
                outcome = [action() for _ in range(operation.repeats)][-1]
            cost.bills[system.name] = bill
            cost.outcomes[system.name] = outcome if isinstance(outcome, str) else "ok"
        results.append(cost)
    return results


@dataclass
class MixCost:
    """Bills per system, per put ("1": the creates, "2": the first updates...), per class."""

    bodies: list[workload.Body]
    puts: int = 2
    bills: dict[str, dict[str, dict[str, Bill]]] = field(default_factory=dict)

    def total(self, system: str, passes: Sequence[str]) -> Bill:
        return combine([b for p in passes for b in self.bills[system][p].values()])

    def by_class(self, system: str, size_class: str, passes: Sequence[str]) -> Bill:
        return combine([self.bills[system][p][size_class] for p in passes])


def cost_of_mix(systems: Sequence[System], bodies: Sequence[workload.Body], seed: int,
                puts: int, progress: Progress) -> MixCost:  # fmt: skip
    """Put every record `puts` times, each put billed alone, the systems side by side."""
    result = MixCost(list(bodies), puts, {s.name: {} for s in systems})
    rngs = [random.Random(f"{seed}/rev/{b.id}") for b in bodies]
    records = [b.record for b in bodies]

    def run_system(system: System, put: str, records: list[dict[str, Any]], when: Any) -> None:
        per_class: dict[str, list[Bill]] = {}
        for body, record in zip(bodies, records, strict=True):
            with system.biller.bill() as bill:
                system.put(body.id, record, when, exists=put != "1")
            per_class.setdefault(body.size_class, []).append(bill)
        result.bills[system.name][put] = {c: combine(b) for c, b in per_class.items()}

    with ThreadPoolExecutor(max_workers=len(systems)) as pool:
        for put in range(1, puts + 1):
            when = workload.timestamp(put)
            if put > 1:  # one version of each record in memory at a time: archives are MBs
                records = [workload.revise(r, g, when) for r, g in zip(records, rngs, strict=True)]
            progress(f"size mix: put {put} of {puts} ({len(records)} records, each system)")
            for run in [pool.submit(run_system, s, str(put), records, when) for s in systems]:
                run.result()
    return result


@dataclass(frozen=True)
class Storage:
    """What one system's table and bucket hold (item bytes with DynamoDB's 100 of overhead)."""

    items: int
    item_bytes: int
    objects: int
    object_bytes: int

    def gb_month(self, records: int) -> tuple[float, float]:
        """GB (2^30 bytes) held per record, in DynamoDB and in S3."""
        return self.item_bytes / records / pricing.GB, self.object_bytes / records / pricing.GB


def stored(s3: Any, dynamodb: Any, *, table: str, bucket: str) -> Storage:
    """Scan `table` and list `bucket` with un-metered clients: what is actually kept."""
    pages = dynamodb.get_paginator("scan").paginate(TableName=table)
    items = [
        pricing.item_size(i) + pricing.DYNAMODB_ITEM_OVERHEAD for p in pages for i in p["Items"]
    ]
    listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    objects = [e["Size"] for page in listed for e in page.get("Contents", [])]
    return Storage(len(items), sum(items), len(objects), sum(objects))


@dataclass
class WallTime:
    operation: Operation
    seconds: dict[str, list[float]]  # system name -> one time per round
    baseline: str

    def median(self, system: str) -> float:
        return statistics.median(self.seconds[system])

    def ratio(self, system: str) -> float:
        return self.median(system) / self.median(self.baseline)

    def paired_spread(self, system: str) -> tuple[float, float]:
        """Quartiles of the per-round ratios: how much the noise moves the ratio."""
        pairs = zip(self.seconds[system], self.seconds[self.baseline], strict=True)
        ratios = [s / b for s, b in pairs]
        if len(ratios) < 4:
            return min(ratios), max(ratios)
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        return q1, q3


def timed(action: Callable[[], Any]) -> float:
    # Garbage collection off inside the timed call: a collection triggered by one system's
    # allocations would otherwise land on whichever call happens to be running.
    gc.disable()
    try:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start
    finally:
        gc.enable()


def wall_times(systems: Sequence[Any], samples: Samples, baseline: str,
               rounds: Callable[[Operation], tuple[int, int]],
               progress: Progress) -> list[WallTime]:  # fmt: skip
    """Per operation, warm-up then measured rounds, each starting from the next system."""
    results = []
    for index, operation in enumerate(o for o in OPERATIONS if o.timed):
        warmup, reps = rounds(operation)
        progress(f"wall time: {operation.name} ({reps} rounds)")
        seconds: dict[str, list[float]] = {s.name: [] for s in systems}
        for round_ in range(warmup + reps):
            shift = round_ % len(systems)
            for system in [*systems[shift:], *systems[:shift]]:
                id = f"wall-{index:02d}-{round_:03d}"
                if hasattr(system, "prepare_operation"):  # replays VHS's requests
                    elapsed = timed(system.prepare_operation(operation, id, samples))
                else:
                    elapsed = timed(operation.prepare(system, id, samples))
                if round_ >= warmup:
                    seconds[system.name].append(elapsed)
        results.append(WallTime(operation, seconds, baseline))
    return results


def put(size: str, setup: str | None, action: str = "new") -> Prepare:
    """Write version `setup` ("v1"/"v2", or None) first; then the put to measure: "new" (v1 on
    a new id), "update" (v2 at T2), "duplicate" (v1 at T1 again) or "stale" (v1 after v2)."""

    def prepare(system: System, id: str, samples: Samples) -> Action:
        first, second = getattr(samples, size)
        if setup:
            system.put(id, *((first, T1) if setup == "v1" else (second, T2)), exists=False)
        if action == "update":
            return lambda: system.put(id, second, T2, exists=True)
        return lambda: system.put(id, first, T1, exists=action != "new")

    return prepare


def read(size: str) -> Prepare:
    def prepare(system: System, id: str, samples: Samples) -> Action:
        system.put(id, getattr(samples, size)[0], T1, exists=False)
        return lambda: system.get(id)

    return prepare


def delete(system: System, id: str, samples: Samples) -> Action:
    system.put(id, samples.small[0], T1, exists=False)
    return lambda: system.delete(id, T3)


def steady_state_update(system: System, id: str, samples: Samples) -> Action:
    """An update of an id with history: VHS keeps it in the item, so its write units grow."""
    rng, days, record = random.Random(f"steady/{id}"), iter(range(1, 1000)), samples.small[0]

    def update(exists: bool = True) -> str:
        nonlocal record
        day = next(days)
        if exists:
            record = workload.revise(record, rng, workload.timestamp(day))
        return system.put(id, record, workload.timestamp(day), exists=exists)

    update(exists=False)
    for _ in range(STEADY_STATE_PRIOR_VERSIONS - 1):
        update()
    return update


# A small put with delta history reads the item first (half a read unit, so that the version it
# supersedes is kept as a delta): the floor is the one write plus that read.
SMALL = {"floor": {"GetItem": 1, "UpdateItem": 1},
         "floor_note": "the write, plus the read delta history needs"}  # fmt: skip
LARGE = {"floor": {"PutObject": 1, "UpdateItem": 1}}
STEADY_NAME = (f"small put (update, versions {STEADY_STATE_PRIOR_VERSIONS + 1}-"
               f"{STEADY_STATE_PRIOR_VERSIONS + STEADY_STATE_UPDATES}, mean)")  # fmt: skip
OPERATIONS: tuple[Operation, ...] = (
    Operation("small put (new id)", put("small", None), **SMALL),
    Operation("small put (update)", put("small", "v1", "update"), **SMALL),
    Operation("large put (new id)", put("large", None), **LARGE),
    Operation("large put (update)", put("large", "v1", "update"), **LARGE),
    Operation("duplicate put (small)", put("small", "v1", "duplicate")),
    Operation("duplicate put (large)", put("large", "v1", "duplicate")),
    Operation("stale put (small)", put("small", "v2", "stale")),
    Operation("stale put (large)", put("large", "v2", "stale")),
    Operation("latest read (small)", read("small"), floor={"GetItem": 1}),
    Operation("latest read (large)", read("large"), floor={"GetItem": 1, "GetObject": 1}),
    Operation("delete (small)", delete),
    Operation(STEADY_NAME, steady_state_update, STEADY_STATE_UPDATES, timed=False, **SMALL),
)


def meets_floor(bill: Bill, floor: dict[str, int]) -> bool:
    """Per operation, exactly the floor's S3 requests and GetItems, and as many DynamoDB writes
    (by PutItem or UpdateItem)."""

    def shape(counts: dict[str, Any]) -> tuple[dict[str, float], float, float]:
        s3 = {op: float(n) for op, n in counts.items() if op not in pricing.DYNAMODB_OPERATIONS}
        writes = sum(n for op, n in counts.items() if op in pricing.DYNAMODB_WRITES)
        return s3, writes, counts.get("GetItem", 0)

    return shape({op: bill.per_operation(op) for op in bill.requests}) == shape(floor)
