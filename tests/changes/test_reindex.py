"""Reindex: every current record replayed to the change feed, once per run, at a bounded rate,
resumable, and a downstream copy rebuilt from replays equal to the store.

The worker (vhs.changes.reindex) runs in-process against moto (`mock_aws`) for its logic:
selections, the rate bound on an injected clock, cursors after an injected SNS failure,
hostile ids, items that are not the store's, a hot id. The rebuild test runs on moto's
server with the live change feed (vhs_ops.local.stream_source) beside it and a live write racing
the replay deterministically; the CLI test runs `vhs reindex` against `vhs local up`.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from vhs import shapes
from vhs.changes.feed import Change
from vhs.changes.publish import ChangePublisher
from vhs.changes.reindex import Counts, Selection, Target, TokenBucket, reindex_segment
from vhs.errors import InvalidInput
from vhs.retention import Retention
from vhs_ops import provisioning
from vhs_ops.cli.reindex import Checkpoint, run_local
from vhs_ops.local.invoke import LambdaContext, load_handler
from vhs_ops.local.process_environment import environment
from vhs_ops.local.stack import client
from vhs_testing.backends import Backend
from vhs_testing.cli import assert_documented, local_env, vhs
from vhs_testing.notifications import receive_notifications
from vhs_testing.records import large
from vhs_testing.signals import terminal_ctrl_c

__all__ = ["local_env"]  # the fixture: `vhs local up` for the CLI test

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def at(seconds: float) -> str:
    return datetime.fromtimestamp(T0.timestamp() + seconds, UTC).isoformat()


class Published:
    """Every replay SNS confirmed (from PublishBatch's Successful entries), in order."""

    def __init__(self, sns: Any) -> None:
        self.changes: list[Change] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        sns.meta.events.register("provide-client-params.sns.PublishBatch", self._request)
        sns.meta.events.register("after-call.sns.PublishBatch", self._response)

    def _request(self, params: dict[str, Any], **_: Any) -> None:
        self._local.entries = params["PublishBatchRequestEntries"]

    def _response(self, parsed: dict[str, Any], **_: Any) -> None:
        ok = {entry["Id"] for entry in parsed.get("Successful") or []}
        with self._lock:
            self.changes += [
                Change.from_message(e["Message"]) for e in self._local.entries if e["Id"] in ok
            ]

    def ids(self) -> Counter[str]:
        return Counter(change.id for change in self.changes)


@dataclass
class Feed:
    backend: Backend
    target: Target
    sns: Any
    sqs: Any
    topic_arn: str
    queue_url: str
    published: Published

    def received(self) -> list[Change]:
        return receive_notifications(self.sqs, self.queue_url, timeout=20)


def make_feed(backend: Backend, sns: Any, sqs: Any, suffix: str) -> Feed:
    topic_arn = provisioning.create_change_topic(sns, f"vhs-reindex-{suffix}.fifo")
    queue_url = provisioning.subscribe_fifo_queue(sns, sqs, topic_arn, f"vhs-copy-{suffix}.fifo")
    target = Target(
        backend.dynamodb, backend.table_name, ChangePublisher(sns, topic_arn), backend.bucket_name
    )
    return Feed(backend, target, sns, sqs, topic_arn, queue_url, Published(sns))


@pytest.fixture
def feed(inprocess: Backend) -> Feed:
    region = inprocess.region
    return make_feed(
        inprocess, boto3.client("sns", region), boto3.client("sqs", region), "inprocess"
    )


def current(store: Any, id: str) -> tuple[int, str, str | None]:
    """(version, change, content hash) of an id's current version, as the store has it."""
    (newest,) = store.history(id)[-1:]
    return newest.version, "deleted" if newest.deleted else "stored", newest.content_hash


def run(feed: Feed, *, segments: int = 1, **options: Any) -> list[Any]:
    """Every segment of a run to its end, in this thread."""
    return [
        reindex_segment(
            feed.target,
            run_id=options.get("run_id", "run-1"),
            segment=segment,
            total_segments=segments,
            selection=options.get("selection", Selection()),
            page_size=options.get("page_size", 7),
        )
        for segment in range(segments)
    ]


def totals(results: list[Any]) -> Counts:
    total = Counts()
    for result in results:
        total.add(result.counts)
    return total


# --- every current record, once ---------------------------------------------------------------


def test_every_current_record_is_replayed_once_deletes_as_deleted(feed: Feed) -> None:
    store = feed.backend.store(inline_threshold=64)
    for n in range(30):
        store.put(f"r{n:02d}", {"n": n}, updated_at=at(n))
    store.put("r00", {"n": "second"}, updated_at=at(100))
    store.put("big", {"x": large(1, 300).hex()}, updated_at=at(1))  # an S3 body
    store.delete("r01", deleted_at=at(200))
    store.put("gone", {"n": 1}, updated_at=at(1))
    store.delete("gone", deleted_at=at(2), purge=True)

    results = run(feed, segments=4)
    assert all(result.done and result.error is None for result in results)
    published = feed.published.changes
    assert feed.published.ids() == Counter({id: 1 for id in {c.id for c in published}})
    ids = {f"r{n:02d}" for n in range(30)} | {"big", "gone"}
    assert {c.id for c in published} == ids
    for change in published:
        assert change.replay and change.replay_run == "run-1"
        version, kind, content_hash = current(store, change.id)
        assert (change.version, change.change, change.content_hash) == (version, kind, content_hash)
    by_id = {c.id: c for c in published}
    assert by_id["r00"].version == 2
    deleted = by_id["r01"]
    assert (deleted.change, deleted.location, deleted.path) == ("deleted", None, None)
    assert by_id["gone"].purge and by_id["gone"].change == "deleted"
    assert by_id["big"].location.startswith(f"s3://{feed.backend.bucket_name}/")
    assert by_id["r02"].location == "inline"
    counts = totals(results)
    assert (counts.scanned, counts.replayed, counts.deleted) == (32, 32, 2)
    # What a subscriber receives is the same, each once (SQS FIFO drops nothing: no retries).
    received = feed.received()
    assert sorted(c.id for c in received) == sorted(ids)


def test_a_replay_is_the_live_notification_plus_replay_and_its_run() -> None:
    live = Change("a/b", 3, "2026-01-01T00:00:00.000000Z", "stored", "inline", "a" * 64, 1, "x/y")
    replayed = live.replayed("run-7")
    assert json.loads(replayed.body()) == {
        **json.loads(live.body()),
        "replay": True,
        "replay_run": "run-7",
    }
    # Not a duplicate of the live one, nor of another run's; the same for a retry of the run.
    assert replayed.deduplication_id != live.deduplication_id
    assert replayed.deduplication_id != live.replayed("run-8").deduplication_id
    assert replayed.deduplication_id == live.replayed("run-7").deduplication_id
    assert (replayed.group_id, Change.from_message(replayed.body())) == (live.group_id, replayed)


def test_a_second_run_replays_everything_again_under_its_own_run(feed: Feed) -> None:
    store = feed.backend.store()
    for n in range(5):
        store.put(f"r{n}", {"n": n}, updated_at=at(n))
    run(feed, run_id="first")
    run(feed, run_id="second")
    received = feed.received()  # the queue would drop a repeated deduplication id
    assert Counter(c.replay_run for c in received) == {"first": 5, "second": 5}


# --- selections -------------------------------------------------------------------------------


def test_an_id_list_replays_those_ids_and_counts_the_missing(feed: Feed) -> None:
    store = feed.backend.store()
    for n in range(10):
        store.put(f"r{n}", {"n": n}, updated_at=at(n))
    store.delete("r3", deleted_at=at(50))
    selection = Selection.of(["r1", "r3", "r1", "nope", "r9"])
    results = run(feed, segments=2, selection=selection)
    assert feed.published.ids() == Counter({"r1": 1, "r3": 1, "r9": 1})
    assert {c.id: c.change for c in feed.published.changes}["r3"] == "deleted"
    counts = totals(results)
    assert (counts.replayed, counts.missing, counts.scanned) == (3, 1, 3)


def test_a_time_range_selects_by_when_the_store_wrote_the_current_version(
    inprocess: Backend, feed: Feed
) -> None:
    now = [T0.timestamp()]
    store = inprocess.store(clock=lambda: now[0])
    for n in range(6):  # written at T0 + n hours, whatever their updated_at
        now[0] = T0.timestamp() + n * 3600
        store.put(f"r{n}", {"n": n}, updated_at=at(-1000 * n))
    selection = Selection.of(None, at(2 * 3600), at(4 * 3600))
    results = run(feed, selection=selection)
    assert feed.published.ids() == Counter({"r2": 1, "r3": 1})
    assert totals(results).filtered == 4


def test_selections_are_validated_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as raised:
        Selection.of(["ok", "\x00bad"])
    assert raised.value.field == "ids"
    with pytest.raises(InvalidInput) as raised:
        Selection.of(None, "yesterday")
    assert raised.value.field == "since"
    with pytest.raises(InvalidInput) as raised:
        Selection.of(None, at(10), at(5))
    assert raised.value.field == "until"
    assert Selection.from_dict(Selection.of(["a"], at(1)).as_dict()) == Selection.of(["a"], at(1))


# --- the rate bound ---------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.now += seconds


def test_the_rate_bound_holds_over_every_interval(feed: Feed) -> None:
    store = feed.backend.store()
    for n in range(60):
        store.put(f"r{n:02d}", {"n": n}, updated_at=at(n))
    clock = FakeClock()
    limiter = TokenBucket(10, clock=clock, sleep=clock.sleep)
    seen: list[tuple[float, int]] = [(clock.now, 0)]
    result = reindex_segment(
        feed.target,
        run_id="r",
        segment=0,
        total_segments=1,
        limiter=limiter,
        page_size=5,
        on_page=lambda r: seen.append((clock.now, r.counts.scanned)),
    )
    assert result.done and result.counts.replayed == 60
    # 60 records at 10/s with a burst of 10: at least 5 s, and never ahead of the bound.
    assert clock.slept >= 5.0
    for (t1, n1), (t2, n2) in itertools.pairwise(seen):
        assert n2 - n1 <= limiter.burst + limiter.rate * (t2 - t1) + 1e-9
    assert seen[-1][1] <= limiter.burst + limiter.rate * (seen[-1][0] - seen[0][0]) + 1e-9


def test_the_token_bucket_does_not_sleep_within_its_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100, burst=50, clock=clock, sleep=clock.sleep)
    assert bucket.take(50) == 0.0
    assert bucket.take(10) == pytest.approx(0.1)
    clock.now += 10  # refills to the burst, no more
    assert bucket.take(50) == 0.0
    assert bucket.take(1) == pytest.approx(0.01)
    with pytest.raises(InvalidInput):
        TokenBucket(0)


