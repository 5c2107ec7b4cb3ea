"""What one ingest invocation may hold at once (vhs.ingest.budget): a message that could never
fit is dead-lettered with its reason, one that must wait past the invocation's time is retried,
and neither touches the messages beside it."""

from __future__ import annotations

import json
import threading
import time

import pytest
from test_ingest_handler import (
    ERROR_FIELD,
    ERROR_MESSAGE,
    STAGING,
    P,
    failures,
    handler_module,
    message_event,
    run,
    stack,  # noqa: F401  (the fixture)
)

from vhs.errors import BudgetTimeout, OverBudget
from vhs.ingest.budget import (
    JSON_PAYLOAD_EXPANSION,
    MIB,
    SPOOL_IN_MEMORY,
    Budget,
    Budgets,
    claim_check_cost,
    staged_body_cost,
)
from vhs_ops.local.invoke import LambdaContext, load_handler

POINTER = "software.amazon.payloadoffloading.PayloadS3Pointer"
T = "2026-01-01T00:00:00Z"


def test_a_budget_is_shared_waited_for_and_never_exceeded():
    budget = Budget("memory", 100)
    with pytest.raises(OverBudget, match="memory"), budget.hold(101):
        pass
    held, go_on, acquired = threading.Event(), threading.Event(), threading.Event()

    def other_message() -> None:
        with budget.hold(60):
            held.set()
            go_on.wait()

    other = threading.Thread(target=other_message)
    other.start()
    held.wait()
    # Not free, and no time left to wait.
    with pytest.raises(BudgetTimeout), budget.hold(60, deadline=time.monotonic()):
        pass
    assert budget.used == 60

    def waiter() -> None:
        with budget.hold(60):
            acquired.set()

    waiting = threading.Thread(target=waiter)
    waiting.start()
    assert not acquired.is_set() and budget.used == 60  # it waits...
    go_on.set()  # ...until the other message is stored
    other.join()
    waiting.join()
    assert acquired.is_set() and budget.used == 0


def test_costs_follow_what_storing_holds():
    assert claim_check_cost(1000).memory == 1000 * JSON_PAYLOAD_EXPANSION
    small = staged_body_cost(SPOOL_IN_MEMORY)
    assert (small.tmp, small.transfer) == (0, SPOOL_IN_MEMORY) and small.memory > SPOOL_IN_MEMORY
    large = staged_body_cost(5 * 2**30)
    assert large.tmp == 5 * 2**30 and large.memory < SPOOL_IN_MEMORY * 16  # parts, not the body
    budgets = Budgets(Budget("memory", 1), Budget("/tmp", 1), timeout_seconds=60)
    assert budgets.check_time(staged_body_cost(100 * MIB)) is None
    assert "longer than the function's 60 s timeout" in budgets.check_time(large)


def _stage(created, key: str, payload: dict) -> list:
    key = P + key
    created.s3.put_object(Bucket=STAGING, Key=key, Body=json.dumps(payload).encode())
    return [POINTER, {"s3BucketName": STAGING, "s3Key": key}]


def test_a_payload_over_the_whole_budget_is_dead_lettered_and_its_neighbours_stored(stack):  # noqa: F811
    worker = handler_module().ingestor()
    worker.budgets = Budgets(Budget("memory", 4 * MIB), Budget("/tmp", 4 * MIB))
    big = {"id": "too-big", "updated_at": T, "record": ["x" * 100] * 1000}  # ~100 KB x 56
    small = {"id": "fits", "updated_at": T, "record": {"n": 1}}
    event = message_event(_stage(stack, "cc/big.json", big), _stage(stack, "cc/small.json", small))
    assert failures(run(event)) == set()
    [letter] = stack.dead_letters()
    assert letter["MessageAttributes"][ERROR_FIELD]["StringValue"] == "payload"
    reason = letter["MessageAttributes"][ERROR_MESSAGE]["StringValue"]
    assert "too large for this function" in reason and "memory" in reason
    assert stack.store.get("fits").json() == {"n": 1}
    assert worker.budgets.memory.used == 0  # given back


def test_a_body_that_could_never_move_within_the_timeout_is_dead_lettered(stack):  # noqa: F811
    worker = handler_module().ingestor()
    worker.budgets.timeout_seconds = 0.0001
    stack.s3.put_object(Bucket=STAGING, Key=f"{P}b.bin", Body=b"x" * 10_000)
    message = {"id": "slow", "updated_at": T, "record_location": f"s3://{STAGING}/{P}b.bin"}
    assert failures(run(message_event(message))) == set()
    [letter] = stack.dead_letters()
    assert letter["MessageAttributes"][ERROR_FIELD]["StringValue"] == "record_location"
    assert "timeout" in letter["MessageAttributes"][ERROR_MESSAGE]["StringValue"]


def test_a_message_that_must_wait_past_the_invocations_time_is_retried(stack):  # noqa: F811
    worker = handler_module().ingestor()
    worker.budgets = Budgets(Budget("memory", 8 * MIB), Budget("/tmp", 8 * MIB))
    payload = {"id": "waits", "updated_at": T, "record": ["x" * 100] * 300}  # ~30 KB x 56
    small = {"id": "inline", "updated_at": T, "record": {"n": 2}}
    event = message_event(_stage(stack, "cc/waits.json", payload), small)
    # An invocation with no time left to wait (its timeout is the handler's margin), while
    # the rest of the batch holds the memory.
    context = LambdaContext(function_name="vhs-ingest", timeout_seconds=15)
    with worker.budgets.memory.hold(7 * MIB):
        response = load_handler("ingest")(event, context)
    assert failures(response) == {"message-0"}  # retried, not dead-lettered
    assert stack.dead_letters() == [] and stack.store.get("inline").json() == {"n": 2}
    assert failures(run({"Records": [event["Records"][0]]})) == set()  # next time, stored
    assert len(stack.store.get("waits").json()) == 300
