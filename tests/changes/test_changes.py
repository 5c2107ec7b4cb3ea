"""The change feed: one notification per stored version and per delete, in order per id.

Unit tests derive changes from stream images (every kind of write the store and the garbage
collector make). The end-to-end tests run on moto's server: a store writes, the local stream
poller (vhs_ops.local.stream_source) reads the table's stream and invokes the real Lambda
handler with Lambda's event shape, the handler publishes to an SNS FIFO topic, and an SQS
FIFO queue subscribed to it receives what a subscriber would.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import urllib.parse
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import EventType
from botocore.exceptions import ClientError

from vhs import keys
from vhs.changes import feed as changes
from vhs.changes import publish
from vhs.changes.batch import Plan, batch_response
from vhs.changes.feed import (
    Change,
    MalformedImage,
    changes_from_images,
    changes_from_record,
    deduplication_id,
    message_group_id,
)
from vhs.changes.publish import ChangePublisher, chunks
from vhs.changes.stream import lambda_record
from vhs.errors import NotPublished
from vhs.retention import Retention
from vhs_ops import provisioning
from vhs_ops.local.invoke import LambdaContext
from vhs_ops.local.runners import LocalChangeFeed
from vhs_ops.local.stack import client
from vhs_ops.local.stream_source import DynamoDBStreamSource, StreamSourceConfig, settle_response
from vhs_testing.backends import Backend
from vhs_testing.batches import answered_alike, processed
from vhs_testing.notifications import assert_exactly_once_in_order, receive_notifications

BUCKET = "bodies"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
HASH_A = "a" * 64
HASH_B = "b" * 64


# --- images ---------------------------------------------------------------------------------


def entry(t: str, h: str, *, n: int = 10, inline: bool = True, ct: str | None = None) -> dict:
    attrs: dict[str, Any] = {
        "t": {"S": t},
        "h": {"S": h},
        "n": {"N": str(n)},
        "w": {"N": "1767225600"},
        "k": {"S": "tok"},
    }
    if inline and h != "~":
        attrs["b"] = {"B": base64.b64encode(b"x").decode()}
    if ct:
        attrs["ct"] = {"S": ct}
    return {"M": attrs}


def image(id: str, v: int, current: dict, history: list[dict] | None = None, **extra: Any) -> dict:
    item: dict[str, Any] = {"id": {"S": id}, "v": {"N": str(v)}, "c": {"L": [current]}}
    if history is not None:
        item["p"] = {"L": history}
    item.update(extra)
    return item


def t(n: int) -> str:
    return f"2026-01-01T00:00:{n:02d}.000000Z"


def derive(old: dict | None, new: dict | None, prefix: str = "") -> changes.Derived:
    return changes_from_images(old, new, bucket=BUCKET, prefix=prefix)


def test_a_new_item_is_version_1() -> None:
    derived = derive(None, image("b1", 1, entry(t(1), HASH_A)))
    (change,) = derived.changes
    assert change == Change("b1", 1, t(1), "stored", "inline", HASH_A, 10, "application/json")
    assert json.loads(change.body()) == {
        "id": "b1",
        "version": 1,
        "updated_at": "2026-01-01T00:00:01.000000Z",
        "change": "stored",
        "location": "inline",
        "content_hash": HASH_A,
        "size": 10,
        "content_type": "application/json",
        "path": "/records/b1/versions/1",
    }


def test_an_update_is_the_next_version_with_its_s3_location() -> None:
    old = image("b1", 1, entry(t(1), HASH_A), [])
    new = image(
        "b1", 2, entry(t(2), HASH_B, n=99, inline=False, ct="image/tiff"), [old["c"]["L"][0]]
    )
    (change,) = derive(old, new, prefix="bodies").changes
    assert change.version == 2
    assert change.location == f"s3://{BUCKET}/{keys.body_key('bodies', 'b1', HASH_B)}"
    assert (change.content_hash, change.size, change.content_type) == (HASH_B, 99, "image/tiff")


def test_a_delete_is_a_version_with_no_location() -> None:
    old = image("b1", 1, entry(t(1), HASH_A))
    new = image("b1", 2, entry(t(3), "~", n=0), [old["c"]["L"][0]])
    (change,) = derive(old, new).changes
    assert change == Change("b1", 2, t(3), "deleted", None, None, None, None)
    # A delete of an id never seen is remembered as a tombstone: version 1, a delete.
    (first,) = derive(None, image("new", 1, entry(t(3), "~", n=0))).changes
    assert (first.version, first.change) == (1, "deleted")


def purge_entry(at: str) -> dict:
    tombstone = entry(at, "~", n=0)
    tombstone["M"]["x"] = {"BOOL": True}
    return tombstone


def test_a_purge_says_purge() -> None:
    old = image("b1", 2, entry(t(2), HASH_B), [entry(t(1), HASH_A)])
    new = image("b1", 3, purge_entry(t(3)))  # the purge's UpdateItem removed `p`
    (change,) = derive(old, new).changes
    assert (change.version, change.change, change.purge) == (3, "deleted", True)
    message = json.loads(change.body())
    assert message["purge"] is True and message["change"] == "deleted"
    assert Change.from_message(change.body()) == change
    # A plain delete says nothing of purging.
    plain = derive(old, image("b1", 3, entry(t(3), "~", n=0), [*old["p"]["L"], old["c"]["L"][0]]))
    assert "purge" not in json.loads(plain.changes[0].body())


def test_a_purge_of_an_already_deleted_id_is_notified_again_as_a_purge() -> None:
    deleted = image("b1", 2, entry(t(2), "~", n=0), [entry(t(1), HASH_A)])
    purged = image("b1", 2, purge_entry(t(2)))  # same version: flagged, history removed
    (change,) = derive(deleted, purged).changes
    assert (change.version, change.change, change.purge) == (2, "deleted", True)
    (delete,) = derive(image("b1", 1, entry(t(1), HASH_A)), deleted).changes
    assert change.deduplication_id != delete.deduplication_id  # not dropped by SNS
    # Once purged, a later trim or marker on the same version notifies nothing more.
    marked = image("b1", 2, purge_entry(t(2)), gcd={"N": "1.5e9"})
    assert derive(purged, marked).reason == "same version"


def test_touches_trims_and_gc_markers_notify_nothing() -> None:
    history = [entry(t(1), HASH_A), entry(t(2), HASH_B)]
    old = image("b1", 3, entry(t(3), HASH_A), history)
    touched = image("b1", 3, entry(t(9), HASH_A), history)
    trimmed = image("b1", 3, entry(t(3), HASH_A), history[1:])
    marked = image("b1", 3, entry(t(3), HASH_A), history, **{f"gc:{HASH_B}": {"N": "1.5e9"}})
    for new in (touched, trimmed, marked):
        derived = derive(old, new)
        assert derived.changes == () and derived.reason == "same version"
    # A marker on an item the store never wrote (only id and gc:*): no versions at all.
    only_marker = {"id": {"S": "b1"}, f"gc:{HASH_A}": {"N": "1.5e9"}}
    assert derive(None, only_marker).reason == "no versions"
    # ... and the store's first write to it is version 1.
    first = image("b1", 1, entry(t(1), HASH_A), [], **{f"gc:{HASH_A}": {"N": "1.5e9"}})
    assert [c.version for c in derive(only_marker, first).changes] == [1]


def test_a_remove_event_notifies_nothing() -> None:
    old = image("b1", 3, entry(t(3), HASH_A))
    derived = derive(old, None)
    assert derived.changes == () and derived.reason == "removed" and derived.id == "b1"
    record = {"eventName": "REMOVE", "dynamodb": {"Keys": {"id": {"S": "b1"}}}}  # KEYS_ONLY
    assert changes_from_record(record, bucket=BUCKET).id == "b1"


def test_without_history_the_current_entry_is_the_version() -> None:
    # Retention(versions=0): SET c REMOVE p ADD v.
    old = image("b1", 4, entry(t(4), HASH_A))
    (change,) = derive(old, image("b1", 5, entry(t(5), HASH_B))).changes
    assert (change.version, change.content_hash) == (5, HASH_B)


def test_a_step_of_more_than_one_version_notifies_each_in_order() -> None:
    old = image("b1", 1, entry(t(1), HASH_A), [])
    new = image("b1", 3, entry(t(3), HASH_A), [entry(t(1), HASH_A), entry(t(2), HASH_B)])
    assert [(c.version, c.updated_at) for c in derive(old, new).changes] == [(2, t(2)), (3, t(3))]
    # A version the new image no longer holds cannot be described: reported, not invented.
    gone = derive(old, image("b1", 3, entry(t(3), HASH_A)))
    assert [c.version for c in gone.changes] == [3] and gone.unknown_versions == (2,)


def test_a_malformed_image_is_an_error_not_a_silent_skip() -> None:
    with pytest.raises(MalformedImage):
        derive(None, {"id": {"S": "b1"}, "v": {"N": "1"}, "c": {"L": [{"M": {"t": {"S": t(1)}}}]}})
    with pytest.raises(MalformedImage):
        derive(None, {"id": {"S": "b1"}, "v": {"S": "one"}, "c": {"L": []}})


def test_group_and_deduplication_ids_fit_sns_for_every_valid_id() -> None:
    assert message_group_id("b1234") == "b1234"
    for id in ("x" * 256, "é" * 10, "a b", "x" * 129):
        group = message_group_id(id)
        assert group.startswith("~") and len(group) == 65
    change = Change("é" * 256, 7, t(1), "stored", "inline", HASH_A, 1, "application/json")
    dedup = deduplication_id(change)
    assert len(dedup) == 64 and dedup == deduplication_id(change)
    other = Change("é" * 256, 7, t(1), "stored", "inline", HASH_B, 1, "application/json")
    assert deduplication_id(other) != dedup
    assert Change.from_message(change.body()) == change


def test_the_path_names_the_version_at_the_read_api_with_the_id_as_one_segment() -> None:
    """A consumer fetches the body at ReadApiUrl + path, without reading the table: the id
    is percent-encoded as one path segment, whatever it holds."""
    for id in ("b1", "a/b", "100% ?#", "é" * 256, "🦀", "..", "+&=;"):
        change = Change(id, 12, t(1), "stored", "inline", HASH_A, 1, "application/json")
        prefix, segment, rest = change.path.removeprefix("/").split("/", 2)
        assert (prefix, rest) == ("records", "versions/12")
        assert urllib.parse.unquote(segment, errors="strict") == id
        assert urllib.parse.quote(id, safe="") == segment
        assert json.loads(change.body())["path"] == change.path
    deleted = Change("a/b", 2, t(1), "deleted", None)
    assert deleted.path is None and json.loads(deleted.body())["path"] is None
    # Old consumers read the fields they know; the path is derived, not a field to send back.
    assert Change.from_message(json.loads(deleted.body())) == deleted


def test_the_longest_notifications_still_batch_within_snss_limits() -> None:
    """An id of 256 four-byte characters is 1 KB, and 3 KB percent-encoded in the path (and
    in the S3 key of its location): ten such notifications are far within a PublishBatch's
    256 KB, and `chunks` sizes every entry as sent."""
    ids = ["🦀" * 255 + chr(0x4E00 + n) for n in range(25)]
    longest = [
        Change(
            id,
            10**12,
            t(1),
            "stored",
            f"s3://{'b' * 63}/{keys.body_key('p' * 400, id, HASH_A)}",
            HASH_A,
            5 * 2**30,
            "x/" + "y" * 200,
        ).replayed("reindex-" + "r" * 80)
        for id in ids
    ]
    assert len(longest[0].path.encode()) == len("/records//versions/") + 255 * 12 + 9 + 13
    assert max(len(change.body().encode()) for change in longest) < 8 * 1024
    sent = [chunk for _, chunk in chunks(longest)]
    assert [len(chunk) for chunk in sent] == [10, 10, 5]  # full calls, in order
    assert [change for chunk in sent for change in chunk] == longest


def test_chunks_never_hold_two_changes_of_one_id() -> None:
    ids = ["a", "b", "a", "c", "a", *[f"x{n}" for n in range(12)]]
    sequence = [Change(id, n, t(1), "stored", "inline", HASH_A, 1) for n, id in enumerate(ids)]
    seen = []
    for start, chunk in chunks(sequence):
        assert len(chunk) <= 10
        assert len({c.id for c in chunk}) == len(chunk)
        assert sequence[start : start + len(chunk)] == chunk
        seen += chunk
    assert seen == sequence


def test_lambda_records_carry_lambdas_json_shape() -> None:
    raw = {
        "eventID": "e1",
        "eventName": "MODIFY",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 1, 1, tzinfo=UTC),
            "Keys": {"id": {"S": "b1"}},
            "NewImage": {"id": {"S": "b1"}, "c": {"L": [{"M": {"b": {"B": b"\x00\x01"}}}]}},
            "SequenceNumber": "100",
            "SizeBytes": 12,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"
    record = lambda_record(raw, stream_arn=arn, region="eu-west-1")
    assert record["eventSource"] == "aws:dynamodb" and record["eventSourceARN"] == arn
    assert record["awsRegion"] == "eu-west-1" and record["eventVersion"] == "1.1"
    assert record["dynamodb"]["ApproximateCreationDateTime"] == int(T0.timestamp())
    assert record["dynamodb"]["NewImage"]["c"]["L"][0]["M"]["b"] == {"B": "AAE="}
    json.dumps(record)  # JSON, as Lambda delivers it


def test_stream_responses_checkpoint_at_the_lowest_failure() -> None:
    seqs = ["100", "101", "102"]
    assert settle_response(None, seqs) == (None, None)
    assert settle_response({"batchItemFailures": []}, seqs) == (None, None)
    failures = [{"itemIdentifier": "102"}, {"itemIdentifier": "101"}]
    assert settle_response({"batchItemFailures": failures}, seqs) == (1, None)
    for bad in ([{"itemIdentifier": ""}], [{"itemIdentifier": "999"}], [{"id": "100"}]):
        index, error = settle_response({"batchItemFailures": bad}, seqs)
        assert index == 0 and error


class FakeStreams:
    """Two shards as DynamoDB splits them: a closed parent and its open child (listed
    first, to show the child waits for its parent)."""

    def __init__(self) -> None:
        self.shards = {"parent": ["1", "2", "3"], "child": ["4", "5"]}

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {
            "StreamDescription": {
                "Shards": [
                    {
                        "ShardId": "child",
                        "ParentShardId": "parent",
                        "SequenceNumberRange": {"StartingSequenceNumber": "4"},
                    },
                    {
                        "ShardId": "parent",
                        "SequenceNumberRange": {
                            "StartingSequenceNumber": "1",
                            "EndingSequenceNumber": "3",
                        },
                    },
                ]
            }
        }

    def get_shard_iterator(self, ShardId: str, ShardIteratorType: str, **_: Any) -> dict:
        start = len(self.shards[ShardId]) if ShardIteratorType == "LATEST" else 0
        return {"ShardIterator": f"{ShardId}:{start}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        shard, start = ShardIterator.split(":")
        sequence_numbers = self.shards[shard][int(start) : int(start) + Limit]
        end = int(start) + len(sequence_numbers)
        closed = shard == "parent" and end == len(self.shards[shard])
        records = [
            {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": n, "Keys": {"id": {"S": n}}}}
            for n in sequence_numbers
        ]
        return {"Records": records, "NextShardIterator": None if closed else f"{shard}:{end}"}


ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"


def test_the_poller_reads_a_parent_shard_before_its_child() -> None:
    seen: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    DynamoDBStreamSource(FakeStreams(), ARN, handler, StreamSourceConfig(batch_size=2)).drain(
        timeout=5
    )
    assert seen == ["1", "2", "3", "4", "5"]


def test_the_poller_starts_at_latest_when_asked() -> None:
    streams, seen = FakeStreams(), []
    source = DynamoDBStreamSource(
        streams,
        ARN,
        lambda event, _: seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"]),
        StreamSourceConfig(starting_position="LATEST"),
    )
    source.drain(timeout=5)
    streams.shards["child"].append("6")
    source.drain(timeout=5)
    assert seen == ["6"]


def test_the_poller_retries_from_the_reported_record_and_gives_up_when_told() -> None:
    attempts: list[list[str]] = []
    given_up: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        attempts.append(sequence_numbers)
        if "2" in sequence_numbers:  # record 2 always fails
            return {"batchItemFailures": [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}]}
        return {"batchItemFailures": []}

    source = DynamoDBStreamSource(
        FakeStreams(),
        ARN,
        handler,
        StreamSourceConfig(batch_size=10, retry_attempts=2),
        on_failure=given_up.append,
    )
    source.drain(timeout=5)
    # 1..3 (2 fails) -> retried from 2 twice -> given up on -> 4, 5.
    assert attempts == [["1", "2", "3"], ["2", "3"], ["2", "3"], ["4", "5"]]
    (failure,) = given_up
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    info = failure["DDBStreamBatchInfo"]
    assert (info["shardId"], info["startSequenceNumber"], info["endSequenceNumber"]) == (
        "parent",
        "2",
        "3",
    )


# --- end to end on moto's server --------------------------------------------------------------


@dataclass
class Feed:
    """A change topic and a subscriber queue on the server backend."""

    backend: Backend
    topic_arn: str
    queue_url: str
    stream_arn: str
    sqs: Any
    streams: Any
    received: list[Change] = field(default_factory=list)

    def local(self, *, threaded: bool = False, **options: Any) -> LocalChangeFeed:
        """The local change feed (what `vhs local up` runs) on this backend."""
        dlq_url = options.pop("dlq_url", None)
        return LocalChangeFeed(
            self.backend.endpoint or "",
            self.backend.table_name,
            self.topic_arn,
            self.backend.bucket_name,
            threaded=threaded,
            dlq_url=dlq_url,
            config=StreamSourceConfig(**options),
        )

    def receive_all(self, timeout: float = 20.0) -> list[Change]:
        """Every notification delivered so far, in delivery order (FIFO per id)."""
        self.received += receive_notifications(self.sqs, self.queue_url, timeout)
        return self.received


def handler_sns(running: LocalChangeFeed) -> Any:
    """The SNS client of the running handler (to inject faults into)."""
    return running.module.feed().publisher.sns


@pytest.fixture
def feed(server: Backend) -> Feed:
    suffix = server.table_name.rsplit("-", 1)[1]
    sns = client("sns", server.endpoint)
    sqs = client("sqs", server.endpoint)
    topic_arn = provisioning.create_change_topic(sns, f"vhs-test-{suffix}.fifo")
    queue_url = provisioning.subscribe_fifo_queue(sns, sqs, topic_arn, f"vhs-test-{suffix}.fifo")
    table = server.dynamodb.describe_table(TableName=server.table_name)["Table"]
    streams = client("dynamodbstreams", server.endpoint)
    return Feed(server, topic_arn, queue_url, table["LatestStreamArn"], sqs, streams)


def expected_changes(results: list[Any]) -> dict[str, list[int]]:
    """{id: versions} that a store's results say were written (stored or deleted)."""
    versions: dict[str, list[int]] = defaultdict(list)
    for result in results:
        if str(result.outcome) in ("stored", "deleted"):
            versions[result.id].append(result.version)
    return {id: sorted(v) for id, v in versions.items()}


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def test_every_stored_version_and_delete_is_notified_once_in_order(feed: Feed) -> None:
    store = feed.backend.store(inline_threshold=64)  # bodies over 64 bytes go to S3
    results: list[Any] = []
    big = {"text": random.Random(1).randbytes(300).hex()}  # does not compress to 64 bytes
    # Before the poller starts (it reads from TRIM_HORIZON, as the deployed one does).
    results.append(store.put("a", {"n": 1}, updated_at=at(1)))
    results.append(store.put("a", big, updated_at=at(2)))  # S3
    results.append(store.put("a", {"n": 0}, updated_at=at(1.5)))  # stale
    results.append(store.put("a", big, updated_at=at(2)))  # duplicate
    results.append(store.put("a", big, updated_at=at(3)))  # touch: same content, later
    results.append(store.delete("a", deleted_at=at(4)))
    results.append(store.put("a", {"n": 2}, updated_at=at(3.5)))  # stale: before the delete
    results.append(store.put("a", {"n": 3}, updated_at=at(5)))  # after the delete
    results.append(store.delete("never-seen", deleted_at=at(1)))
    results.append(store.put("raw/é", b"\x00" * 200, updated_at=at(1), content_type="a/b"))
    for n in range(8):  # more versions than retention keeps: trims happen
        results.append(store.put("many", {"n": n}, updated_at=at(10 + n)))
    with feed.local(threaded=True) as running:
        # Concurrently with the poller, several writers race on the same ids.
        lock = threading.Lock()

        def write(worker: int) -> None:
            rng = random.Random(worker)
            for _ in range(12):
                id = f"hot-{rng.randrange(3)}"
                when = at(100 + rng.randrange(20))
                if rng.random() < 0.15:
                    result = store.delete(id, deleted_at=when)
                else:
                    result = store.put(id, {"v": rng.randrange(4)}, updated_at=when)
                with lock:
                    results.append(result)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, range(4)))
        running.drain(timeout=30)
        source = running.source
    received = feed.receive_all()

    outcomes = {str(r.outcome) for r in results}
    assert {"stored", "deleted", "stale", "unchanged"} <= outcomes
    expected = expected_changes(results)
    assert_exactly_once_in_order(received, expected)
    assert len(received) == sum(len(v) for v in expected.values())

    # What the notifications say matches what the store says it wrote.
    by_key = {(c.id, c.version): c for c in received}
    for result in results:
        change = by_key.get((result.id, result.version))
        if str(result.outcome) == "stored":
            assert change.change == "stored"
            assert (change.location, change.content_hash) == (result.location, result.content_hash)
        elif str(result.outcome) == "deleted":
            assert (change.change, change.location, change.content_hash) == ("deleted", None, None)
    assert by_key[("a", 2)].location.startswith(f"s3://{feed.backend.bucket_name}/")
    assert by_key[("raw/é", 1)].content_type == "a/b"
    for info in store.history("many"):
        stamp = info.updated_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert by_key[("many", info.version)].updated_at == stamp
    # The notification carries the timestamp of the write that made the version; a later
    # touch moves the store's updated_at forward without a notification (docs/changes.md).
    assert by_key[("a", 2)].updated_at == "2026-01-01T00:00:02.000000Z"
    assert store.history("a")[1].updated_at == T0 + timedelta(seconds=3)
    # Touches, trims and duplicates made stream records but no notification.
    assert source is not None and source.stats.records_read > len(received)
    assert source.stats.partial_failures == source.stats.failed_invocations == 0


