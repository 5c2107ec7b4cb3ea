"""Fault injection at each AWS call of put and delete.

For every scenario, the calls it makes are first recorded (against in-process moto, when this
module is collected); then each (scenario, call, fault kind) is its own test, which replays
the scenario from fresh state on moto's server with that one fault injected at the HTTP layer
(vhs_testing/faults.py): the request never leaves, its response is lost, it is throttled, or the
process crashes just before or just after it.

After each fault, and again after a restarted writer redoes the same operation:

* every current pointer (and every retained version) resolves to a body with the right hash;
* no version has gone backwards, and the operation took effect entirely or not at all;
* an operation that returned did exactly what it does without faults (a lost response must
  still report `stored`: the writer recognises its own earlier attempt);
* after the redo the state is exactly the fault-free state;
* S3 objects that nothing references appear only when a crash or a failed DynamoDB write
  stopped a put after its body reached S3 (the garbage collector removes those later).

And the collector, faulted at each of its calls while a slow put crosses the end of a
delete's window (the end of this module): the history that put finds is either dropped with
its bodies or retained with them, never listed with a body gone.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from vhs import RecordNotFound, Retention
from vhs.keys import shard_of
from vhs.maintenance.gc import GarbageCollector
from vhs_ops import provisioning
from vhs_ops.local.stack import DEFAULT_REGION, LOCAL_CREDENTIALS, MotoServer
from vhs_testing.backends import Backend, open_backend
from vhs_testing.faults import FAULT_KINDS, TRANSPARENT, Crash, Fault, FaultInjector
from vhs_testing.invariants import (
    StoreState,
    check_nothing_went_back,
    check_pointers,
    check_retained,
    snapshot,
)
from vhs_testing.model import Delete, Put

MiB = 1024 * 1024
INLINE_THRESHOLD = 64
T0 = datetime(2026, 2, 1, tzinfo=UTC)
IDS = ("a", "b")  # "a" is written by the scenario; "b" is a bystander with an S3 body
S3_CALLS = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def blob(seed: int, size: int = 3000) -> bytes:
    """Incompressible bytes over the inline threshold: an S3 body."""
    return random.Random(seed).randbytes(size)


HUGE = blob(99, 5 * MiB + 1024)  # two parts of a multipart upload


@dataclass(frozen=True)
class Scenario:
    name: str
    op: Put | Delete
    setup: tuple[Put | Delete, ...] = ()
    retain: int = 5
    bystander: Put = field(default=Put("b", blob(0), at(0)))

    def store(self, backend: Backend, s3: Any = None, dynamodb: Any = None) -> Any:
        store = backend.store(
            s3_client=s3 or backend.s3,
            dynamodb_client=dynamodb or backend.dynamodb,
            inline_threshold=INLINE_THRESHOLD,
            multipart_threshold=5 * MiB,
            retention=Retention(self.retain),
        )
        store.bodies.part_size = 5 * MiB
        return store


SCENARIOS = {
    s.name: s
    for s in [
        Scenario("small_create", Put("a", {"v": 1}, at(1))),
        Scenario("small_update", Put("a", {"v": 2}, at(2)), (Put("a", {"v": 1}, at(1)),)),
        Scenario("large_create", Put("a", blob(1), at(1))),
        Scenario("large_update", Put("a", blob(2), at(2)), (Put("a", blob(1), at(1)),)),
        Scenario("duplicate_put", Put("a", blob(1), at(1)), (Put("a", blob(1), at(1)),)),
        Scenario("stale_put", Put("a", {"v": 1}, at(1)), (Put("a", {"v": 2}, at(2)),)),
        # Same content, later timestamp. Large: a refused UpdateItem, then one that moves
        # updated_at. Small: the item read first decides it, then the touch.
        Scenario("touch", Put("a", blob(1), at(2)), (Put("a", blob(1), at(1)),)),
        Scenario("small_touch", Put("a", {"v": 1}, at(2)), (Put("a", {"v": 1}, at(1)),)),
        Scenario("delete", Delete("a", at(2)), (Put("a", blob(1), at(1)),)),
        Scenario(
            "put_after_delete",
            Put("a", blob(2), at(3)),
            (Put("a", blob(1), at(1)), Delete("a", at(2))),
        ),
        Scenario("multipart_create", Put("a", HUGE, at(1))),
        # Retention of 2: the fourth version expires the first, so the put also trims: a
        # large put with a request of its own, a small one in the write itself.
        Scenario(
            "update_and_trim",
            Put("a", blob(4), at(4)),
            tuple(Put("a", blob(n), at(n)) for n in (1, 2, 3)),
            retain=2,
        ),
        Scenario(
            "small_update_and_trim",
            Put("a", {"v": 4}, at(4)),
            tuple(Put("a", {"v": n}, at(n)) for n in (1, 2, 3)),
            retain=2,
        ),
    ]
}


def apply(store: Any, write: Put | Delete) -> Any:
    if isinstance(write, Put):
        return store.put(write.id, write.record, updated_at=write.at)
    return store.delete(write.id, deleted_at=write.at)


def summary(result: Any) -> tuple:
    return (str(result.outcome), result.version, getattr(result, "content_hash", None))


# --- The plan: the calls each scenario makes, and its fault-free outcome ----------------------


@dataclass(frozen=True)
class Plan:
    calls: tuple[str, ...]
    result: tuple
    state: StoreState


def _planning_backend(clients: dict[str, Any]) -> Backend:
    """A table and bucket of their own on in-process moto (inside mock_aws)."""
    table = bucket = f"vhs-plan-{uuid.uuid4().hex[:12]}"
    provisioning.create_store_resources(
        clients["dynamodb"],
        clients["s3"],
        table_name=table,
        bucket_name=bucket,
        region=DEFAULT_REGION,
    )
    return Backend("inprocess", clients["s3"], clients["dynamodb"], None, table, bucket)


def _plans() -> dict[str, Plan]:
    """Run every scenario once in-process, each on its own table and bucket, recording the
    calls the operation makes and the state it leaves."""
    import moto

    plans = {}
    with moto.mock_aws():
        clients = {s: boto3.client(s, region_name=DEFAULT_REGION) for s in ("s3", "dynamodb")}
        recorded = {s: boto3.client(s, region_name=DEFAULT_REGION) for s in ("s3", "dynamodb")}
        for name, scenario in SCENARIOS.items():
            backend = _planning_backend(clients)
            setup = scenario.store(backend)
            for write in (scenario.bystander, *scenario.setup):
                apply(setup, write)
            recorder = FaultInjector(recorded.values())
            result = apply(
                scenario.store(backend, recorded["s3"], recorded["dynamodb"]), scenario.op
            )
            recorder.close()
            plans[name] = Plan(
                tuple(recorder.calls), summary(result), snapshot(backend, setup, IDS)
            )
    return plans


PLANS = _plans()
CASES = [
    pytest.param(name, index, kind, id=f"{name}-{call}#{index + 1}-{kind}")
    for name, plan in PLANS.items()
    for index, call in enumerate(plan.calls)
    for kind in FAULT_KINDS
]


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """This module's own moto server: it sends thousands of requests and megabytes of bodies,
    which other modules' tests need not share."""
    with MotoServer() as server:
        yield server.endpoint


