"""The local server's index for moto's SQS (vhs_ops/local/moto_sqs.py): the same answers as moto's
own model, at a cost per call that does not grow with the queue's depth.

Each semantic scenario runs twice in process, on moto as it is and with the index installed,
on a clock the test moves (moto's clock, not ours), and the answers must be equal. The cost
is counted as Python lines executed in moto's SQS model and the patch (a deep queue against a
shallow one), never timed."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.sqs import models

from vhs_ops.local import moto_sqs

START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def seconds(self, dt: Any = None) -> float:
        return self.now

    def millis(self, dt: Any = None) -> float:
        return self.now * 1000.0

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(models, "unix_time", fake.seconds)
    monkeypatch.setattr(models, "unix_time_millis", fake.millis)
    return fake


def run_both(scenario: Callable[[Any, Clock], Any]) -> tuple[Any, Any]:
    """What `scenario(sqs, clock)` observes on moto as it is, and with the index."""
    seen = []
    for indexed in (False, True):
        clock = Clock()
        saved = models.unix_time, models.unix_time_millis
        models.unix_time, models.unix_time_millis = clock.seconds, clock.millis
        try:
            with mock_aws(), moto_sqs.patched() if indexed else contextlib.nullcontext():
                seen.append(scenario(boto3.client("sqs", region_name="us-east-1"), clock))
        finally:
            models.unix_time, models.unix_time_millis = saved
    return seen[0], seen[1]


def bodies(response: dict[str, Any]) -> list[str]:
    return [m["Body"] for m in response.get("Messages", [])]


def counts(sqs: Any, url: str) -> dict[str, str]:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]


def receive(sqs: Any, url: str, n: int = 10, **kw: Any) -> dict[str, Any]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=n, MessageSystemAttributeNames=["All"], **kw
    )


# --- the same answers -----------------------------------------------------------------------


def visibility_and_delay(sqs: Any, clock: Clock) -> list[Any]:
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    seen: list[Any] = []
    for n in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    seen.append(counts(sqs, url))
    first = receive(sqs, url, 2)
    seen.append(bodies(first))
    seen.append(counts(sqs, url))
    seen.append(bodies(receive(sqs, url)))  # the other three; the delayed one is not yet due
    seen.append(bodies(receive(sqs, url)))  # nothing visible
    clock.advance(31)  # all five come back, received a second time
    again = receive(sqs, url)
    seen.append(sorted(bodies(again)))
    seen.append(sorted(m["Attributes"]["ApproximateReceiveCount"] for m in again["Messages"]))
    # An earlier receipt handle still deletes the message, and deleting twice succeeds.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["Messages"][0]["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["Messages"][0]["ReceiptHandle"])
    seen.append(counts(sqs, url))
    clock.advance(31)
    seen.append(sorted(bodies(receive(sqs, url))))  # the delayed one is due now, too
    handle = again["Messages"][-1]["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    clock.advance(0.01)
    seen.append(bodies(receive(sqs, url)))
    for call in (
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle"),
        lambda: sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle="not-a-handle", VisibilityTimeout=5
        ),
    ):
        with pytest.raises(ClientError) as raised:
            call()
        seen.append(raised.value.response["Error"]["Code"])
    sqs.purge_queue(QueueUrl=url)
    seen.append(counts(sqs, url))
    sqs.send_message(QueueUrl=url, MessageBody="after purge")
    seen.append(bodies(receive(sqs, url)))
    return seen


def test_visibility_timeouts_delays_and_receipt_handles_answer_as_moto_does():
    moto, indexed = run_both(visibility_and_delay)
    assert indexed == moto
    # The scenario's answers are what SQS gives, so a patch cannot agree by answering nothing.
    assert moto[0]["ApproximateNumberOfMessagesDelayed"] == "1"
    assert moto[1] == ["m0", "m1"] and moto[3] == ["m2", "m3", "m4"] and moto[4] == []
    assert moto[5] == ["m0", "m1", "m2", "m3", "m4"] and moto[6] == ["2"] * 5


def redrive(sqs: Any, clock: Clock) -> list[Any]:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 2})
    url = sqs.create_queue(
        QueueName="q", Attributes={"VisibilityTimeout": "10", "RedrivePolicy": policy}
    )["QueueUrl"]
    seen: list[Any] = []
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    sqs.send_message(QueueUrl=url, MessageBody="fine")
    for _ in range(2):
        got = receive(sqs, url)
        seen.append(sorted(bodies(got)))
        for message in got["Messages"]:
            if message["Body"] == "fine":
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        clock.advance(11)
    seen.append(bodies(receive(sqs, url)))  # received twice: moved to the DLQ instead
    seen.append((counts(sqs, url), counts(sqs, dlq)))
    moved = receive(sqs, dlq)
    seen.append(
        [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in moved["Messages"]]
    )
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=moved["Messages"][0]["ReceiptHandle"])
    seen.append(counts(sqs, dlq))
    seen.append(
        json.loads(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
                "RedrivePolicy"
            ]
        )
    )
    return seen


def test_redrive_to_the_dead_letter_queue_answers_as_moto_does():
    moto, indexed = run_both(redrive)
    assert indexed == moto
    assert moto[2] == [] and moto[4] == [("poison", "3")]


def fifo(sqs: Any, clock: Clock) -> list[Any]:
    url = sqs.create_queue(
        QueueName="q.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    seen: list[Any] = []
    for group, body in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("a", "a1")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="c", MessageDeduplicationId="d")
    sqs.send_message(QueueUrl=url, MessageBody="y", MessageGroupId="c", MessageDeduplicationId="d")
    seen.append(counts(sqs, url))  # the duplicates were dropped
    first = receive(sqs, url, 1)
    seen.append(bodies(first))
    seen.append(sorted(bodies(receive(sqs, url))))  # not a2: its group is in flight
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["Messages"][0]["ReceiptHandle"])
    seen.append(bodies(receive(sqs, url)))
    clock.advance(301)  # past the deduplication interval: the same body is a new message
    sqs.send_message(QueueUrl=url, MessageBody="b1", MessageGroupId="b")
    seen.append(counts(sqs, url))
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    seen.append({k: v for k, v in attributes.items() if not k.endswith("Timestamp")})
    return seen


def test_fifo_groups_and_deduplication_answer_as_moto_does():
    moto, indexed = run_both(fifo)
    assert indexed == moto
    assert moto[0]["ApproximateNumberOfMessages"] == "4"
    assert moto[1] == ["a1"] and "a2" not in moto[2] and moto[3] == ["a2"]


def test_batch_calls_and_attribute_names_answer_as_moto_does():
    def scenario(sqs: Any, clock: Clock) -> list[Any]:
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        entries = [{"Id": str(n), "MessageBody": f"m{n}"} for n in range(10)]
        sent = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        got = receive(sqs, url)
        handles = [
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
            for n, m in enumerate(got["Messages"][:4])
        ]
        handles.append({"Id": "bad", "ReceiptHandle": "nope"})
        deleted = sqs.delete_message_batch(QueueUrl=url, Entries=handles)
        one = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        return [
            len(sent["Successful"]),
            sorted(bodies(got)),
            sorted(e["Id"] for e in deleted["Successful"]),
            [e["Code"] for e in deleted["Failed"]],
            counts(sqs, url),
            one["Attributes"],
        ]

    moto, indexed = run_both(scenario)
    assert indexed == moto
    assert moto[4]["ApproximateNumberOfMessagesNotVisible"] == "6"


# --- the cost per call ----------------------------------------------------------------------

_WATCHED = (models.__file__, moto_sqs.__file__)


def lines_run(call: Callable[[], Any]) -> int:
    """Python lines executed in moto's SQS model and in the patch while `call()` runs."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in _WATCHED:
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def cost_per_call(sqs: Any, depth: int, fifo: bool) -> dict[str, int]:
    """Lines run by each call on a queue already holding `depth` messages (a standard queue's
    first half of them in flight)."""
    name = f"d{depth}{'.fifo' if fifo else ''}"
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    group = {"MessageGroupId": "g"} if fifo else {}
    for start in range(0, depth, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(n), "MessageBody": f"m{start + n}", **group} for n in range(10)],
        )
    if not fifo:
        # Half of them in flight ahead of the rest, as a `vhs dlq list` pass holds them.
        for _ in range(depth // 20):
            receive(sqs, url)
    got: dict[str, Any] = {}
    cost = {
        "send": lines_run(lambda: sqs.send_message(QueueUrl=url, MessageBody="new", **group)),
        "receive": lines_run(lambda: got.update(receive(sqs, url, 10))),
        "delete": lines_run(
            lambda: sqs.delete_message(
                QueueUrl=url, ReceiptHandle=got["Messages"][-1]["ReceiptHandle"]
            )
        ),
        "attribute": lines_run(
            lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        ),
    }
    if not fifo:
        cost["visibility"] = lines_run(
            lambda: sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=got["Messages"][0]["ReceiptHandle"], VisibilityTimeout=5
            )
        )
    return cost


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_call_costs_the_same_on_a_deep_queue_as_on_a_shallow_one(clock, fifo):
    with mock_aws(), moto_sqs.patched():
        sqs = boto3.client("sqs", region_name="us-east-1")
        shallow = cost_per_call(sqs, 20, fifo)
        deep = cost_per_call(sqs, 1_000, fifo)
    assert deep == shallow


