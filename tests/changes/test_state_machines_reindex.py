"""The Reindex state machine, executed: its synthesized definition on moto's Step Functions
interpreter, the worker Lambda's real handler in process (vhs_testing.stepfunctions).
Asserts what a run replays to the change feed, the executions' status, error and cause, and
the invocations and Retry waits it took."""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import moto
import pytest
from botocore.exceptions import ClientError

from vhs import VersionedHybridStore, shapes
from vhs.changes.feed import Change
from vhs_ops import provisioning
from vhs_testing.backends import atomic_inprocess_dynamodb
from vhs_testing.notifications import receive_notifications
from vhs_testing.stepfunctions import (
    ADAPTATIONS,
    PATCHED_MOTO_VERSION,
    REGION,
    STAGE,
    StateMachines,
    client,
    function_session,
    installed,
    machine_of,
    templates,
)

REINDEX = shapes.REINDEX
AT = "2024-05-01T00:00:00Z"
TOPIC_PARAMETER = f"/vhs/{STAGE}/change-topic-arn"


@dataclass
class Reindex:
    machines: StateMachines
    store: VersionedHybridStore
    received: Callable[[], list[Change]]  # what a copy subscribed to the feed has received


class FastClock:
    """A clock that moves `step` seconds each time it is read: the worker's context counts
    down from its 900 s timeout in a few reads, so it stops early and the Choice loops.

    Each thread reads a clock of its own. The Map runs its segments in threads of their own,
    and on AWS each invocation's context counts down alone: with one shared clock, a
    segment's reads would spend another's time, and under load an invocation could find its
    time gone before its first page (a timeout, and a retry without a cursor)."""

    def __init__(self, step: float) -> None:
        self.step = step
        self._thread = threading.local()

    def __call__(self) -> float:
        self._thread.now = getattr(self._thread, "now", 0.0) + self.step
        return self._thread.now


def reindex_run(clock: Any = None) -> Iterator[Reindex]:
    with (
        moto.mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
        atomic_inprocess_dynamodb(),
    ):
        sns, sqs = client("sns"), client("sqs")
        topic = provisioning.create_change_topic(sns, "vhs-changes.fifo")
        queue_url = provisioning.subscribe_fifo_queue(sns, sqs, topic, "vhs-copy.fifo")
        machine = machine_of(templates()["reindex"], {TOPIC_PARAMETER: topic})
        (function,) = machine.functions.values()
        env = function.environment
        provisioning.create_store_resources(
            client("dynamodb"),
            client("s3"),
            table_name=env["VHS_TABLE_NAME"],
            bucket_name=env["VHS_BUCKET_NAME"],
            region=REGION,
        )
        from handlers import reindex as worker

        worker.worker.cache_clear()
        options = {"clock": clock} if clock is not None else {}
        with installed(machine, {function.handler: worker.handler}, **options) as machines:
            store = VersionedHybridStore.from_env()
            yield Reindex(
                machines, store, functools.partial(receive_notifications, sqs, queue_url, 5)
            )
        worker.worker.cache_clear()


@pytest.fixture
def reindex() -> Iterator[Reindex]:
    yield from reindex_run()


@pytest.fixture
def reindex_in_short_invocations() -> Iterator[Reindex]:
    # 300 s a read: the worker's check before its second page finds 900 - 2 x 300 = 300 s
    # left, above its 60 s cut-off; before its third, none: two pages an invocation.
    yield from reindex_run(FastClock(300.0))


def worker_calls(machines: StateMachines) -> list[Any]:
    return [call for call in machines.invocations if "plan" not in call.event]


def test_the_adaptations_of_moto_are_the_listed_ones() -> None:
    import moto as installed_moto

    assert installed_moto.__version__ == PATCHED_MOTO_VERSION
    assert [name for name, _ in ADAPTATIONS] == [
        "lambda-in-process",
        "execution-inline",
        "retry-waits-recorded",
        "retry-count-per-state-entry",
        "itemreader-jsonl",
        "itembatcher",
        "tolerated-failure",
        "parse-once",
        "resultwriter-files",
    ]
    assert all(len(why) > 40 for _, why in ADAPTATIONS)


