"""Are a backend's conditional writes atomic? Race concurrent conditional writes at it and
count the outcomes that only a non-atomic backend can produce.

Each trial runs three races on fresh ids, each with `writers` threads that a barrier releases
together, every thread with a client (so a connection) of its own:

* **create**: PutItem with `attribute_not_exists(id)`. Exactly one may succeed; every
  further success is an *extra create*.
* **identical**: the store's put of one record at one updated_at. Exactly one may be
  "stored"; every further "stored" is an *extra stored*.
* **conflicting**: the store's put of a different record per writer, at shuffled distinct
  times. Every "stored" outcome must name a version of its own (else *duplicated versions*),
  the versions must run 1..V with none that no writer reported (else *skipped versions*),
  the history must be in ordering-key order, and the id must end at the highest key (else
  *wrong final state*).

benchmarks/atomicity.py prints the figures for moto's own server, the local stack's server
(vhs_ops.local.motoserver) and dynalite; tests/system/test_concurrency.py asserts that the last two
show none.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from vhs import Retention, VersionedHybridStore
from vhs.shapes import TABLE
from vhs_testing.backends import Backend

T = TypeVar("T")
T0 = datetime(2026, 2, 1, tzinfo=UTC)
_BARRIER_TIMEOUT = 60.0


@dataclass
class Tally:
    trials: int = 0
    writes: int = 0  # conditional writes raced
    extra_creates: int = 0
    extra_stored: int = 0
    duplicated_versions: int = 0
    skipped_versions: int = 0
    disordered_histories: int = 0
    wrong_final_states: int = 0
    anomalous_trials: int = 0
    most_stored: int = 0  # the most "stored" outcomes of one identical race (1 when atomic)
    errors: list[str] = field(default_factory=list)  # exceptions the writers raised

    @property
    def anomalies(self) -> int:
        return (
            self.extra_creates
            + self.extra_stored
            + self.duplicated_versions
            + self.skipped_versions
            + self.disordered_histories
            + self.wrong_final_states
        )


def race(backend: Backend, *, trials: int, writers: int, seed: int = 0) -> Tally:
    """Run `trials` trials of the three races on `backend` and count the anomalies."""
    rng = random.Random(seed)
    dynamodb = [backend.new_client("dynamodb") for _ in range(writers)]
    stores = [
        backend.store(dynamodb_client=client, retention=Retention(versions=writers))
        for client in dynamodb
    ]
    tally = Tally()
    for trial in range(trials):
        before = tally.anomalies
        _race_create(backend, dynamodb, backend.id(f"create-{seed}-{trial}"), tally)
        _race_identical(stores, backend.id(f"identical-{seed}-{trial}"), tally)
        _race_conflicting(stores, backend.id(f"conflicting-{seed}-{trial}"), rng, tally)
        tally.trials += 1
        tally.anomalous_trials += tally.anomalies > before
    return tally


def _race_create(backend: Backend, clients: list[Any], rid: str, tally: Tally) -> None:
    def create(writer: int) -> bool:
        try:
            clients[writer].put_item(
                TableName=backend.table_name,
                Item={TABLE.partition_key: {"S": rid}, "writer": {"N": str(writer)}},
                ConditionExpression="attribute_not_exists(#id)",
                ExpressionAttributeNames={"#id": TABLE.partition_key},
            )
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise

    created = _succeeded(_together(len(clients), create), tally)
    tally.extra_creates += max(0, sum(created) - 1)


def _race_identical(stores: list[VersionedHybridStore], rid: str, tally: Tally) -> None:
    def put(writer: int) -> Any:
        return stores[writer].put(rid, {"same": True}, updated_at=T0)

    results = _succeeded(_together(len(stores), put), tally)
    stored = [r.outcome for r in results].count("stored")
    tally.most_stored = max(tally.most_stored, stored)
    tally.extra_stored += max(0, stored - 1)


def _race_conflicting(
    stores: list[VersionedHybridStore], rid: str, rng: random.Random, tally: Tally
) -> None:
    offsets = list(range(len(stores)))
    rng.shuffle(offsets)  # which writer holds the highest key, and so arrival, is random

    def put(writer: int) -> Any:
        at = T0 + timedelta(seconds=offsets[writer])
        return stores[writer].put(rid, {"writer": writer}, updated_at=at)

    results = _succeeded(_together(len(stores), put), tally)
    reported = [r.version for r in results if r.outcome == "stored"]
    history = stores[0].history(rid)
    tally.duplicated_versions += len(reported) - len(set(reported))
    tally.skipped_versions += len(set(range(1, history[-1].version + 1)) - set(reported))
    keys = [(info.updated_at, info.content_hash) for info in history]
    tally.disordered_histories += keys != sorted(set(keys))
    highest = offsets.index(len(stores) - 1)
    tally.wrong_final_states += stores[0].get(rid).json() != {"writer": highest}


def _together(n: int, action: Callable[[int], T]) -> list[T | BaseException]:
    """Run action(0..n-1) on n threads released at once; an exception is returned, not raised."""
    barrier = threading.Barrier(n)
    results: list[T | BaseException] = [RuntimeError("did not run")] * n

    def run(writer: int) -> None:
        try:
            barrier.wait(timeout=_BARRIER_TIMEOUT)
            results[writer] = action(writer)
        except Exception as error:
            results[writer] = error

    threads = [threading.Thread(target=run, args=(writer,)) for writer in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _succeeded(results: list[T | BaseException], tally: Tally) -> list[T]:
    tally.writes += len(results)
    tally.errors += [repr(r) for r in results if isinstance(r, BaseException)]
    return [r for r in results if not isinstance(r, BaseException)]