def test_moto_as_it_is_costs_more_on_a_deep_queue(clock):
    """The measure above sees the scans the index removes: without it, every call grows."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        shallow = cost_per_call(sqs, 20, False)
        deep = cost_per_call(sqs, 200, False)
    # (ChangeMessageVisibility's scan stops at the message, here near the front.)
    grows = ("send", "receive", "delete", "attribute")
    assert all(deep[call] > shallow[call] + 100 for call in grows), (shallow, deep)


def test_the_index_is_removed_on_uninstall():
    with moto_sqs.patched():
        assert moto_sqs.installed()
        assert models.Queue.__dict__["add_message"] is moto_sqs._add_message
    assert not moto_sqs.installed()
    assert models.Queue.__dict__["add_message"] is not moto_sqs._add_message


def test_another_moto_release_is_served_as_it_is(monkeypatch):
    """The patch copies one release's receive code: under any other release nothing is
    patched, so moto answers as itself (slower at depth, never from a stale copy)."""
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "5.3.0")
    assert moto_sqs.install() is False
    assert not moto_sqs.installed()
    assert models.Queue.__dict__["add_message"] is not moto_sqs._add_message
    with pytest.raises(RuntimeError, match=moto_sqs.PATCHED_MOTO_VERSION), moto_sqs.patched():
        pass