def test_several_segments_loop_with_their_cursors_until_every_record_is_replayed(
    reindex_in_short_invocations: Reindex,
) -> None:
    run = reindex_in_short_invocations
    for n in range(30):
        run.store.put(f"r{n:02d}", {"n": n}, updated_at=AT)
    run.store.delete("r07", deleted_at="2024-05-02T00:00:00Z")

    execution = run.machines.run({"total_segments": 3, "page_size": 4})

    assert execution.status == "SUCCEEDED", execution.cause
    received = run.received()
    assert sorted(c.id for c in received) == [f"r{n:02d}" for n in range(30)]
    assert {c.replay_run for c in received} == {execution.name}
    assert [c.change for c in received if c.id == "r07"] == ["deleted"]
    calls = worker_calls(run.machines)
    # Each segment's invocations pick up from the cursor the one before returned.
    for segment in range(3):
        mine = [c for c in calls if c.event["segment"] == segment]
        assert mine[0].event.get("cursor") is None
        for before, after in itertools.pairwise(mine):
            assert after.event["cursor"] == before.result["cursor"] is not None
        assert mine[-1].result["done"] is True
        assert (
            sum(c.result["last"]["scanned"] for c in mine) == mine[-1].result["totals"]["scanned"]
        )
    assert len(calls) > 3  # the Choice looped
    assert sum(c.result["last"]["replayed"] for c in calls) == 30
    assert run.machines.waits == []
    # The run's settings, as the plan made them: the execution's name is the run id.
    assert calls[0].event["run"] == {
        "run_id": execution.name,
        "total_segments": 3,
        "rate": REINDEX.default_rate,
        "page_size": 4,
    }


def test_an_id_list_replays_those_ids_each_segment_given_only_its_share(
    reindex: Reindex,
) -> None:
    for n in range(12):
        reindex.store.put(f"r{n:02d}", {"n": n}, updated_at=AT)
    ids = ["r01", "r03", "r05", "r08", "r11", "missing"]

    execution = reindex.machines.run({"ids": ids, "total_segments": 2, "page_size": 2})

    assert execution.status == "SUCCEEDED", execution.cause
    assert sorted(c.id for c in reindex.received()) == ["r01", "r03", "r05", "r08", "r11"]
    calls = worker_calls(reindex.machines)
    shares = {c.event["segment"]: c.event["share"] for c in calls}
    assert shares == {0: ids[0::2], 1: ids[1::2]}
    # No child is handed (or echoes) the whole list.
    assert all("ids" not in c.event["run"] for c in calls)
    assert sum(c.result["last"]["missing"] for c in calls) == 1


def test_a_childs_output_is_its_totals_not_the_run() -> None:
    definition = machine_of(
        templates()["reindex"], {TOPIC_PARAMETER: "arn:aws:sns:topic"}
    ).definition
    processor = definition["States"]["ReplaySegments"]["ItemProcessor"]["States"]
    assert processor["SegmentReplayed"]["Parameters"] == {
        "segment.$": "$.segment",
        "totals.$": "$.totals",
    }
    assert processor["SegmentReplayed"].get("End") is True


@pytest.mark.parametrize(
    ("run_input", "field"),
    [
        ({"rate": -1}, "rate"),
        ({"rate": REINDEX.max_rate * 2}, "rate"),
        ({"total_segments": 0}, "total_segments"),
        ({"total_segments": 10_000}, "total_segments"),
        ({"total_segments": "8"}, "total_segments"),
        ({"rate": "50"}, "rate"),
        ({"page_size": 0}, "page_size"),
        ({"ids": "r01"}, "ids"),
        ({"ids": ["ok", ""]}, "ids"),
        # Above max_ids_bytes (200 KiB), below the 256 KiB an execution's input may be.
        ({"ids": [f"id-{n:07d}" for n in range(16_000)]}, "ids"),
        ({"since": "yesterday"}, "since"),
        ({"run_id": "mine"}, "run_id"),
        ({"segments": 4}, "segments"),
    ],
)
def test_bad_input_fails_the_execution_before_any_work_naming_the_field_once(
    reindex: Reindex, run_input: dict[str, Any], field: str
) -> None:
    reindex.store.put("r01", {"n": 1}, updated_at=AT)

    execution = reindex.machines.run(run_input)

    assert execution.status == "FAILED"
    assert execution.error is not None and execution.error.startswith("Invalid")
    cause = json.loads(execution.cause or "{}")
    assert cause["errorMessage"].startswith(f"{field}: ")
    # One invocation (the plan), no retry, no replay.
    assert len(reindex.machines.invocations) == 1
    assert worker_calls(reindex.machines) == []
    assert reindex.machines.waits == []
    assert reindex.received() == []