def test_a_rate_above_the_bound_is_refused_by_the_worker_and_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One bound (shapes.REINDEX.max_rate) for the worker, `vhs reindex --rate` and the
    state machine's plan (tests/changes/test_state_machines_reindex.py)."""
    from vhs_ops.cli.app import main

    bound = shapes.REINDEX.max_rate
    assert TokenBucket(bound).rate == bound
    for rate in (bound * 1.5, float("inf")):
        with pytest.raises(InvalidInput) as raised:
            TokenBucket(rate)
        assert raised.value.field == "rate"
    assert main(["reindex", "--cloud", "--state-machine", "arn:x", "--rate", str(bound * 2)]) != 0
    assert f"at most {bound:g} records/s" in capsys.readouterr().err


# --- resuming ---------------------------------------------------------------------------------


def fail_call(sns: Any, after: int) -> list[int]:
    """Make every PublishBatch call after the first `after` fail (an SNS outage)."""
    calls: list[int] = []

    def fail(**_: Any) -> None:
        calls.append(1)
        if len(calls) > after:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "x")

    sns.meta.events.register("before-call.sns.PublishBatch", fail)
    return calls


def refuse_entry(sns: Any, id: str) -> list[str]:
    """Make SNS refuse `id`'s entry, every time, as a throttled entry is refused: the request
    goes without it and the response lists it as failed. Returns the ids sent after it in
    the same calls (SNS takes them)."""
    refused: list[str] = []
    call = threading.local()

    def drop(params: dict[str, Any], **_: Any) -> dict[str, Any] | None:
        call.refused = None
        entries = params["PublishBatchRequestEntries"]
        for entry in entries:
            if json.loads(entry["Message"])["id"] == id:
                after = entries[entries.index(entry) + 1 :]
                refused.extend([json.loads(e["Message"])["id"] for e in after] or ["(none after)"])
                call.refused = entry["Id"]
                return {**params, "PublishBatchRequestEntries": [e for e in entries if e != entry]}
        return None

    def report(parsed: dict[str, Any], **_: Any) -> None:
        if call.refused is not None:
            failure = {"Id": call.refused, "Code": "Throttled", "SenderFault": False}
            parsed.setdefault("Failed", []).append(failure)

    sns.meta.events.register_first("provide-client-params.sns.PublishBatch", drop)
    sns.meta.events.register("after-call.sns.PublishBatch", report)
    return refused