def test_the_local_server_keeps_answering_however_much_it_logs():
    """A regression test: MotoServer once sent moto's stderr to a pipe nothing read, so once the
    request log (a line per request, path included) filled the pipe's 64 KB, every request
    hung."""
    with MotoServer() as server:
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name=DEFAULT_REGION,
            config=Config(read_timeout=2, retries={"max_attempts": 0}),
            **{k.lower(): v for k, v in LOCAL_CREDENTIALS.items()},
        )
        s3.create_bucket(Bucket="logged")
        long_key = "k" * 1000  # about 1 KB of log per request
        answered = 0
        try:
            for _ in range(200):
                with pytest.raises(ClientError, match="404"):
                    s3.head_object(Bucket="logged", Key=long_key)
                answered += 1
        except ReadTimeoutError:
            pass
        assert answered == 200, f"the server stopped answering after {answered} requests"


def test_every_scenario_makes_the_calls_it_was_planned_with(server, no_backoff):
    """The fault points were enumerated in-process; moto's server sees the same calls."""
    for name, scenario in SCENARIOS.items():
        with open_backend("server", server.endpoint) as backend:
            setup = scenario.store(backend)
            for write in (scenario.bystander, *scenario.setup):
                apply(setup, write)
            s3, dynamodb = backend.new_client("s3"), backend.new_client("dynamodb")
            recorder = FaultInjector([s3, dynamodb])
            apply(scenario.store(backend, s3, dynamodb), scenario.op)
            recorder.close()
            assert tuple(recorder.calls) == PLANS[name].calls, name
            assert snapshot(backend, setup, IDS) == PLANS[name].state, name
            _empty_bucket(backend)


