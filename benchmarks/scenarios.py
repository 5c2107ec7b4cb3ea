"""The operations the store benchmark prices and times: `Operation.prepare(system, id,
samples)` brings `id` into the state the operation needs, untimed, and returns the action."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import workload

if TYPE_CHECKING:
    from .systems import System

Action = Callable[[], Any]
Prepare = Callable[["System", str, "Samples"], Action]
STEADY_STATE_PRIOR_VERSIONS = 6  # enough for VHS's default retention to be full
STEADY_STATE_UPDATES = 4  # billed updates, averaged, so trims show at their real rate
STEADY_ROW_PREFIX = "small put (update, versions"
T1, T2, T3 = workload.timestamp(1), workload.timestamp(2), workload.timestamp(3)


@dataclass(frozen=True)
class Samples:
    """Two versions of a small (2 KB, a typical catalogue record) and of a large record (1 MB:
    the small end of the 1-5 MB class, over any inline limit)."""

    small: tuple[dict[str, Any], dict[str, Any]]
    large: tuple[dict[str, Any], dict[str, Any]]

    @classmethod
    def build(cls, seed: int = 2018) -> Samples:
        def pair(size: int, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
            first = workload.sample(f"{name}-sample", size, f"{seed}/{name}")
            return first, workload.revise(first, random.Random(f"{seed}/{name}/v2"), T2)

        return cls(small=pair(2 * workload.KB, "small"), large=pair(workload.MB, "large"))


@dataclass(frozen=True)
class Operation:
    name: str
    prepare: Prepare
    repeats: int = 1  # actions billed together, reported per action
    timed: bool = True  # in the wall-time table too
    floor: dict[str, int] | None = None  # the request floor, where one is set
    floor_note: str = ""  # why the floor differs from the raw floor's requests, if it does


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
    """An update once the id has history: VHS keeps earlier versions in the item (as deltas,
    or whole with delta history off), so its write units grow with them."""
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
STEADY_NAME = (f"{STEADY_ROW_PREFIX} {STEADY_STATE_PRIOR_VERSIONS + 1}-"
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


def meets_floor(requests: dict[str, float], floor: dict[str, int]) -> bool:
    """Exactly the floor's S3 requests and as many DynamoDB requests (a write by PutItem or
    UpdateItem; the floor's GetItems exactly). `requests` are means per operation."""
    dynamodb = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}
    s3_used = {op: n for op, n in requests.items() if op not in dynamodb}
    s3_floor = {op: float(n) for op, n in floor.items() if op not in dynamodb}
    same = sum(n for op, n in requests.items() if op in dynamodb) == sum(
        n for op, n in floor.items() if op in dynamodb
    )
    return s3_used == s3_floor and same and requests.get("GetItem", 0) == floor.get("GetItem", 0)