@pytest.mark.parametrize("fault", ["call", "entry"])
def test_a_run_resumed_after_a_failure_republishes_nothing_confirmed_and_misses_nothing(
    inprocess: Backend, tmp_path: Path, fault: str
) -> None:
    region = inprocess.region
    failing_sns = boto3.client("sns", region)
    feed = make_feed(inprocess, failing_sns, boto3.client("sqs", region), "resume")
    store = inprocess.store()
    ids = [f"r{n:02d}" for n in range(40)]
    for n, id in enumerate(ids):
        store.put(id, {"n": n}, updated_at=at(n))
    if fault == "call":
        injected: list[Any] = fail_call(failing_sns, after=3)
    else:
        injected = refuse_entry(failing_sns, "r22")
    checkpoint = Checkpoint.new(
        tmp_path / "run.json",
        selection=Selection(),
        total_segments=2,
        rate=shapes.REINDEX.max_rate,
        page_size=4,
    )
    run_local(feed.target, checkpoint)
    assert injected and not checkpoint.done
    errors = [s.error for s in checkpoint.segments if s.error]
    assert errors and ("injected" in errors[0] or "Throttled" in errors[0])
    first = feed.published.ids()
    assert 0 < sum(first.values()) < len(ids)

    # Resumed from the file alone, with SNS well again, by a fresh client.
    resumed = Checkpoint.load(tmp_path / "run.json")
    assert resumed.run_id == checkpoint.run_id
    healthy = make_feed(inprocess, boto3.client("sns", region), feed.sqs, "resume-2")
    healthy = Feed(
        inprocess,
        Target(
            inprocess.dynamodb,
            inprocess.table_name,
            ChangePublisher(healthy.sns, feed.topic_arn),
            inprocess.bucket_name,
        ),
        healthy.sns,
        feed.sqs,
        feed.topic_arn,
        feed.queue_url,
        healthy.published,
    )
    run_local(healthy.target, resumed)
    assert resumed.done
    second = healthy.published.ids()
    again = set(first) & set(second)
    if fault == "call":
        assert not again  # nothing confirmed is published again
    else:
        # SNS took the entries after the refused one in its call: only they come again (a
        # retry within 5 minutes, dropped by SNS as duplicates: the same run's ids).
        assert again <= set(injected)
    assert set(first) | set(second) == set(ids)  # nothing is missed
    assert all(n == 1 for n in (first - Counter(again)).values())
    assert resumed.totals().replayed == len(ids)
    assert {c.replay_run for c in healthy.published.changes} == {checkpoint.run_id}