def write_versions(store: Any, ids: list[str], count: int) -> list[Any]:
    results = []
    for n in range(count):
        for id in ids:
            results.append(store.put(id, {"id": id, "n": n}, updated_at=at(n)))
    return results


def fail_entries_once(sns: Any, id: str, version: int) -> list[str]:
    """Make SNS refuse, once, the PublishBatch entry of (id, version): the request goes out
    without it and the response lists it as failed, as a throttled or failed entry is."""
    removed: list[str] = []

    def drop(params: dict[str, Any], **_: Any) -> dict[str, Any] | None:
        if removed:
            return None
        entries = params["PublishBatchRequestEntries"]
        for entry in entries:
            message = json.loads(entry["Message"])
            if (message["id"], message["version"]) == (id, version):
                removed.append(entry["Id"])
                rest = [e for e in entries if e is not entry]
                return {**params, "PublishBatchRequestEntries": rest}
        return None

    def report(parsed: dict[str, Any], **_: Any) -> None:
        if len(removed) == 1:
            failure = {"Id": removed[0], "Code": "InternalError", "SenderFault": False}
            parsed.setdefault("Failed", []).append({**failure, "Message": "injected"})
            removed.append("reported")

    sns.meta.events.register("provide-client-params.sns.PublishBatch", drop)
    sns.meta.events.register("after-call.sns.PublishBatch", report)
    return removed