def test_the_scenarios_reach_both_phases_multipart_and_trimming():
    """The enumeration follows the store's calls; these check it has the calls to fault."""
    assert PLANS["large_update"].calls.index("PutObject") < PLANS["large_update"].calls.index(
        "UpdateItem"
    )
    multipart = PLANS["multipart_create"].calls
    assert multipart.count("UploadPart") == 2 and "CompleteMultipartUpload" in multipart
    assert PLANS["update_and_trim"].calls.count("UpdateItem") == 2  # the write, then the trim
    assert PLANS["touch"].calls.count("UpdateItem") == 2  # the refused write, then the touch
    # Small puts read the item first, and write the history whole (the trim folded in).
    assert PLANS["small_update"].calls == ("GetItem", "UpdateItem")
    assert PLANS["small_update_and_trim"].calls == ("GetItem", "UpdateItem")
    assert PLANS["small_touch"].calls == ("GetItem", "UpdateItem")


@pytest.mark.parametrize(("name", "index", "kind"), CASES)
def test_fault(server, no_backoff, name, index, kind):
    scenario, plan = SCENARIOS[name], PLANS[name]
    reader = scenario.store(server)
    for write in (scenario.bystander, *scenario.setup):
        apply(reader, write)
    before = snapshot(server, reader, IDS)

    s3, dynamodb = server.new_client("s3"), server.new_client("dynamodb")
    injector = FaultInjector([s3, dynamodb], Fault(kind, index))
    result = error = None
    try:
        result = apply(scenario.store(server, s3, dynamodb), scenario.op)
    except (Exception, Crash) as caught:
        error = caught
    finally:
        injector.close()

    # The fault hit the call it was aimed at.
    assert injector.calls[: index + 1] == list(plan.calls[: index + 1])
    assert injector.injected >= 1

    after = snapshot(server, reader, IDS)
    check_pointers(reader, after)
    check_retained(after, scenario.retain)
    check_nothing_went_back(before, after)
    committed = after.histories == plan.state.histories
    assert committed or after.histories == before.histories, "a partial write is visible"

    if kind in TRANSPARENT:
        assert error is None, f"{kind} at {plan.calls[index]} surfaced as {error!r}"
        assert summary(result) == plan.result
        assert injector.calls == list(plan.calls)
        assert injector.attempts[index] == 2  # the SDK really did send it again
    elif kind == "unreachable" and (name, index) == ("update_and_trim", len(plan.calls) - 1):
        # Trimming is housekeeping after the version is written: the put still succeeds,
        # and the next writer trims (expired entries are invisible to readers meanwhile).
        assert error is None and summary(result) == plan.result
    elif kind == "unreachable":
        assert isinstance(error, EndpointConnectionError)
        assert injector.attempts[index] == s3.meta.config.retries["total_max_attempts"]
    else:
        assert isinstance(error, Crash)
        assert injector.attempts[index] == 1

    # S3: only a put stopped after its body landed (and before its index write) leaves an
    # unreferenced object, and only its own.
    op_key = reader.body_key("a", scenario.op.content_hash)
    s3_calls = [i for i, call in enumerate(plan.calls) if call in S3_CALLS]
    body_landed = bool(s3_calls) and (
        index > s3_calls[-1] or (index == s3_calls[-1] and kind == "crash_after")
    )
    if error is None or committed:
        assert after.objects == plan.state.objects
    else:
        assert after.objects == before.objects | ({op_key} if body_landed else set())
    # (Beyond those the fault-free run leaves too: a trim unreferences expired bodies.)
    if after.orphans - before.orphans - plan.state.orphans:
        assert error is not None and not committed
    assert after.uploads <= {op_key}  # an abandoned upload (the lifecycle rule aborts it)

    # A restarted writer redoes the operation: it completes, and the state is the fault-free one.
    fresh = scenario.store(server, server.new_client("s3"), server.new_client("dynamodb"))
    again = apply(fresh, scenario.op)
    final = snapshot(server, reader, IDS)
    check_pointers(reader, final)
    check_retained(final, scenario.retain)
    check_nothing_went_back(after, final)
    assert final.histories == plan.state.histories
    assert final.held == plan.state.held
    assert final.objects == plan.state.objects
    expected = plan.result
    if error is None or committed:  # the redo is a duplicate of an operation that took effect
        expected = ("stale" if plan.result[0] == "stale" else "unchanged", *plan.result[1:])
    assert summary(again) == expected
    _empty_bucket(server)