def test_a_stopped_run_saves_its_cursors_and_resumes_after_them(feed: Feed, tmp_path: Path) -> None:
    store = feed.backend.store()
    for n in range(20):
        store.put(f"r{n:02d}", {"n": n}, updated_at=at(n))
    stop = threading.Event()
    checkpoint = Checkpoint.new(
        tmp_path / "c.json",
        selection=Selection(),
        total_segments=1,
        rate=shapes.REINDEX.max_rate,
        page_size=3,
    )
    pages = []

    def after_page(state: Checkpoint) -> None:  # Ctrl-C after the second page
        pages.append(state.segments[0].cursor)
        if len(pages) == 2:
            stop.set()

    run_local(feed.target, checkpoint, stop=stop, on_page=after_page)
    saved = json.loads((tmp_path / "c.json").read_text())
    assert saved["segments"][0]["cursor"] == pages[1] and not saved["segments"][0]["done"]
    assert sum(feed.published.ids().values()) == 6
    run_local(feed.target, Checkpoint.load(tmp_path / "c.json"))
    assert feed.published.ids() == Counter({f"r{n:02d}": 1 for n in range(20)})


def test_the_worker_stops_when_told_and_always_handles_a_page(feed: Feed) -> None:
    store = feed.backend.store()
    for n in range(10):
        store.put(f"r{n}", {"n": n}, updated_at=at(n))
    cursor, calls = None, 0
    while True:
        calls += 1
        result = reindex_segment(
            feed.target,
            run_id="r",
            segment=0,
            total_segments=1,
            cursor=cursor,
            page_size=4,
            keep_going=lambda: False,  # a Lambda out of time: one page per invocation
        )
        cursor = result.cursor
        if result.done:
            break
    assert calls == 3
    assert feed.published.ids() == Counter({f"r{n}": 1 for n in range(10)})


