"""The garbage collector's protocol seen from the writer's side, on a clock the test moves: a
store whose clock and sleep are a FakeTime's, and a condemnation written as the collector
writes it (docs/gc.md)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from vhs.index.codec import CONDEMNED_BODIES, CONDEMNED_UNTIL, condemned_name

SKEW = 60.0


class FakeTime:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.slept: list[float] = []
        self.during_sleep = lambda: None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.during_sleep()
        self.now += seconds


class SkippingClock:
    """Real time, less the waiting: `sleep` moves this clock on at once instead of blocking.
    For threads that share one clock (writers and a collector racing): a writer that waits out
    a condemnation is, to everyone, a writer whose wait has passed, as if every thread had been
    paused for that long (which the protocol must survive anyway); the race between the
    waits runs in real time."""

    def __init__(self) -> None:
        self._skipped = 0.0
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def clock(self) -> float:
        with self._lock:
            return time.time() + self._skipped

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self._skipped += max(0.0, seconds)

    def later(self, hours: float):
        """A clock this far ahead of this one (a collector's next scheduled run)."""
        return lambda: self.clock() + hours * 3600


def condemn(backend, rid: str, sha: str, deadline: float) -> None:
    """What the collector writes when it condemns a body (vhs.maintenance.gc does the same)."""
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": rid}},
        UpdateExpression="SET #d = :d ADD #s :s",
        ExpressionAttributeNames={"#d": CONDEMNED_UNTIL, "#s": CONDEMNED_BODIES},
        ExpressionAttributeValues={":d": {"N": str(deadline)}, ":s": {"SS": [condemned_name(sha)]}},
    )


def make_store(backend, fake: FakeTime):
    store = backend.store(clock=fake.clock, clock_skew=timedelta(seconds=SKEW))
    store.writer.sleep = fake.sleep
    return store