def _empty_bucket(backend: Backend) -> None:
    """moto's server outlives the test: give back the memory of large bodies."""
    listed = backend.s3.list_objects_v2(Bucket=backend.bucket_name)
    for obj in listed.get("Contents", []):
        backend.s3.delete_object(Bucket=backend.bucket_name, Key=obj["Key"])
    uploads = backend.s3.list_multipart_uploads(Bucket=backend.bucket_name)
    for upload in uploads.get("Uploads", []):
        backend.s3.abort_multipart_upload(
            Bucket=backend.bucket_name, Key=upload["Key"], UploadId=upload["UploadId"]
        )


# --- the collector faulted while a slow put crosses the end of a delete's window -------------

WINDOW = timedelta(hours=1)  # the store's after_delete
DROP_START = 1_800_000_000.0
UPLOAD_SECONDS = 180  # the slow put's upload: it starts inside the window and ends past it


@dataclass
class DropEpisode:
    reader: Any
    id: str
    first_key: str
    calls: list[str]
    collector: Any  # its GcReport, or what it raised
    put: Any


def drop_episode(backend: Backend, fault: Fault | None = None) -> DropEpisode:
    """A record put and deleted; 30 s before the delete's window ends, a put of it starts, and
    while its upload runs past the window's end, a collector (its calls under `fault`) runs
    over the id's shard; then the put commits. A Crash of the collector ends the collector
    only (it is another process): the put goes on."""
    now = [DROP_START]
    options: dict[str, Any] = dict(
        inline_threshold=INLINE_THRESHOLD,
        retention=Retention(versions=5, after_delete=WINDOW),
        clock=lambda: now[0],
    )
    reader = backend.store(**options)
    rid = f"dropped-{uuid.uuid4().hex[:8]}"
    first = reader.put(rid, blob(11), updated_at=at(1))
    reader.delete(rid, deleted_at=at(2))
    now[0] += WINDOW.total_seconds() - 30
    s3 = backend.new_client("s3")
    writer = backend.store(s3_client=s3, **options)
    # Waiting out a condemnation of its own upload passes on the test's clock.
    writer.writer.sleep = lambda seconds: now.__setitem__(0, now[0] + seconds)
    clients = [backend.new_client("s3"), backend.new_client("dynamodb")]
    collector = GarbageCollector(
        backend.store(s3_client=clients[0], dynamodb_client=clients[1], **options),
        grace=timedelta(0),
        clock=lambda: now[0],
    )
    injector = FaultInjector(clients, fault)
    ran: list[Any] = []

    def the_upload_ends_past_the_window_and_the_collector_runs(**_: Any) -> None:
        if ran:
            return
        now[0] += UPLOAD_SECONDS
        try:
            ran.append(collector.run([shard_of(rid)]))
        except (Exception, Crash) as error:
            ran.append(error)
        finally:
            injector.close()

    s3.meta.events.register(
        "after-call.s3.PutObject", the_upload_ends_past_the_window_and_the_collector_runs
    )
    put = writer.put(rid, blob(13), updated_at=at(3))
    assert ran, "the collector ran in the middle of the put"
    # The next scheduled run, past the first one's condemnation and markers: no faults.
    now[0] += collector.lease + collector.marker_expiry + 60
    GarbageCollector(reader, grace=timedelta(0), clock=lambda: now[0]).run([shard_of(rid)])
    return DropEpisode(
        reader, rid, reader.body_key(rid, first.content_hash), injector.calls, ran[0], put
    )