# --- hostile ids, foreign items, one hot id ---------------------------------------------------

HOSTILE = [
    "a/b",
    "../../etc/passwd",
    "100%25 ?q=1#frag",
    "é" * 256,
    "🦀" * 256,
    " spaced ",
    "x" * 129,
    "‮rtl",
    "+&=;:@$,",
]


def test_hostile_ids_are_replayed_with_a_path_that_is_one_segment(feed: Feed) -> None:
    store = feed.backend.store(inline_threshold=64)
    for n, id in enumerate(HOSTILE):
        store.put(id, {"n": n, "pad": large(n, 100 if n % 2 else 0).hex()}, updated_at=at(n))
    run(feed, segments=3)
    received = feed.received()
    assert sorted(c.id for c in received) == sorted(HOSTILE)
    for change in received:
        prefix, encoded, versions, version = change.path.rsplit("/", 3)
        assert (prefix, versions, version) == ("/records", "versions", str(change.version))
        assert "/" not in encoded and "?" not in encoded and "#" not in encoded
        assert urllib.parse.unquote(encoded) == change.id


def test_items_that_are_not_the_stores_are_skipped_and_reported(feed: Feed) -> None:
    store = feed.backend.store()
    for n in range(5):
        store.put(f"r{n}", {"n": n}, updated_at=at(n))
    dynamodb, table = feed.backend.dynamodb, feed.backend.table_name
    foreign = {
        "other-app-1": {"name": {"S": "not ours"}},
        "other-app-2": {"c": {"S": "a string, not a list"}, "v": {"N": "1"}},
        "other-app-3": {"c": {"L": [{"M": {"t": {"S": "x"}}}]}, "v": {"N": "1"}},
        "other-app-4": {"c": {"L": [{"M": {}}]}, "v": {"S": "one"}},
    }
    for id, attributes in foreign.items():
        dynamodb.put_item(TableName=table, Item={"id": {"S": id}, **attributes})
    results = run(feed, segments=2)
    assert all(result.done for result in results)
    assert feed.published.ids() == Counter({f"r{n}": 1 for n in range(5)})
    counts = totals(results)
    assert counts.foreign == 4
    assert sorted(id for r in results for id in r.foreign_ids) == sorted(foreign)


def test_one_hot_id_is_one_replay_of_its_current_version(feed: Feed) -> None:
    store = feed.backend.store(retention=Retention(versions=3))
    for n in range(40):
        store.put("hot", {"n": n}, updated_at=at(n))
    store.put("cold", {"n": 0}, updated_at=at(0))
    run(feed)
    assert feed.published.ids() == Counter({"hot": 1, "cold": 1})
    (hot,) = [c for c in feed.published.changes if c.id == "hot"]
    assert hot.version == 40 and hot.path == "/records/hot/versions/40"


# --- rebuilding a downstream copy, on moto's server, with a live write racing ---------------


def apply(copy: dict[str, Change], change: Change) -> None:
    """A consumer's one rule: keep the highest version per id (replays need no other)."""
    held = copy.get(change.id)
    if (
        held is None
        or change.version > held.version
        or (change.version == held.version and change.purge)
    ):
        copy[change.id] = change


