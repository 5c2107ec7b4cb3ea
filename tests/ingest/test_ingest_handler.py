"""The ingest handler, run as Lambda runs it, on in-process moto.

Every fixture in events/ is run through it, then the failure policy: invalid messages go to
the DLQ with their reason and are acknowledged; transient failures are reported as batch item
failures; one message's failure never fails another's.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import random
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import moto
import pytest
from aws_lambda_powertools.utilities.batch import (
    EventType,
)
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError

from vhs import VersionedHybridStore, shapes
from vhs.errors import RecordNotFound
from vhs.ingest.batch import batch_response
from vhs.ingest.deadletter import (
    ERROR_FIELD,
    ERROR_MESSAGE,
    ERROR_TYPE,
    FIRST_SEEN,
    SOURCE_MESSAGE_ID,
)
from vhs.ingest.ingestor import MAX_MESSAGE_BYTES, IngestResult
from vhs_ops import provisioning
from vhs_ops.local.invoke import LambdaContext, load_handler
from vhs_testing.backends import atomic_inprocess_dynamodb
from vhs_testing.batches import answered_alike, processed
from vhs_testing.calls import count_calls
from vhs_testing.events import EVENTS, handler_module, load, message_event

BUCKET = "vhs-local-bodies"
STAGING = "vhs-local-staging"  # the fixtures' staging bucket
P = shapes.STAGING_PREFIX  # where producers stage
REGION = "us-east-1"


class Stack:
    def __init__(self) -> None:
        self.s3 = boto3.client("s3", region_name=REGION)
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        provisioning.create_store_resources(
            self.dynamodb, self.s3, table_name="records", bucket_name=BUCKET, region=REGION
        )
        provisioning.create_bucket(self.s3, STAGING, REGION)
        self.dlq_url = self.sqs.create_queue(
            QueueName="dlq", Attributes=shapes.INGEST.dlq_attributes()
        )["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.queue_url = self.sqs.create_queue(
            QueueName="ingest", Attributes=shapes.INGEST.queue_attributes(dlq_arn)
        )["QueueUrl"]
        self.store = VersionedHybridStore(
            "records", BUCKET, s3_client=self.s3, dynamodb_client=self.dynamodb
        )

    def env(self) -> dict[str, str]:
        return {
            "VHS_TABLE_NAME": "records",
            "VHS_BUCKET_NAME": BUCKET,
            "VHS_DLQ_URL": self.dlq_url,
            "VHS_STAGING_BUCKET": STAGING,
            "VHS_STAGING_PREFIX": shapes.STAGING_PREFIX,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "VHS",
        }

    def dead_letters(self) -> list[dict[str, Any]]:
        found = []
        while True:
            response = self.sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
            )
            messages = response.get("Messages", [])
            if not messages:
                return found
            found += messages


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    with moto.mock_aws(), atomic_inprocess_dynamodb():
        created = Stack()
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        handler_module().ingestor.cache_clear()
        yield created
        handler_module().ingestor.cache_clear()


def run(event: dict[str, Any]) -> dict[str, Any]:
    return load_handler("ingest")(event, LambdaContext(function_name="vhs-ingest"))


def failures(response: dict[str, Any]) -> set[str]:
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}


def stage(stack: Stack, key: str, body: bytes, content_type: str = "application/json") -> None:
    stack.s3.put_object(Bucket=STAGING, Key=key, Body=body, ContentType=content_type)


# --- every fixture ------------------------------------------------------------------------


def test_fixture_small_record(stack):
    assert failures(run(load("sqs-small-record"))) == set()
    assert stack.store.get("b1000001").json()["title"] == "Moby-Dick"


def test_fixture_body_base64(stack):
    assert failures(run(load("sqs-body-base64"))) == set()
    record = stack.store.get("marc-0001")
    assert record.content_type == "application/marcxml+xml"
    assert record.body.startswith(b"<record>")


def test_fixture_delete(stack):
    run(load("sqs-small-record"))
    assert failures(run(load("sqs-delete"))) == set()
    with pytest.raises(LookupError):
        stack.store.get("b1000001")


def test_a_purge_message_drops_the_history_at_once(stack):
    put = {"id": "p1", "updated_at": "2026-01-01T00:00:00Z", "record": {"n": 1}}
    purge = {"id": "p1", "updated_at": "2026-01-02T00:00:00Z", "deleted": True, "purge": True}
    assert failures(run(message_event(put))) == set()
    assert failures(run(message_event(purge))) == set()
    with pytest.raises(LookupError):
        stack.store.get("p1", version=1)
    assert [v.version for v in stack.store.history("p1")] == [2]


def test_fixture_mixed_batch(stack):
    assert failures(run(load("sqs-mixed-batch"))) == set()
    assert stack.store.get("b2000001").json() == {"title": "Middlemarch", "edition": 2}
    assert [v.version for v in stack.store.history("b2000002")] == [1]
    assert stack.store.history("b2000003")[-1].deleted
    assert stack.dead_letters() == []


def test_fixture_poison_goes_to_the_dlq_with_reasons_and_is_acknowledged(stack):
    event = load("sqs-poison")
    assert failures(run(event)) == set()  # acknowledged: not retried
    letters = {
        m["MessageAttributes"][SOURCE_MESSAGE_ID]["StringValue"]: m for m in stack.dead_letters()
    }
    assert set(letters) == {r["messageId"] for r in event["Records"]}
    fields = {mid: m["MessageAttributes"][ERROR_FIELD]["StringValue"] for mid, m in letters.items()}
    by_body = {r["messageId"]: r["body"] for r in event["Records"]}
    assert sorted(fields.values()) == ["body", "colour", "id", "record", "updated_at"]
    # Each reason says what is wrong with that field (the dead letter keeps it whole).
    reasons = {
        "body": "not valid JSON",
        "colour": "unknown field",
        "updated_at": "no UTC offset",
        "record": "exactly one of record, body_base64, record_location, deleted",
        "id": "must not be empty",
    }
    for mid, letter in letters.items():
        assert letter["Body"] == by_body[mid]  # the original message, unchanged
        attributes = letter["MessageAttributes"]
        assert attributes[ERROR_TYPE]["StringValue"] == "InvalidMessage"
        assert reasons[fields[mid]] in attributes[ERROR_MESSAGE]["StringValue"]
        assert attributes[FIRST_SEEN]["StringValue"].startswith("2026-")


@pytest.mark.parametrize("name", ["sqs-claim-check", "sqs-claim-check-legacy"])
def test_fixture_claim_checks_are_resolved(stack, name):
    big = {"title": "A Very Long Record", "notes": ["n" * 100] * 12_000}
    payload = {"id": "claim-1", "updated_at": "2026-11-01T09:00:00Z", "record": big}
    stage(stack, shapes.STAGING_PREFIX + "claim-checks/example.json", json.dumps(payload).encode())
    assert failures(run(load(name))) == set()
    assert stack.store.get("claim-1").json() == big


def test_fixture_record_location(stack):
    body = bytes(random.Random(1).getrandbits(8) for _ in range(200_000))
    stage(stack, P + "scan-0001.tiff", body, "image/tiff")
    assert failures(run(load("sqs-record-location"))) == set()
    record = stack.store.get("scan-0001.tiff")
    assert record.body == body and record.content_type == "image/tiff"


def test_every_fixture_is_covered():
    tested = {
        "sqs-small-record",
        "sqs-body-base64",
        "sqs-delete",
        "sqs-mixed-batch",
        "sqs-poison",
        "sqs-claim-check",
        "sqs-claim-check-legacy",
        "sqs-record-location",
    }
    # SAM's generated events, one per function's source: tests/local/test_invoke.py runs each.
    sam_generated = {
        "sam-sqs-receive-message",
        "sam-dynamodb-update",
        "sam-cloudwatch-scheduled-event",
        "sam-read-api-get",
    }
    # The reindex worker's first invocation of a segment: tests/changes/test_reindex.py runs it.
    reindex = {"reindex-segment"}
    assert {p.stem for p in EVENTS.glob("*.json")} == tested | sam_generated | reindex


# --- the failure policy -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("", "body"),
        ("[1, 2", "body"),
        ('"a string"', "body"),
        ({"updated_at": "2026-01-01T00:00:00Z", "record": 1}, "id"),
        ({"id": "x", "record": 1}, "updated_at"),
        ({"id": "x", "updated_at": 1767225600, "record": 1}, "updated_at"),
        ({"id": "x", "updated_at": "2999-01-01T00:00:00Z", "record": 1}, "updated_at"),
        ({"id": "x", "updated_at": "2026-01-01T00:00:00Z"}, "record"),
        ({"id": "x", "updated_at": "2026-01-01T00:00:00Z", "body_base64": "%%%"}, "body_base64"),
        ({"id": "x", "updated_at": "2026-01-01T00:00:00Z", "deleted": False}, "deleted"),
        (
            {"id": "x", "updated_at": "2026-01-01T00:00:00Z", "record": {"n": float("inf")}},
            "record",
        ),
        (
            {"id": "x", "updated_at": "2026-01-01T00:00:00Z", "record": 1, "content_type": "a/b"},
            "content_type",
        ),
        (
            {"id": "x", "updated_at": "2026-01-01T00:00:00Z", "record_location": "https://x/y"},
            "record_location",
        ),
        (
            {
                "id": "x",
                "updated_at": "2026-01-01T00:00:00Z",
                "record_location": "s3://elsewhere/x",
            },
            "record_location",
        ),
        (
            {
                "id": "x",
                "updated_at": "2026-01-01T00:00:00Z",
                "record_location": f"s3://{STAGING}/{shapes.STAGING_PREFIX}missing",
            },
            "record_location",
        ),
        (
            {
                "id": "x",
                "updated_at": "2026-01-01T00:00:00Z",
                "record_location": f"s3://{BUCKET}/bodies/x",
            },
            "record_location",
        ),
    ],
)
def test_invalid_messages_are_dead_lettered_with_the_field_named(stack, body, field):
    response = run(message_event(body))
    assert failures(response) == set()
    [letter] = stack.dead_letters()
    assert letter["MessageAttributes"][ERROR_FIELD]["StringValue"] == field


def test_claim_checks_outside_staging_or_missing_are_dead_lettered(stack):
    foreign = [
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        {"s3BucketName": BUCKET, "s3Key": "x"},
    ]
    missing = [
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        {"s3BucketName": STAGING, "s3Key": shapes.STAGING_PREFIX + "nope.json"},
    ]
    flagged_only = {"id": "x", "updated_at": "2026-01-01T00:00:00Z", "record": 1}
    event = message_event(foreign, missing, flagged_only)
    event["Records"][2]["messageAttributes"] = {
        "ExtendedPayloadSize": {
            "stringValue": "10",
            "dataType": "Number",
            "stringListValues": [],
            "binaryListValues": [],
        }
    }
    assert failures(run(event)) == set()
    letters = stack.dead_letters()
    types = sorted(m["MessageAttributes"][ERROR_TYPE]["StringValue"] for m in letters)
    assert types == ["InvalidMessage", "InvalidMessage", "MissingStagedObject"]
    # The producer's claim-check flag travels with the dead letter, so a redrive resolves it.
    flagged = [m for m in letters if "ExtendedPayloadSize" in m["MessageAttributes"]]
    assert len(flagged) == 1


def test_an_invalid_payload_behind_a_claim_check_names_the_payload_field(stack):
    stage(
        stack,
        P + "claim-checks/bad.json",
        json.dumps({"id": "x", "updated_at": "nope", "record": 1}).encode(),
    )
    pointer = [
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        {"s3BucketName": STAGING, "s3Key": P + "claim-checks/bad.json"},
    ]
    run(message_event(pointer))
    [letter] = stack.dead_letters()
    assert letter["MessageAttributes"][ERROR_FIELD]["StringValue"] == "payload.updated_at"


def test_transient_failures_are_reported_and_do_not_fail_the_others(stack):
    handler_module().ingestor()  # configure, then make one id's writes throttle
    store_client = handler_module().ingestor().store.index.dynamodb

    def throttle(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["id"]["S"] == "throttled":
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem"
            )

    store_client.meta.events.register("provide-client-params.dynamodb.UpdateItem", throttle)
    event = message_event(
        {"id": "ok-1", "updated_at": "2026-01-01T00:00:00Z", "record": 1},
        {"id": "throttled", "updated_at": "2026-01-01T00:00:00Z", "record": 2},
        "not json",
        {"id": "ok-2", "updated_at": "2026-01-01T00:00:00Z", "record": 3},
    )
    response = run(event)
    assert failures(response) == {"message-1"}
    assert stack.store.get("ok-1").json() == 1 and stack.store.get("ok-2").json() == 3
    assert len(stack.dead_letters()) == 1
    with pytest.raises(LookupError):
        stack.store.get("throttled")
    # Redelivered after the throttling passes, it is stored.
    store_client.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", throttle)
    assert failures(run({"Records": [event["Records"][1]]})) == set()
    assert stack.store.get("throttled").json() == 2


def test_a_staged_object_the_function_may_never_read_is_dead_lettered_with_its_reason(stack):
    """A payload encrypted under a KMS key the function has no use of is refused for good
    (UnreadableStagedObject, dead-lettered at once); any other 403 (a permission a deploy
    will fix) is retried, and does not fail the messages beside it."""
    s3 = handler_module().ingestor().s3
    KEYS = [f"{P}claim-checks/{name}.json" for name in ("kms", "denied", "ok")]
    for key in KEYS:
        body = {"id": key.split("/")[-1][:-5], "updated_at": "2026-01-01T00:00:00Z", "record": 1}
        stack.s3.put_object(Bucket=STAGING, Key=key, Body=json.dumps(body))
    denials = {
        P + "claim-checks/kms.json": "User is not authorized to perform kms:Decrypt on the key",
        P + "claim-checks/denied.json": "Access Denied",
    }

    def deny(params: dict[str, Any], **_: Any) -> None:
        if params["Key"] in denials:
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": denials[params["Key"]]}},
                "GetObject",
            )

    s3.meta.events.register("provide-client-params.s3.GetObject", deny, unique_id="t-deny")
    try:
        pointers = [
            [
                "software.amazon.payloadoffloading.PayloadS3Pointer",
                {"s3BucketName": STAGING, "s3Key": key},
            ]
            for key in KEYS
        ]
        response = run(message_event(*pointers))
    finally:
        s3.meta.events.unregister("provide-client-params.s3.GetObject", unique_id="t-deny")
    assert failures(response) == {"message-1"}  # retried
    [letter] = stack.dead_letters()
    attributes = letter["MessageAttributes"]
    assert attributes[ERROR_TYPE]["StringValue"] == "UnreadableStagedObject"
    assert "kms:Decrypt" in attributes[ERROR_MESSAGE]["StringValue"]
    assert stack.store.get("ok").json() == 1


def test_a_failed_dead_letter_is_retried_not_lost(stack):
    handler_module().ingestor().dlq_url = stack.dlq_url + "-does-not-exist"
    response = run(
        message_event("not json", {"id": "fine", "updated_at": "2026-01-01T00:00:00Z", "record": 1})
    )
    assert failures(response) == {"message-0"}
    # When every message of a batch fails, Powertools fails the invocation instead, so that
    # Lambda backs off; the messages return to the queue either way.
    with pytest.raises(BatchProcessingError):
        run(message_event("not json"))


@pytest.mark.parametrize("failing", [set(), {1}, {0, 2}, {0, 1, 2}])
def test_the_batch_response_is_what_powertools_batch_processor_answers(failing):
    """The response is read off the batch's results in the pass that made them; Powertools'
    BatchProcessor, given those results to report in a second pass, answers the same: the
    failed messages in order, or, when every message failed, the same error and message."""
    records = [{"messageId": f"m{n}", "body": "{}"} for n in range(3)]
    results: list[IngestResult | BaseException] = [
        RuntimeError(f"failed {n}") if n in failing else IngestResult(f"m{n}", "a", "stored")
        for n in range(3)
    ]
    by_id = dict(zip([r["messageId"] for r in records], results, strict=True))

    def record_handler(record: Any) -> Any:
        result = by_id[record.message_id]
        if isinstance(result, BaseException):
            raise result
        return result.outcome

    error = answered_alike(
        lambda: batch_response(records, results),
        lambda: processed(EventType.SQS, records, record_handler),
    )
    assert (error is not None) == (len(failing) == len(records))
    if error is not None:
        assert [e for _, e, _ in error.child_exceptions] == results


def test_an_oversized_dead_letter_is_staged_as_a_claim_check(stack):
    body = "x" * (MAX_MESSAGE_BYTES - 50)  # not JSON, and too big to resend with attributes
    assert failures(run(message_event(body))) == set()
    [letter] = stack.dead_letters()
    kind, pointer = json.loads(letter["Body"])
    assert kind == "software.amazon.payloadoffloading.PayloadS3Pointer"
    staged = stack.s3.get_object(Bucket=pointer["s3BucketName"], Key=pointer["s3Key"])
    assert staged["Body"].read().decode() == body
    assert letter["MessageAttributes"]["ExtendedPayloadSize"]["StringValue"] == str(len(body))


def test_the_result_does_not_depend_on_message_order_within_a_batch(stack):
    def bodies(prefix: str) -> list[dict[str, Any]]:
        out = []
        for n in range(30):
            rid = f"{prefix}order-{n % 4}"
            if n % 7 == 6:
                out.append({"id": rid, "updated_at": f"2026-01-01T00:{n:02d}:00Z", "deleted": True})
            else:
                stamp = f"2026-01-01T00:{n % 9:02d}:00Z"
                out.append({"id": rid, "updated_at": stamp, "record": {"n": n % 5}})
        return out

    from vhs_testing.model import Delete, Put, winner

    def as_write(message: dict[str, Any]) -> Put | Delete:
        when = datetime.fromisoformat(message["updated_at"])
        if message.get("deleted"):
            return Delete(message["id"], when)
        return Put(message["id"], message["record"], when)

    for seed in range(3):
        shuffled = bodies(f"s{seed}-")
        random.Random(seed).shuffle(shuffled)
        assert failures(run(message_event(*shuffled))) == set()
        for n in range(4):
            rid = f"s{seed}-order-{n}"
            # The independent model's winner, not just the same state in every order.
            best = winner(as_write(m) for m in shuffled if m["id"] == rid)
            try:
                state = stack.store.get(rid).body
            except LookupError:
                state = None
            assert state == best.body, (seed, rid, best)


def test_redelivery_is_idempotent(stack):
    event = load("sqs-mixed-batch")
    run(event)
    before = {
        rid: [v.version for v in stack.store.history(rid)] for rid in ("b2000001", "b2000002")
    }
    assert failures(run(event)) == set()
    after = {rid: [v.version for v in stack.store.history(rid)] for rid in ("b2000001", "b2000002")}
    assert before == after


def test_logs_are_json_with_message_and_record_ids(stack):
    powertools_logger = handler_module().logger
    buffer = io.StringIO()
    # A second handler with Powertools' own JSON formatter: its stdout handler was bound to
    # whatever stdout was when the module was first imported.
    extra = logging.StreamHandler(buffer)
    extra.setFormatter(powertools_logger.registered_formatter)
    powertools_logger.addHandler(extra)
    try:
        run(load("sqs-small-record"))
    finally:
        powertools_logger.removeHandler(extra)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    [stored] = [line for line in lines if line.get("message") == "stored"]
    assert stored["record_id"] == "b1000001"
    assert stored["message_id"] == load("sqs-small-record")["Records"][0]["messageId"]
    assert stored["level"] == "INFO" and stored["function_name"] == "vhs-ingest"


def test_body_base64_round_trips_binary(stack):
    raw = bytes(range(256))
    run(
        message_event(
            {
                "id": "bin",
                "updated_at": "2026-01-01T00:00:00Z",
                "body_base64": base64.b64encode(raw).decode(),
            }
        )
    )
    assert stack.store.get("bin").body == raw


def test_metrics_count_each_outcome_and_bytes(stack, capsys):
    record = {"id": "m", "updated_at": "2026-01-01T00:00:00Z", "record": 1}
    raw = {"id": "blob", "updated_at": "2026-01-01T00:00:00Z", "body_base64": "AAECAw=="}
    run(message_event(record, record, raw, "not json"))
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [metrics] = [m for m in emf if "stored" in m]
    counts = {k: metrics[k] for k in ("stored", "unchanged", "invalid", "retried", "bytes_stored")}
    flat = {k: v[0] if isinstance(v, list) else v for k, v in counts.items()}
    assert flat == {"stored": 2, "unchanged": 1, "invalid": 1, "retried": 0, "bytes_stored": 4}
    assert metrics["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "VHS"


def test_one_message_is_parsed_and_validated_once(stack, monkeypatch):
    """One message's path through the handler parses its body, validates it and encodes its
    record once each: the batch reads every record before coalescing, and the message is
    written from that reading, not read again."""
    from vhs.codec import encode_record
    from vhs.ingest.contract import validate_message
    from vhs.strict_json import parse_json_body

    # The real functions, counted wherever a module of the handler holds them.
    handler_module()
    calls = count_calls(monkeypatch, parse_json_body, validate_message, encode_record)

    message = {"id": "once", "updated_at": "2026-01-01T00:00:00Z", "record": {"n": 1}}
    assert failures(run(message_event(message))) == set()
    assert stack.store.get("once").json() == {"n": 1}
    assert calls == {"parse_json_body": 1, "validate_message": 1, "encode_record": 1}


def test_one_process_runs_the_handler_against_each_stack_its_environment_names(
    stack, monkeypatch, capsys
):
    """`vhs local up`, `vhs invoke` and tests run a handler for several stacks in one process:
    whatever the handler built for one stack's environment (the ingestor and its clients, the
    metrics namespace) is built again when the environment names another, with nothing
    cleared by hand."""
    provisioning.create_store_resources(
        stack.dynamodb, stack.s3, table_name="records-2", bucket_name="bodies-2", region=REGION
    )
    second = VersionedHybridStore(
        "records-2", "bodies-2", s3_client=stack.s3, dynamodb_client=stack.dynamodb
    )

    def held(store: VersionedHybridStore) -> list[str]:
        found = []
        for record_id in ("first", "second", "third"):
            with contextlib.suppress(RecordNotFound):
                found.append(store.get(record_id).id)
        return found

    def put(record_id: str) -> set[str]:
        record = {"id": record_id, "updated_at": "2026-01-01T00:00:00Z", "record": 1}
        assert failures(run(message_event(record))) == set()
        emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
        return {m["_aws"]["CloudWatchMetrics"][0]["Namespace"] for m in emf}

    assert put("first") == {"VHS"}
    monkeypatch.setenv("VHS_TABLE_NAME", "records-2")
    monkeypatch.setenv("VHS_BUCKET_NAME", "bodies-2")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "VHS-second")
    assert put("second") == {"VHS-second"}
    monkeypatch.setenv("VHS_TABLE_NAME", "records")
    monkeypatch.setenv("VHS_BUCKET_NAME", BUCKET)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "VHS")
    assert put("third") == {"VHS"}
    assert held(stack.store) == ["first", "third"]
    assert held(second) == ["second"]


def test_the_handler_keeps_what_it_built_while_its_environment_stays_the_same(stack, monkeypatch):
    built = handler_module().ingestor()
    record = {"id": "kept", "updated_at": "2026-01-01T00:00:00Z", "record": 1}
    for _ in range(2):  # an invocation changes nothing that configures the function
        assert failures(run(message_event(record))) == set()
    assert handler_module().ingestor() is built
    monkeypatch.setenv("SOMETHING_ELSE", "changed")  # configures no function
    assert handler_module().ingestor() is built
    monkeypatch.setenv("VHS_DLQ_URL", stack.dlq_url + "?again")
    assert handler_module().ingestor() is not built
