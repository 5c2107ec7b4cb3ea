"""The operations the store benchmark prices and times: `Operation.prepare(system, id,
samples)` brings `id` into the state the operation needs, untimed, and returns the action."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import workload
from .systems import System

Action = Callable[[], Any]

SMALL_SIZE = 2 * workload.KB  # a typical catalogue record
LARGE_SIZE = 1 * workload.MB  # the small end of the 1-5 MB class, over any inline limit
STEADY_STATE_PRIOR_VERSIONS = 6  # enough for VHS's default retention to be full
STEADY_STATE_UPDATES = 4  # billed updates, averaged, so trims show at their real rate
STEADY_ROW_PREFIX = "small put (update, versions"


@dataclass(frozen=True)
class Samples:
    """Two versions of a small and of a large record (same shape, other content)."""

    small: tuple[dict[str, Any], dict[str, Any]]
    large: tuple[dict[str, Any], dict[str, Any]]

    @classmethod
    def build(cls, seed: int = 2018) -> Samples:
        def pair(size: int, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
            first = workload.sample(f"{name}-sample", size, f"{seed}/{name}")
            rng = random.Random(f"{seed}/{name}/v2")
            return first, workload.revise(first, rng, workload.timestamp(2))

        return cls(small=pair(SMALL_SIZE, "small"), large=pair(LARGE_SIZE, "large"))

    def versions(self, size: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.small if size == "small" else self.large


T1, T2, T3 = workload.timestamp(1), workload.timestamp(2), workload.timestamp(3)

Prepare = Callable[[System, str, Samples], Action]


@dataclass(frozen=True)
class Operation:
    name: str
    prepare: Prepare
    repeats: int = 1  # actions billed together, reported per action
    timed: bool = True  # in the wall-time table too
    # The request floor, where one is set: operation name -> count.
    floor: dict[str, int] | None = None
    floor_note: str = ""  # why the floor differs from the raw floor's requests, if it does


def _put_new(size: str) -> Prepare:
    def prepare(system: System, id: str, samples: Samples) -> Action:
        first, _ = samples.versions(size)
        return lambda: system.put(id, first, T1, exists=False)

    return prepare


def _put_after(size: str, setup: str, action: str) -> Prepare:
    """Write version `setup` ("v1"/"v2") first, then `action` is the put to measure:
    "update" (v2 at T2), "duplicate" (v1 at T1 again) or "stale" (v1 at T1 after v2 at T2)."""

    def prepare(system: System, id: str, samples: Samples) -> Action:
        first, second = samples.versions(size)
        if setup == "v1":
            system.put(id, first, T1, exists=False)
        else:
            system.put(id, second, T2, exists=False)
        if action == "update":
            return lambda: system.put(id, second, T2, exists=True)
        return lambda: system.put(id, first, T1, exists=True)

    return prepare


def _read(size: str) -> Prepare:
    def prepare(system: System, id: str, samples: Samples) -> Action:
        system.put(id, samples.versions(size)[0], T1, exists=False)
        return lambda: system.get(id)

    return prepare


def _delete(system: System, id: str, samples: Samples) -> Action:
    system.put(id, samples.small[0], T1, exists=False)
    return lambda: system.delete(id, T3)


def _steady_state_update(system: System, id: str, samples: Samples) -> Action:
    """An update once the id has history: VHS keeps earlier versions in the item (as deltas,
    or whole with delta history off), so its write units grow with them; trims show at their
    rate."""
    rng = random.Random(f"steady/{id}")
    record = samples.small[0]
    system.put(id, record, workload.timestamp(1), exists=False)
    versions = iter(range(2, 1000))
    for _ in range(STEADY_STATE_PRIOR_VERSIONS - 1):
        day = next(versions)
        record = workload.revise(record, rng, workload.timestamp(day))
        system.put(id, record, workload.timestamp(day), exists=True)

    def action() -> str:
        nonlocal record
        day = next(versions)
        record = workload.revise(record, rng, workload.timestamp(day))
        return system.put(id, record, workload.timestamp(day), exists=True)

    return action


DYNAMODB_WRITE = {"UpdateItem": 1}
# A small put with delta history reads the item first (half a read unit, so that the version it
# supersedes is kept as a delta): the floor is the one write plus that read.
SMALL_PUT = {"GetItem": 1, "UpdateItem": 1}
SMALL_PUT_NOTE = "the write, plus the read delta history needs"

OPERATIONS: tuple[Operation, ...] = (
    Operation("small put (new id)", _put_new("small"), floor=SMALL_PUT, floor_note=SMALL_PUT_NOTE),
    Operation(
        "small put (update)",
        _put_after("small", "v1", "update"),
        floor=SMALL_PUT,
        floor_note=SMALL_PUT_NOTE,
    ),
    Operation(
        "large put (new id)",
        _put_new("large"),
        floor={"PutObject": 1, **DYNAMODB_WRITE},
    ),
    Operation(
        "large put (update)",
        _put_after("large", "v1", "update"),
        floor={"PutObject": 1, **DYNAMODB_WRITE},
    ),
    Operation("duplicate put (small)", _put_after("small", "v1", "duplicate")),
    Operation("duplicate put (large)", _put_after("large", "v1", "duplicate")),
    Operation("stale put (small)", _put_after("small", "v2", "stale")),
    Operation("stale put (large)", _put_after("large", "v2", "stale")),
    Operation("latest read (small)", _read("small"), floor={"GetItem": 1}),
    Operation("latest read (large)", _read("large"), floor={"GetItem": 1, "GetObject": 1}),
    Operation("delete (small)", _delete),
    Operation(
        f"{STEADY_ROW_PREFIX} {STEADY_STATE_PRIOR_VERSIONS + 1}-"
        f"{STEADY_STATE_PRIOR_VERSIONS + STEADY_STATE_UPDATES}, mean)",
        _steady_state_update,
        repeats=STEADY_STATE_UPDATES,
        timed=False,
        floor=SMALL_PUT,
        floor_note=SMALL_PUT_NOTE,
    ),
)


def meets_floor(requests: dict[str, float], floor: dict[str, int]) -> bool:
    """Exactly the floor's S3 requests and as many DynamoDB requests (a write by PutItem or
    UpdateItem; the floor's GetItems exactly). `requests` are means per operation."""
    dynamodb = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}
    s3_used = {op: n for op, n in requests.items() if op not in dynamodb}
    s3_floor = {op: float(n) for op, n in floor.items() if op not in dynamodb}
    dynamodb_used = sum(n for op, n in requests.items() if op in dynamodb)
    dynamodb_floor = sum(n for op, n in floor.items() if op in dynamodb)
    reads_ok = requests.get("GetItem", 0) == floor.get("GetItem", 0)
    return s3_used == s3_floor and dynamodb_used == dynamodb_floor and reads_ok