def _drop_plan() -> tuple[str, ...]:
    """The collector's calls in the fault-free episode (in-process moto, at collection)."""
    import moto

    with moto.mock_aws():
        clients = {s: boto3.client(s, region_name=DEFAULT_REGION) for s in ("s3", "dynamodb")}
        return tuple(drop_episode(_planning_backend(clients)).calls)


DROP_PLAN = _drop_plan()


def test_the_collector_condemns_and_flags_the_dropped_history_in_the_drop_episode():
    """The fault points below reach the collector's whole protocol: the listing, the item
    read, the condemnation that flags the delete, and the deletes of version 1's body and of
    the put's own upload (not committed yet)."""
    assert DROP_PLAN[0] == "ListObjectsV2"
    assert {"BatchGetItem", "UpdateItem"} <= set(DROP_PLAN)
    assert DROP_PLAN.count("DeleteObject") == 2


@pytest.mark.parametrize(
    ("index", "kind"),
    [
        pytest.param(index, kind, id=f"{call}#{index + 1}-{kind}")
        for index, call in enumerate(DROP_PLAN)
        for kind in FAULT_KINDS
    ],
)
def test_a_faulted_collector_never_leaves_a_slow_put_a_pointer_to_a_collected_body(
    server, no_backoff, index, kind
):
    episode = drop_episode(server, Fault(kind, index))
    assert episode.calls[: index + 1] == list(DROP_PLAN[: index + 1])
    assert (episode.put.outcome, episode.put.version) == ("stored", 3)
    report = episode.collector
    finished = not isinstance(report, BaseException) and report.ok and not report.skipped
    if kind in TRANSPARENT:
        assert not isinstance(report, BaseException) and report.ok
    state = snapshot(server, episode.reader, [episode.id])
    check_pointers(episode.reader, state)  # every listed version reads back, bodies intact
    versions = [line[0] for line in state.histories[episode.id] or ()]
    # The history is dropped (the collector flagged the delete before the put committed) or
    # retained (it did not, and the put's clock says the window was open): both are the
    # README's rules. What may never happen is version 1 listed with its body collected.
    assert versions in ([2, 3], [1, 2, 3])
    if versions == [2, 3]:
        with pytest.raises(RecordNotFound):
            episode.reader.get(episode.id, version=1)
        assert episode.first_key not in state.objects, "the next run collects version 1"
    else:
        assert episode.first_key in state.objects
    if finished:  # a collector that did all it set out to do dropped it
        assert versions == [2, 3]
    _empty_bucket(server)