def test_a_permanent_error_in_a_segment_fails_it_at_once(
    reindex: Reindex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A misconfigured worker (its topic unset: ConfigurationError) is not retried: each
    segment is invoked once, with no wait, and the execution fails."""
    from handlers import reindex as worker

    reindex.store.put("r01", {"n": 1}, updated_at=AT)
    monkeypatch.delenv("VHS_CHANGE_TOPIC_ARN")
    worker.worker.cache_clear()

    execution = reindex.machines.run({"total_segments": 2})

    assert (execution.status, execution.error) == (
        "FAILED",
        "States.ExceedToleratedFailureThreshold",
    )
    calls = worker_calls(reindex.machines)
    assert sorted(c.event["segment"] for c in calls) == [0, 1]  # once each
    assert {c.error_type for c in calls} == {"ConfigurationError"}
    assert reindex.machines.waits == []
    assert reindex.received() == []


def test_a_worker_error_that_may_pass_is_retried_after_a_wait(reindex: Reindex) -> None:
    """A Scan that fails (a DynamoDB error past botocore's retries) fails the invocation;
    States.TaskFailed's Retrier runs it again after a wait (FULL jitter: up to 30 s,
    recorded, not slept) and the segment goes on."""
    for n in range(3):
        reindex.store.put(f"r{n}", {"n": n}, updated_at=AT)
    failures = [1]

    def fail_once(**_: Any) -> None:
        if failures:
            failures.pop()
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "Scan")

    session = function_session()
    session.register("provide-client-params.dynamodb.Scan", fail_once, unique_id="fail-once")
    try:
        execution = reindex.machines.run({"total_segments": 1})
    finally:
        session.unregister("provide-client-params.dynamodb.Scan", unique_id="fail-once")

    assert execution.status == "SUCCEEDED", execution.cause
    assert [c.error_type for c in worker_calls(reindex.machines)] == ["ClientError", None]
    (wait,) = reindex.machines.waits
    assert 0 <= wait <= 30
    assert sorted(c.id for c in reindex.received()) == ["r0", "r1", "r2"]


def test_the_harness_refuses_a_moto_release_it_was_not_written_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(moto, "__version__", "9.9.9")
    machine = machine_of(templates()["reindex"], {TOPIC_PARAMETER: "arn:aws:sns:topic"})
    with pytest.raises(RuntimeError, match=r"not 9\.9\.9"), installed(machine, {}):
        pass


def test_vhs_reindex_cloud_starts_a_run_the_state_machine_accepts(
    reindex: Reindex, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command names the execution by the run id and leaves run_id out of the input."""
    from vhs_ops.cli.app import main

    for n in range(4):
        reindex.store.put(f"r{n}", {"n": n}, updated_at=AT)
    arn = reindex.machines.arn

    assert main(["reindex", "--cloud", "--state-machine", arn, "--segments", "2", "--json"]) == 0

    # The execution ran inside StartExecution: the worker's log lines come first, one a line;
    # the command's answer is the last document (indented).
    out = capsys.readouterr().out
    started = json.loads(out[out.rindex("\n{\n") + 1 :])
    described = reindex.machines.sfn.describe_execution(executionArn=started["execution_arn"])
    assert described["status"] == "SUCCEEDED" and described["name"] == started["run_id"]
    assert "run_id" not in json.loads(described["input"])
    received = reindex.received()
    assert sorted(c.id for c in received) == ["r0", "r1", "r2", "r3"]
    assert {c.replay_run for c in received} == {started["run_id"]}
