"""The garbage collector's protocol seen from the writer's side, on a clock the test moves: a
store whose clock and sleep are a FakeTime's, and a condemnation written as the collector
writes it (docs/gc.md)."""

from __future__ import annotations

from datetime import timedelta

from vhs.item import CONDEMNED_BODIES, CONDEMNED_UNTIL, condemned_name

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
