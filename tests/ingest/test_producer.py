"""The producer puts messages on the queue in batches, with claim checks for large ones, and
the ingest handler reads what it wrote."""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import moto
import pytest

from vhs import shapes
from vhs.ingest.contract import validate_message
from vhs.ingest.staging import claim_check_pointer
from vhs_ops import provisioning
from vhs_ops.admin.producer import LOCAL_MAX_QUEUED, MAX_BATCH_ENTRIES, Producer, is_local_endpoint
from vhs_ops.admin.queues import queue_depth

REGION = "us-east-1"


@pytest.fixture
def queue() -> Any:
    with moto.mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        provisioning.create_bucket(s3, "staging-bucket", REGION)
        queue_url, _ = provisioning.create_ingest_queues(sqs, queue_name="in", dlq_name="dlq")
        yield sqs, s3, queue_url


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    out = []
    while batch := sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages"):
        out += batch
    return out


def test_sends_in_batches_of_ten(queue):
    sqs, _s3, url = queue
    calls: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch",
        lambda params, **_: calls.append(len(params["Entries"])),
    )
    messages = [
        {"id": f"r{n}", "updated_at": "2026-01-01T00:00:00Z", "record": n} for n in range(25)
    ]
    report = Producer(url, sqs_client=sqs).send(messages)
    assert report.ok and report.sent == 25
    assert calls == [MAX_BATCH_ENTRIES, MAX_BATCH_ENTRIES, 5]
    bodies = sorted(
        (json.loads(m["Body"]) for m in receive_all(sqs, url)), key=lambda b: b["record"]
    )
    assert bodies == messages


def test_large_messages_go_by_claim_check_in_the_extended_client_format(queue):
    sqs, s3, url = queue
    big = {"id": "big", "updated_at": "2026-01-01T00:00:00Z", "record": {"text": "x" * 2_000_000}}
    producer = Producer(url, sqs_client=sqs, s3_client=s3, staging_bucket="staging-bucket")
    report = producer.send(
        [big, {"id": "small", "updated_at": "2026-01-01T00:00:00Z", "record": 1}]
    )
    assert report.ok and report.claim_checks == 1 and report.sent == 2
    received = {
        m.get("MessageAttributes", {}).get("ExtendedPayloadSize") is not None: m
        for m in receive_all(sqs, url)
    }
    letter = received[True]
    attributes = {
        name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
        for name, value in letter["MessageAttributes"].items()
    }
    pointer = claim_check_pointer(json.loads(letter["Body"]), attributes)
    payload = s3.get_object(Bucket=pointer.bucket, Key=pointer.key)["Body"].read()
    assert json.loads(payload) == big
    assert int(letter["MessageAttributes"]["ExtendedPayloadSize"]["StringValue"]) == len(payload)


def test_batches_never_exceed_the_request_size_limit(queue):
    sqs, _s3, url = queue
    sizes: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch",
        lambda params, **_: sizes.append(
            sum(len(e["MessageBody"].encode()) for e in params["Entries"])
        ),
    )
    medium = [
        {"id": f"m{n}", "updated_at": "2026-01-01T00:00:00Z", "record": "y" * 300_000}
        for n in range(7)
    ]
    report = Producer(url, sqs_client=sqs).send(medium)
    assert report.ok and report.sent == 7
    assert max(sizes) <= shapes.INGEST.max_message_bytes and len(sizes) >= 3


def test_invalid_messages_are_reported_with_their_field_and_not_sent(queue):
    sqs, _s3, url = queue
    report = Producer(url, sqs_client=sqs).send(
        [
            {"id": "ok", "updated_at": "2026-01-01T00:00:00Z", "record": 1},
            {"id": "", "updated_at": "x"},
        ]
    )
    assert report.sent == 1
    [refusal] = report.refused
    assert (refusal.line, refusal.field) == (2, "id") and not report.not_sent
    assert len(receive_all(sqs, url)) == 1


def test_unvalidated_sending_passes_poison_through(queue):
    sqs, _s3, url = queue
    report = Producer(url, sqs_client=sqs, validate=False).send([{"not": "a message"}])
    assert report.ok and report.sent == 1
    [message] = receive_all(sqs, url)
    with pytest.raises(ValueError):
        validate_message(json.loads(message["Body"]))