def test_a_copy_rebuilt_from_empty_by_replays_equals_the_store(server: Backend) -> None:
    from vhs_ops.local.runners import LocalChangeFeed

    sns, sqs = client("sns", server.endpoint), client("sqs", server.endpoint)
    suffix = server.table_name.rsplit("-", 1)[1]
    topic_arn = provisioning.create_change_topic(sns, f"vhs-rebuild-{suffix}.fifo")
    store = server.store(inline_threshold=64)
    for n in range(25):
        store.put(f"r{n:02d}", {"n": n, "pad": large(n, n * 4).hex()}, updated_at=at(n))
    store.put("r05", {"n": "again"}, updated_at=at(100))
    store.delete("r06", deleted_at=at(100))
    store.put("purged", {"n": 1}, updated_at=at(1))
    store.delete("purged", deleted_at=at(2), purge=True)
    live = LocalChangeFeed(
        server.endpoint or "", server.table_name, topic_arn, server.bucket_name, threaded=False
    )
    with live as running:
        running.drain(timeout=30)  # the history so far, published before the copy exists
        queue_url = provisioning.subscribe_fifo_queue(sns, sqs, topic_arn, f"copy-{suffix}.fifo")

        class RacingPublisher(ChangePublisher):
            """SNS, with a live write landing between the reindex's read of a page and its
            publish: the live notification of the next version goes out first."""

            raced: str | None = None

            def publish(self, changes: Any, **options: Any) -> Any:
                if self.raced is None and changes:
                    self.raced = changes[0].id
                    store.put(self.raced, {"n": "live"}, updated_at=at(10_000))
                    running.drain(timeout=30)
                return super().publish(changes, **options)

        publisher = RacingPublisher(sns, topic_arn)
        target = Target(server.dynamodb, server.table_name, publisher, server.bucket_name)
        checkpoint = Checkpoint.new(
            None,
            selection=Selection(),
            total_segments=3,
            rate=shapes.REINDEX.max_rate,
            page_size=5,
        )
        checkpoint.path = Path(server.table_name + ".json")
        try:
            run_local(target, checkpoint)
        finally:
            checkpoint.path.unlink(missing_ok=True)
        running.drain(timeout=30)
    received = receive_notifications(sqs, queue_url, timeout=20)

    raced = publisher.raced
    assert raced is not None
    of_raced = [(c.version, c.replay) for c in received if c.id == raced]
    newest = store.history(raced)[-1].version
    assert of_raced == [(newest, False), (newest - 1, True)]  # the replay came late
    copy: dict[str, Change] = {}
    for change in received:
        apply(copy, change)
    expected = {}
    for id in {f"r{n:02d}" for n in range(25)} | {"purged"}:
        version, kind, content_hash = current(store, id)
        expected[id] = (version, kind, content_hash)
    assert {id: (c.version, c.change, c.content_hash) for id, c in copy.items()} == expected
    # The body a consumer fetches by the notification's path is the store's current body.
    for id, change in copy.items():
        if change.change == "stored":
            _, encoded, _, version = change.path.rsplit("/", 3)
            fetched = store.get(urllib.parse.unquote(encoded), version=int(version))
            assert fetched.content_hash == change.content_hash == store.get(id).content_hash


# --- the Lambda worker, looped as the state machine loops it ---------------------------------


@dataclass
class PagesOfTime(LambdaContext):
    """A context with time for `pages` pages after the first (the worker always handles
    one, and asks before each further page)."""

    pages: int = 0

    def get_remaining_time_in_millis(self) -> int:
        self.pages -= 1
        return 10**9 if self.pages >= 0 else 0