def fail_first_call(sns: Any) -> list[int]:
    calls: list[int] = []

    def fail(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ClientError(
                {"Error": {"Code": "ThrottledException", "Message": "injected"}}, "PublishBatch"
            )

    sns.meta.events.register("before-call.sns.PublishBatch", fail)
    return calls


@pytest.mark.parametrize("fault", ["entry", "call"])
def test_a_failed_publish_is_retried_and_order_per_id_holds(feed: Feed, fault: str) -> None:
    store = feed.backend.store(retention=Retention(versions=10))
    results = write_versions(store, ["x", "y", "z"], 4)  # one batch: x1 y1 z1 x2 y2 ...
    with feed.local() as running:  # polled in this thread, by drain()
        sns = handler_sns(running)
        injected = fail_entries_once(sns, "y", 2) if fault == "entry" else fail_first_call(sns)
        running.drain(timeout=30)
        source = running.source
    received = feed.receive_all()
    assert injected, "the fault was never injected"
    assert_exactly_once_in_order(received, expected_changes(results))
    assert source is not None
    first = source.invocations[0]
    assert first.retry_from is not None
    # The first invocation checkpointed at the first change it could not publish: it and
    # every later record came again (records before it made no notification, or did).
    assert version_made_by(feed, first.retry_from) == (("y", 2) if fault == "entry" else ("x", 1))
    assert source.invocations[-1].retry_from is None


def version_made_by(feed: Feed, sequence_number: str) -> tuple[str, int] | None:
    """(id, version) that the stream record `sequence_number` made, if any."""
    for record in stream_event(feed)["Records"]:
        if record["dynamodb"]["SequenceNumber"] == sequence_number:
            return version_made(record)
    raise LookupError(sequence_number)


def version_made(record: dict[str, Any]) -> tuple[str, int] | None:
    derived = changes_from_record(record, bucket="any")
    return (derived.id, derived.changes[0].version) if derived.changes else None


def test_a_record_given_up_on_is_dead_lettered_and_can_be_replayed(feed: Feed) -> None:
    results = write_versions(feed.backend.store(), ["p", "q"], 2)  # p1 q1 p2 q2
    refused = {"on": True}

    def refuse_q1(params: dict[str, Any], **_: Any) -> None:
        for entry in params["PublishBatchRequestEntries"]:
            message = json.loads(entry["Message"])
            if refused["on"] and (message["id"], message["version"]) == ("q", 1):
                raise ClientError({"Error": {"Code": "KMSDisabled"}}, "PublishBatch")

    dlq_url = feed.sqs.create_queue(QueueName=f"{feed.backend.table_name}-changes-dlq")["QueueUrl"]
    with feed.local(retry_attempts=1, dlq_url=dlq_url) as running:
        sns = handler_sns(running)
        sns.meta.events.register("provide-client-params.sns.PublishBatch", refuse_q1)
        running.drain(timeout=30)
        source = running.source
    assert source is not None
    # Bisection isolated q's version 1: it alone was given up on, after one retry.
    assert source.stats.bisections >= 1
    assert source.stats.batches_given_up == 1 and source.stats.records_given_up == 1
    received = feed.receive_all()
    assert sorted((c.id, c.version) for c in received) == [("p", 1), ("p", 2), ("q", 2)]

    (message,) = feed.sqs.receive_message(QueueUrl=dlq_url).get("Messages", [])
    failure = json.loads(message["Body"])
    info = failure["DDBStreamBatchInfo"]
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert info["startSequenceNumber"] == info["endSequenceNumber"]
    assert info["streamArn"] == feed.stream_arn
    refused["on"] = False
    publisher = ChangePublisher(sns, feed.topic_arn)
    result = publish.replay(
        message["Body"], feed.streams, publisher, bucket=feed.backend.bucket_name
    )
    assert result.complete and result.published == 1
    received = feed.receive_all()
    # Exactly once, but q's version 1 arrived after its version 2 (docs/changes.md).
    assert sorted((c.id, c.version) for c in received) == sorted(
        (id, v) for id, versions in expected_changes(results).items() for v in versions
    )


def stream_event(feed: Feed) -> dict[str, Any]:
    """Everything in the table's stream, as one Lambda event."""
    description = feed.streams.describe_stream(StreamArn=feed.stream_arn)["StreamDescription"]
    (shard,) = description["Shards"]
    iterator = feed.streams.get_shard_iterator(
        StreamArn=feed.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    raw = feed.streams.get_records(ShardIterator=iterator)["Records"]
    region = feed.stream_arn.split(":")[3]
    return {"Records": [lambda_record(r, stream_arn=feed.stream_arn, region=region) for r in raw]}


class RunningOut(LambdaContext):
    """A context with a full minute left at the first look and one second after that."""

    looks = 0

    def get_remaining_time_in_millis(self) -> int:
        self.looks += 1
        return 60_000 if self.looks == 1 else 1_000


def test_the_handler_stops_publishing_when_time_runs_out(feed: Feed) -> None:
    write_versions(feed.backend.store(), [f"id{n:02d}" for n in range(25)], 1)
    event = stream_event(feed)
    with feed.local() as running:
        assert running.handler is not None
        response = running.handler(event, RunningOut(function_name="vhs-changes"))
    received = feed.receive_all()
    sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
    made = [version_made(record) for record in event["Records"]]
    # The first PublishBatch (10 entries) went out; from the 11th change on, records come again.
    failures = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    assert failures == sequence_numbers[made.index(("id10", 1)) :]
    assert [c.id for c in received] == [f"id{n:02d}" for n in range(10)]


@pytest.mark.parametrize("finished", [3, 2, 1, 0])
def test_the_batch_response_is_what_powertools_batch_processor_answers(finished: int) -> None:
    """The response is read off how far the batch got; Powertools' BatchProcessor, told to
    fail every record from the first unfinished one, answers the same: their sequence
    numbers, or, when none is finished, the same error and message."""
    records = [{"eventID": str(n), "dynamodb": {"SequenceNumber": f"10{n}"}} for n in range(3)]
    plan = Plan([], finished, "SNS refused" if finished < 3 else None, 0)
    position = {r["dynamodb"]["SequenceNumber"]: n for n, r in enumerate(records)}

    def record_handler(record: Any) -> None:
        if position[record.dynamodb.sequence_number] >= finished:
            raise NotPublished(plan.reason)

    error = answered_alike(
        lambda: batch_response(records, plan),
        lambda: processed(EventType.DynamoDBStreams, records, record_handler),
    )
    assert (error is not None) == (finished == 0)
    if error is not None:
        assert [str(e) for _, e, _ in error.child_exceptions] == ["SNS refused"] * 3
    assert batch_response([], Plan([], 0, None, 0)) == {"batchItemFailures": []}


def test_a_misconfigured_handler_fails_the_whole_batch(feed: Feed) -> None:
    running = feed.local()
    running.topic_arn = ""
    with running, pytest.raises(Exception, match="VHS_CHANGE_TOPIC_ARN"):
        assert running.handler is not None
        running.handler({"Records": []}, LambdaContext())