def test_failed_batch_entries_are_retried(queue):
    sqs, _s3, url = queue
    failed_once: set[str] = set()

    def fail_first_entry_once(
        http_response: Any = None, parsed: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if parsed is None or failed_once:
            return
        entry = parsed["Successful"].pop(0)
        failed_once.add(entry["Id"])
        parsed.setdefault("Failed", []).append(
            {
                "Id": entry["Id"],
                "SenderFault": False,
                "Code": "InternalError",
                "Message": "retry me",
            }
        )

    sqs.meta.events.register("after-call.sqs.SendMessageBatch", fail_first_entry_once)
    messages = [
        {"id": f"r{n}", "updated_at": "2026-01-01T00:00:00Z", "record": n} for n in range(3)
    ]
    report = Producer(url, sqs_client=sqs).send(messages)
    assert failed_once and report.ok and report.sent == 3
    # The first attempt really sent it; the retry sends it again: at least once, never lost.
    assert {json.loads(m["Body"])["id"] for m in receive_all(sqs, url)} == {"r0", "r1", "r2"}


T = "2026-01-01T00:00:00Z"
# Lines the handler refuses although json.loads takes them (and json.dumps would change them).
TRICKY = {
    "duplicate key": (b'{"id":"d","updated_at":"%s","record":{"a":1,"a":2}}', "record"),
    "lone surrogate": (b'{"id":"s","updated_at":"%s","record":"\\ud800"}', "record"),
    "NaN": (b'{"id":"n","updated_at":"%s","record":NaN}', "record"),
    "1e400": (b'{"id":"i","updated_at":"%s","record":1e400}', "record"),
    "not UTF-8": (b'{"id":"u","updated_at":"%s","record":"\xff"}', "body"),
}


def lines(*texts: bytes) -> list[tuple[int, bytes]]:
    return [(n, text.replace(b"%s", T.encode())) for n, text in enumerate(texts, start=1)]


def test_a_line_the_handler_would_refuse_is_refused_with_its_field_and_the_rest_go(queue):
    sqs, _s3, url = queue
    good = b'{"id":"ok","updated_at":"%s","record":{"a":1}}'
    sent = lines(good, *(text for text, _ in TRICKY.values()), good)
    report = Producer(url, sqs_client=sqs).send_lines(sent)
    assert [(r.line, r.field) for r in report.refused] == [
        (n, field) for n, (_, field) in enumerate(TRICKY.values(), start=2)
    ]
    assert "duplicate key 'a'" in report.refused[0].reason
    assert (report.sent, report.not_sent) == (2, [])
    assert [m["Body"].encode() for m in receive_all(sqs, url)] == [sent[0][1], sent[-1][1]]


def test_without_validation_every_line_goes_byte_for_byte(queue):
    """--no-validate sends each line as it is: nothing parsed, nothing re-serialised. A line
    SQS cannot carry (not UTF-8) goes as a claim check whose payload is the line's bytes."""
    sqs, s3, url = queue
    sent = lines(*(text for text, _ in TRICKY.values()), b'{"id":"x"}\t ')
    producer = Producer(
        url, sqs_client=sqs, s3_client=s3, staging_bucket="staging-bucket", validate=False
    )
    report = producer.send_lines(sent)
    assert report.ok and (report.sent, report.claim_checks) == (len(sent), 1)
    received = []
    for message in receive_all(sqs, url):
        body = json.loads(message["Body"]) if message["Body"].startswith("[") else None
        pointer = claim_check_pointer(body, message.get("MessageAttributes", {}))
        if pointer is None:
            received.append(message["Body"].encode())
        else:
            received.append(s3.get_object(Bucket=pointer.bucket, Key=pointer.key)["Body"].read())
    assert sorted(received) == sorted(text for _, text in sent)


def test_a_line_that_cannot_be_staged_is_reported_and_the_rest_still_go(queue):
    sqs, _s3, url = queue
    sent = lines(b'{"id":"u","record":"\xff"}', b'{"id":"ok"}')
    report = Producer(url, sqs_client=sqs, validate=False).send_lines(sent)
    [unsent] = report.not_sent
    assert unsent.line == 1 and "no staging bucket" in unsent.reason
    assert report.sent == 1 and [m["Body"] for m in receive_all(sqs, url)] == ['{"id":"ok"}']


def test_a_message_that_is_not_json_text_is_refused_not_a_crash(queue):
    sqs, _s3, url = queue
    messages = [
        {"id": "s", "updated_at": T, "record": "\ud800"},
        {"id": "ok", "updated_at": T, "record": 1},
    ]
    for validate in (True, False):
        report = Producer(url, sqs_client=sqs, validate=validate).send(messages)
        assert [(r.line, r.field) for r in report.refused] == [(1, "body")]
        assert report.sent == 1


# --- flow control and stopping (vhs send against the local stack) -------------------------


def numbered(count: int) -> list[tuple[int, bytes]]:
    return [
        (n, json.dumps({"id": f"f{n}", "updated_at": T, "record": n}).encode())
        for n in range(1, count + 1)
    ]


def held(sqs: Any, url: str) -> int:
    depth = queue_depth(sqs, url)
    return depth.visible + depth.in_flight + depth.delayed


def sent_records(sqs: Any, url: str) -> list[int]:
    return [json.loads(m["Body"])["record"] for m in receive_all(sqs, url)]


def test_flow_control_waits_while_the_queue_is_full_and_never_lets_it_grow_past_the_limit(queue):
    sqs, _s3, url = queue
    depths: list[int] = []
    drained: list[int] = []

    def consumer(waiting_on: int | None) -> None:
        """Called while the producer waits: the queue is the bottleneck; drain some of it."""
        if waiting_on is None:
            return
        depths.append(waiting_on)
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        for message in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        drained.extend(json.loads(m["Body"])["record"] for m in got)

    after_send: list[int] = []
    sqs.meta.events.register(
        "after-call.sqs.SendMessageBatch", lambda **_: after_send.append(held(sqs, url))
    )
    producer = Producer(url, sqs_client=sqs, max_queued=25)
    report = producer.send_lines(numbered(100), waiting=consumer)
    assert report.ok and report.sent == 100 and not report.interrupted
    assert report.queue_waits >= 1 and depths and min(depths) >= 25
    assert max(after_send) <= 25 + MAX_BATCH_ENTRIES - 1  # the room it saw, and no more
    assert sorted(drained + sent_records(sqs, url)) == list(range(1, 101))


def test_without_a_limit_the_producer_never_reads_the_queue_depth(queue):
    sqs, _s3, url = queue
    reads: list[str] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.GetQueueAttributes", lambda **_: reads.append("depth")
    )
    report = Producer(url, sqs_client=sqs).send_lines(numbered(30))
    assert report.sent == 30 and reads == [] and report.queue_waits == 0