def test_the_lambda_worker_loops_from_its_cursor_until_done(feed: Feed) -> None:
    import vhs.aws
    from handlers import reindex as handler_module

    store = feed.backend.store()
    for n in range(9):
        store.put(f"r{n}", {"n": n}, updated_at=at(n))
    env = {
        "VHS_TABLE_NAME": feed.backend.table_name,
        "VHS_BUCKET_NAME": feed.backend.bucket_name,
        "VHS_CHANGE_TOPIC_ARN": feed.topic_arn,
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    vhs.aws._session = None
    handler_module.worker.cache_clear()
    with environment(env):
        handler = load_handler("reindex")
        # events/reindex-segment.json, the first invocation of a segment, in pages of 4.
        event = json.loads((ROOT / "events" / "reindex-segment.json").read_text())
        state: dict[str, Any] = {**event, "run": {**event["run"], "run_id": "sfn-run"}}
        state["run"]["page_size"] = 4
        invocations = 0
        while not state.get("done"):  # the state machine's Choice
            state = handler(state, PagesOfTime(function_name="vhs-reindex"))
            invocations += 1
        with pytest.raises(InvalidInput) as raised:
            handler({"segment": 0, "run": {"total_segments": 1}}, LambdaContext())
        assert raised.value.field == "run.run_id"
    handler_module.worker.cache_clear()
    assert invocations == 3  # one page each, its output the next one's input
    assert state["totals"]["replayed"] == 9 and state["last"]["replayed"] == 1
    assert state["run"]["run_id"] == "sfn-run" and state["foreign_ids"] == []
    received = feed.received()
    assert sorted(c.id for c in received) == [f"r{n}" for n in range(9)]
    assert {c.replay_run for c in received} == {"sfn-run"}


# --- the command ------------------------------------------------------------------------------


def test_vhs_reindex_replays_to_the_local_feed_and_resumes_nothing_when_done(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    for n in range(3):
        record = tmp_path / f"{n}.json"
        record.write_text(json.dumps({"n": n}))
        put = vhs(local_env, "put", f"cli-reindex-{n}", str(record), "--updated-at", at(n))
        assert put.returncode == 0, put.stderr
    checkpoint = tmp_path / "run.json"
    result = vhs(
        local_env,
        "--json",
        "reindex",
        "--segments",
        "2",
        "--rate",
        "1000",
        "--checkpoint",
        str(checkpoint),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert_documented("vhs reindex", summary)
    assert summary["status"] == "done" and summary["segments_done"] == 2
    assert summary["replayed"] >= 3 and summary["foreign"] == 0
    assert summary["checkpoint"] == str(checkpoint)
    assert json.loads(checkpoint.read_text())["run_id"] == summary["run_id"]
    again = vhs(local_env, "--json", "reindex", "--resume", str(checkpoint))
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)
    assert (resumed["run_id"], resumed["replayed"]) == (summary["run_id"], summary["replayed"])
    bad = vhs(local_env, "reindex", "--since", "yesterday")
    assert bad.returncode == 2 and b"since" in bad.stderr


def test_an_interrupted_vhs_reindex_stops_at_once_and_reports_what_its_checkpoint_holds(
    local_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """At 0.01 records/s a segment's second page waits 100 s to be paid for. Ctrl-C in that
    wait stops the run at once (each segment handles the page it has read), and the summary
    counts exactly what the checkpoint holds: it is printed once every segment has recorded
    its page, never while one is still in hand."""
    from vhs_ops.cli.app import main

    for n in range(4):
        record = tmp_path / f"{n}.json"
        record.write_text(json.dumps({"n": n}))
        assert vhs(local_env, "put", f"cli-stop-{n}", str(record)).returncode == 0
    for name, value in local_env.items():
        if name.startswith(("AWS_", "VHS_")):
            monkeypatch.setenv(name, value)
    checkpoint = tmp_path / "run.json"
    interrupted: list[float] = []

    def ctrl_c_once_every_segment_waits() -> None:
        # Each segment records its first page, then waits for the rate: Ctrl-C then.
        while not done.is_set():
            if scanned_by_segment(checkpoint) == [1, 1]:
                interrupted.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGINT)
                return
            done.wait(0.05)

    done = threading.Event()
    watcher = threading.Thread(target=ctrl_c_once_every_segment_waits)
    with terminal_ctrl_c():  # as from a terminal, whatever this runner's SIGINT is
        watcher.start()
        try:
            status = main(
                ["--json", "reindex", "--segments", "2", "--rate", "0.01", "--page-size", "1",
                 "--checkpoint", str(checkpoint)]
            )  # fmt: skip
        finally:
            done.set()
            watcher.join()
    summary = json.loads(capsys.readouterr().out)
    saved = json.loads(checkpoint.read_text())
    assert interrupted, "the segments never both recorded a page"
    took = time.monotonic() - interrupted[0]
    assert (status, summary["status"]) == (1, "interrupted")
    assert summary["scanned"] == sum(s["counts"]["scanned"] for s in saved["segments"]) >= 2
    assert summary["replayed"] == sum(s["counts"]["replayed"] for s in saved["segments"])
    assert took < 50, f"{took:.1f}s after Ctrl-C: the segments slept out their 100 s wait"


def scanned_by_segment(checkpoint: Path) -> list[int] | None:
    """What each segment's checkpoint says it scanned, or None while there is none to read."""
    try:
        saved = json.loads(checkpoint.read_text())
    except (OSError, ValueError):
        return None
    return [s["counts"]["scanned"] for s in saved.get("segments", [])]
