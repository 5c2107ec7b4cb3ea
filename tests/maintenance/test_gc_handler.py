"""The scheduled garbage-collection Lambda: collects, hands unfinished shards on to a fresh
invocation of itself, and fans out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from test_gc import crash_between_phases, objects

from vhs import Retention
from vhs.errors import InvalidInput
from vhs.keys import all_shards, shard_of
from vhs_ops.local.invoke import LambdaContext, invoke, load_handler
from vhs_ops.local.process_environment import environment
from vhs_testing.events import EVENTS
from vhs_testing.records import large


@dataclass
class ShortOfTime(LambdaContext):
    """A context whose remaining time runs out after `shards_of_time` shards."""

    shards_of_time: int = 10**9

    def get_remaining_time_in_millis(self) -> int:
        self.shards_of_time -= 1
        return 10**9 if self.shards_of_time >= 0 else 0


@pytest.fixture
def invocations(monkeypatch) -> list[dict[str, Any]]:
    """Async self-invocations, captured instead of sent."""
    import vhs.aws

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(vhs.aws, "_session", None)
    session = vhs.aws.aws_client("s3") and vhs.aws._session

    def capture(params, **_):
        sent.append(json.loads(params["body"]))
        return AWSResponse("http://lambda.local", 202, {}, None), {"StatusCode": 202}

    session.register("before-call.lambda.Invoke", capture)
    return sent


@pytest.fixture
def gc_env(inprocess, monkeypatch):
    env = {
        "VHS_TABLE_NAME": inprocess.table_name,
        "VHS_BUCKET_NAME": inprocess.bucket_name,
        "VHS_GC_GRACE": "0s",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    with environment(env):
        yield inprocess


def test_the_handler_collects_every_shard(gc_env, invocations):
    store = gc_env.store(inline_threshold=256, retention=Retention(versions=0))
    orphan = crash_between_phases(store, "crashed", large(1))
    store.put("kept", large(2), updated_at="2026-01-01T00:00:00Z")
    result = load_handler("gc")({}, LambdaContext(function_name="vhs-gc", timeout_seconds=900))
    assert result["shards"] == 256 and result["deleted"] == 1 and result["continued_with"] == 0
    assert orphan not in objects(gc_env) and len(objects(gc_env)) == 1
    assert invocations == []


def test_an_invocation_short_of_time_hands_on_the_rest(gc_env, invocations):
    result = load_handler("gc")({}, ShortOfTime(function_name="vhs-gc", shards_of_time=3))
    assert result["shards"] == 3 and result["continued_with"] == 253
    [handed_on] = invocations
    assert handed_on["shards"] == all_shards()[3:]


def test_fan_out_splits_the_shards_over_invocations(gc_env, invocations):
    result = load_handler("gc")({"parallel": 4, "dry_run": True}, LambdaContext())
    assert result == {"fanned_out": 4}
    groups = [invocation["shards"] for invocation in invocations]
    assert sorted(s for group in groups for s in group) == all_shards()
    assert all(invocation["dry_run"] for invocation in invocations)


def test_fan_out_never_makes_more_invocations_than_shards(gc_env, invocations):
    """Extra groups would be empty, and an invocation with no shards must never collect
    every shard again."""
    result = load_handler("gc")({"parallel": 8, "shards": ["00", "01", "02"]}, LambdaContext())
    assert result == {"fanned_out": 3}
    assert sorted(s for i in invocations for s in i["shards"]) == ["00", "01", "02"]
    nothing = load_handler("gc")({"shards": []}, LambdaContext(timeout_seconds=900))
    assert nothing["shards"] == 0 and nothing["listed"] == 0


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"parallel": 257}, "parallel"),
        ({"parallel": 0}, "parallel"),
        ({"parallel": "4"}, "parallel"),
        ({"parallel": True}, "parallel"),
        ({"shards": "00"}, "shards"),
        ({"shards": ["0g"]}, "shards"),
        ({"shards": ["00", 1]}, "shards"),
        # Read as "every shard", these would each be a whole collection.
        ({"shard": ["00"]}, "shard"),
        ({"Records": [{"eventSource": "aws:sqs"}]}, "Records"),
        ([], "event"),
        ("00", "event"),
    ],
)
def test_a_bad_event_is_refused_naming_its_field(gc_env, invocations, event, field):
    with pytest.raises(InvalidInput) as raised:
        load_handler("gc")(event, LambdaContext())
    assert raised.value.field == field
    assert invocations == []


def test_a_scheduled_event_collects_every_shard(gc_env, invocations):
    scheduled = json.loads((EVENTS / "sam-cloudwatch-scheduled-event.json").read_text())
    store = gc_env.store(inline_threshold=256)
    orphan = crash_between_phases(store, "crashed", large(3))
    result = load_handler("gc")(scheduled, LambdaContext(timeout_seconds=900))
    assert result["shards"] == 256 and result["deleted"] == 1
    assert orphan not in objects(gc_env)


def test_dry_run_deletes_nothing(gc_env, invocations):
    store = gc_env.store(inline_threshold=256)
    orphan = crash_between_phases(store, "crashed", large(3))
    event = {"dry_run": True, "shards": [shard_of("crashed")]}
    result = load_handler("gc")(event, LambdaContext(timeout_seconds=900))
    assert result["orphaned"] == 1 and result["deleted"] == 0
    assert orphan in objects(gc_env)


def test_vhs_invoke_gc_runs_its_hand_ons_in_process(gc_env, invocations):
    """`vhs invoke gc` locally: the fan-out and every continuation run in this process (there
    is no function to invoke), with the time the deployed function has."""
    store = gc_env.store(inline_threshold=256, retention=Retention(versions=0))
    orphans = [crash_between_phases(store, f"crashed-{n}", large(10 + n)) for n in range(5)]
    handed_on = []
    response = invoke("gc", {"parallel": 4}, on_handed_on=lambda e, r: handed_on.append(r))
    assert response == {"fanned_out": 4}
    assert len(handed_on) == 4 and sum(r["shards"] for r in handed_on) == 256
    assert sum(r["deleted"] for r in handed_on) == len(orphans)
    assert not set(orphans) & set(objects(gc_env))
    assert invocations == []  # nothing was sent to Lambda