def test_a_stop_between_batches_reports_the_line_to_resume_from_and_the_rest_sends_once(queue):
    sqs, _s3, url = queue
    every = numbered(100)
    every[34] = (35, b'{"id": "bad"}')  # refused: counted as accounted for, not sent
    stop = threading.Event()

    def progress(n: int) -> None:
        counted.append(n)
        if sum(counted) >= 42:
            stop.set()  # as Ctrl-C does, from wherever the producer is

    counted: list[int] = []
    first = Producer(url, sqs_client=sqs).send_lines(every, progress=progress, stop=stop)
    assert first.interrupted and first.next_line is not None
    assert first.sent + len(first.refused) == first.next_line - 1 == sum(counted)
    assert [r.line for r in first.refused] == [35]
    rest = [(n, line) for n, line in every if n >= first.next_line]
    second = Producer(url, sqs_client=sqs).send_lines(rest)
    assert not second.interrupted and second.next_line is None
    expected = [n for n in range(1, 101) if n != 35]
    assert sorted(sent_records(sqs, url)) == expected  # each line once: none lost, none twice


def test_a_stop_while_waiting_on_a_full_queue_leaves_the_batch_in_hand_unsent(queue):
    sqs, _s3, url = queue
    stop = threading.Event()
    waits: list[int | None] = []

    def waiting(depth: int | None) -> None:
        waits.append(depth)
        stop.set()  # Ctrl-C while the queue is the bottleneck

    report = Producer(url, sqs_client=sqs, max_queued=20).send_lines(
        numbered(50), stop=stop, waiting=waiting
    )
    assert report.interrupted and report.sent == 20 and report.next_line == 21
    assert waits == [20] and report.queue_waits == 1
    rest = [(n, line) for n, line in numbered(50) if n >= report.next_line]
    assert Producer(url, sqs_client=sqs).send_lines(rest).sent == 30
    assert sorted(sent_records(sqs, url)) == list(range(1, 51))


def test_flow_control_is_on_by_default_only_against_a_local_endpoint(queue, monkeypatch):
    _sqs, _s3, url = queue
    monkeypatch.setenv("VHS_QUEUE_URL", url)
    monkeypatch.delenv("VHS_STAGING_BUCKET", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    assert Producer.from_env().max_queued is None  # AWS: no limit
    for local in ("http://127.0.0.1:4567", "http://localhost:4567", "http://[::1]:4567"):
        monkeypatch.setenv("AWS_ENDPOINT_URL", local)
        assert Producer.from_env().max_queued == LOCAL_MAX_QUEUED
        assert Producer.from_env(max_queued=0).max_queued is None  # --max-queued 0
        assert Producer.from_env(max_queued=5).max_queued == 5
    assert not is_local_endpoint("https://sqs.eu-west-1.amazonaws.com")
    with pytest.raises(ValueError, match="max_queued"):
        Producer(url, sqs_client=_sqs, max_queued=-1)
