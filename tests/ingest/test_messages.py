"""The message contract: the validator the handler runs and the JSON Schema shipped to
producers must agree on every case."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from vhs import shapes
from vhs.ingest.contract import InvalidMessage, read_message, schema_path, validate_message
from vhs.ingest.ingestor import Ingestor
from vhs.ingest.staging import S3Location, StagingLocation, claim_check_pointer
from vhs_ops import provisioning
from vhs_testing.backends import Backend

T = "2026-01-01T00:00:00Z"
S3 = {"bucket": "b", "key": "k"}
VALID = [
    {"id": "a", "updated_at": T, "record": {"title": "x"}},
    {"id": "a", "updated_at": T, "record": None},
    {"id": "a", "updated_at": T, "record": [1, 2, 3]},
    {"id": "日本語", "updated_at": "2026-01-01T09:00:00+09:00", "record": "text"},
    {"id": "a", "updated_at": T, "body_base64": "AAEC"},
    {"id": "a", "updated_at": T, "body_base64": "AAEC", "content_type": "image/tiff"},
    {"id": "a", "updated_at": T, "record_location": "s3://b/k/ey"},
    {"id": "a", "updated_at": T, "record_location": "s3://b/k", "content_type": "text/xml"},
    {"id": "a", "updated_at": T, "deleted": True},
    {"id": "a", "updated_at": T, "deleted": True, "purge": True},
    {"id": "a", "updated_at": T, "deleted": True, "purge": False},
    {"id": "a", "updated_at": "2026-01-01T00:00:00.123456789Z", "record": 1},  # Java's Instant
    {"id": "a", "updated_at": T, "record_location": "s3://b/k?x=1#y"},  # all of it is the key
    # Parts: claim checks of staged objects, beside any kind of put.
    {
        "id": "a",
        "updated_at": T,
        "record": 1,
        "parts": {"scan": {"s3": {"bucket": "b", "key": "k"}}},
    },
    {
        "id": "a",
        "updated_at": T,
        "body_base64": "AA==",
        "parts": {
            "scan.v2": {"s3": {"bucket": "b", "key": "k"}, "content_type": "image/tiff"},
            "ocr_text-1": {"s3": {"bucket": "b", "key": "k2"}},
        },
    },
    {"id": "a", "updated_at": T, "record_location": "s3://b/k", "parts": {}},
]
INVALID = [
    ({"updated_at": T, "record": 1}, "id"),
    ({"id": "", "updated_at": T, "record": 1}, "id"),
    ({"id": "   ", "updated_at": T, "record": 1}, "id"),
    ({"id": "a\nb", "updated_at": T, "record": 1}, "id"),
    ({"id": "x" * 257, "updated_at": T, "record": 1}, "id"),
    ({"id": 7, "updated_at": T, "record": 1}, "id"),
    ({"id": "a", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": 1767225600, "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "2026-01-01", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "2026-01-01T00:00:00", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "soon", "record": 1}, "updated_at"),
    # ISO 8601 forms that are not RFC 3339: the format checker refuses them, so must we.
    ({"id": "a", "updated_at": "20260101T000000Z", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "2026-W01-4T00:00:00Z", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "2026-01-01T00:00Z", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "2026-01-01T00:00:00+0100", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": " 2026-01-01T00:00:00Z", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": T}, "record"),
    ({"id": "a", "updated_at": T, "record": 1, "deleted": True}, "record"),
    ({"id": "a", "updated_at": T, "record": 1, "body_base64": "AA=="}, "record"),
    ({"id": "a", "updated_at": T, "deleted": False}, "deleted"),
    ({"id": "a", "updated_at": T, "deleted": "yes"}, "deleted"),
    ({"id": "a", "updated_at": T, "body_base64": 5}, "body_base64"),
    ({"id": "a", "updated_at": T, "record_location": "http://b/k"}, "record_location"),
    ({"id": "a", "updated_at": T, "record_location": "s3://bucket-only"}, "record_location"),
    ({"id": "a", "updated_at": T, "record_location": "S3://b/k"}, "record_location"),
    ({"id": "a", "updated_at": T, "record_location": "s3://b/a\tb"}, "record_location"),
    ({"id": "a", "updated_at": T, "record": 1, "deleted": False}, "deleted"),
    ({"id": "a", "updated_at": T, "record": 1, "content_type": "text/plain"}, "content_type"),
    ({"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": ""}, "content_type"),
    ({"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": None}, "content_type"),
    (
        {"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": "a/b\r\nX: 1"},
        "content_type",
    ),
    ({"id": "a", "updated_at": T, "record": 1, "extra": 1}, "extra"),
    ({"id": "a", "updated_at": T, "deleted": True, "purge": "yes"}, "purge"),
    ({"id": "a", "updated_at": T, "deleted": True, "purge": 1}, "purge"),
    ({"id": "a", "updated_at": T, "deleted": True, "purge": None}, "purge"),
    ({"id": "a", "updated_at": T, "record": 1, "purge": True}, "purge"),
    ({"id": "a", "updated_at": T, "body_base64": "AA==", "purge": False}, "purge"),
    ({"id": "a", "updated_at": T, "record_location": "s3://b/k", "purge": True}, "purge"),
    ({"id": "a", "updated_at": T, "deleted": True, "parts": {}}, "parts"),
    ({"id": "a", "updated_at": T, "record": 1, "parts": []}, "parts"),
    ({"id": "a", "updated_at": T, "record": 1, "parts": {"Scan": {"s3": S3}}}, "parts"),
    ({"id": "a", "updated_at": T, "record": 1, "parts": {"a/b": {"s3": S3}}}, "parts"),
    ({"id": "a", "updated_at": T, "record": 1, "parts": {"x" * 64: {"s3": S3}}}, "parts"),
    (
        {
            "id": "a",
            "updated_at": T,
            "record": 1,
            "parts": {f"p{i}": {"s3": S3} for i in range(17)},
        },
        "parts",
    ),
    ({"id": "a", "updated_at": T, "record": 1, "parts": {"scan": "s3://b/k"}}, "parts.scan"),
    ({"id": "a", "updated_at": T, "record": 1, "parts": {"scan": {}}}, "parts.scan.s3"),
    (
        {"id": "a", "updated_at": T, "record": 1, "parts": {"scan": {"s3": S3, "x": 1}}},
        "parts.scan.x",
    ),
    (
        {"id": "a", "updated_at": T, "record": 1, "parts": {"scan": {"s3": {"bucket": "b"}}}},
        "parts.scan.s3.key",
    ),
    (
        {"id": "a", "updated_at": T, "record": 1, "parts": {"scan": {"s3": {"key": "k"}}}},
        "parts.scan.s3.bucket",
    ),
    (
        {"id": "a", "updated_at": T, "record": 1, "parts": {"scan": {"s3": {**S3, "k": 1}}}},
        "parts.scan.s3.k",
    ),
    (
        {
            "id": "a",
            "updated_at": T,
            "record": 1,
            "parts": {"scan": {"s3": {"bucket": "b", "key": "a\tb"}}},
        },
        "parts.scan.s3.key",
    ),
    (
        {
            "id": "a",
            "updated_at": T,
            "record": 1,
            "parts": {"scan": {"s3": S3, "content_type": ""}},
        },
        "parts.scan.content_type",
    ),
    ([{"id": "a"}], "body"),
    ("just a string", "body"),
    (
        {"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": "a/b\u200b"},
        "content_type",
    ),
    (
        {"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": "text/plain; x=日本"},
        "content_type",
    ),
    ({"id": "a", "updated_at": T, "body_base64": "AA==", "content_type": "text"}, "content_type"),
]


@pytest.fixture(scope="module")
def schema() -> jsonschema.Validator:
    with open(schema_path()) as f:
        document = json.load(f)
    cls = jsonschema.validators.validator_for(document)
    cls.check_schema(document)
    return cls(document, format_checker=cls.FORMAT_CHECKER)


@pytest.mark.parametrize("message", VALID)
def test_valid_messages_pass_both(message, schema):
    validate_message(message)
    schema.validate(message)


@pytest.mark.parametrize(("message", "field"), INVALID)
def test_invalid_messages_fail_both_and_name_the_field(message, field, schema):
    with pytest.raises(InvalidMessage) as raised:
        validate_message(message)
    assert raised.value.field == field
    assert not schema.is_valid(message)


def test_the_schema_and_the_validator_share_the_nesting_limit(schema):
    """The schema writes MAX_DEPTH out as a chain of definitions (levels0..levelsN): a record
    nested to the limit passes both, one level more fails both."""
    from vhs.strict_json import MAX_DEPTH

    def nested(depth: int, container: str) -> object:
        value: object = 1
        for _ in range(depth):
            value = [value] if container == "array" else {"k": value}
        return value

    definitions = schema.schema["$defs"]
    assert schema.schema["properties"]["record"]["$ref"] == f"#/$defs/levels{MAX_DEPTH}"
    assert sorted(definitions) == sorted(f"levels{n}" for n in range(MAX_DEPTH + 1))
    for container in ("array", "object"):
        deepest = {"id": "a", "updated_at": T, "record": nested(MAX_DEPTH, container)}
        validate_message(deepest)
        schema.validate(deepest)
        deeper = {**deepest, "record": nested(MAX_DEPTH + 1, container)}
        with pytest.raises(InvalidMessage) as raised:
            validate_message(deeper)
        assert raised.value.field == "record"
        assert not schema.is_valid(deeper)


def test_purge_goes_with_a_delete_only_and_is_a_boolean():
    assert validate_message({"id": "a", "updated_at": T, "deleted": True, "purge": True}).purge
    assert not validate_message({"id": "a", "updated_at": T, "deleted": True}).purge
    with pytest.raises(InvalidMessage, match="boolean") as raised:
        validate_message({"id": "a", "updated_at": T, "deleted": True, "purge": "true"})
    assert raised.value.field == "purge"
    with pytest.raises(InvalidMessage, match="only goes with deleted") as raised:
        validate_message({"id": "a", "updated_at": T, "record": 1, "purge": True})
    assert raised.value.field == "purge"


# Refused by the validator only: a JSON Schema cannot express them. tests/system/test_bad_input.py
# sends the whole bad-input corpus, these included, through the handler.
BEYOND_THE_SCHEMA = [
    ({"id": "a", "updated_at": T, "record": {"x": float("nan")}}, "record"),
    ({"id": "a", "updated_at": T, "record": [float("inf")]}, "record"),
    ({"id": "a", "updated_at": "0999-12-31T00:00:00Z", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": "9999-12-31T23:00:00-05:00", "record": 1}, "updated_at"),
    ({"id": "a", "updated_at": T, "record_location": "s3://b/" + "k" * 1025}, "record_location"),
]


@pytest.mark.parametrize(("message", "field"), BEYOND_THE_SCHEMA)
def test_what_a_schema_cannot_express_is_refused_by_the_validator(message, field, schema):
    assert schema.is_valid(message)  # else it belongs in INVALID
    with pytest.raises(InvalidMessage) as raised:
        validate_message(message)
    assert raised.value.field == field


def test_invalid_base64_is_refused():
    # JSON Schema's contentEncoding is an annotation only; the validator checks it.
    with pytest.raises(InvalidMessage, match="base64"):
        validate_message({"id": "a", "updated_at": T, "body_base64": "***"})


def test_claim_check_pointers_are_recognised_in_both_class_names():
    for cls in (
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        "com.amazon.sqs.javamessaging.MessageS3Pointer",
    ):
        pointer = claim_check_pointer([cls, {"s3BucketName": "b", "s3Key": "k"}], {})
        assert pointer == S3Location("b", "k")
    assert claim_check_pointer({"id": "a"}, {}) is None
    with pytest.raises(InvalidMessage):
        claim_check_pointer({"id": "a"}, {"SQSLargePayloadSize": {"stringValue": "1"}})
    with pytest.raises(InvalidMessage) as raised:
        claim_check_pointer(
            ["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b"}], {}
        )
    assert raised.value.field == "body.s3Key"


def test_staging_location_refuses_other_buckets_and_prefixes():
    staging = StagingLocation("stage", "in/")
    assert staging.check(S3Location("stage", "in/x"), "f") == S3Location("stage", "in/x")
    for outside in (S3Location("other", "in/x"), S3Location("stage", "out/x")):
        with pytest.raises(InvalidMessage, match="outside the staging location"):
            staging.check(outside, "record_location")


def test_the_handlers_own_dead_letters_are_outside_every_staging_location():
    """dead-letters/ (staged dead letters, receipts) is the ingest function's, beside the
    producers' prefix: no staging location contains it, even one over the whole bucket."""
    for prefix in ("", shapes.STAGING_PREFIX):
        staging = StagingLocation("stage", prefix)
        for key in ("dead-letters/m-1", "dead-letters/receipts/m-1"):
            with pytest.raises(InvalidMessage, match="the ingest function's dead-letters/"):
                staging.check(S3Location("stage", key), "body.s3Key")
        assert staging.contains(S3Location("stage", shapes.STAGING_PREFIX + "x"))
        assert staging.dead_letter_key("m-1") == "dead-letters/m-1"
        assert not staging.contains(S3Location("stage", staging.receipt_key("m-1")))
    assert not shapes.STAGING_PREFIX.startswith(shapes.DEAD_LETTER_STAGING_PREFIX)
    with pytest.raises(ValueError, match="the ingest function's"):
        StagingLocation("stage", "dead-letters/producers/")


def test_the_schemas_content_types_are_the_validators_media_types(schema):
    """One definition of a content type: the schema carries codec's pattern, anchored."""
    from vhs.codec import MEDIA_TYPE_PATTERN

    with open(schema_path()) as f:
        document = json.load(f)
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("content_type"), dict) and "pattern" in node["content_type"]:
                found.append(node["content_type"]["pattern"])
            for value in node.values():
                walk(value)

    walk(document)
    assert found == [f"^(?:{MEDIA_TYPE_PATTERN})$"] * 2


# --- the contract's reasons, and what a read message carries --------------------------------------

# The message contract's reasons and what a read message carries (mutation testing found them
# unpinned: docs/reliability.md, "Mutation testing"). A reason is what the producer reads on the
# dead letter, so its words are part of the contract.
POINTER = "software.amazon.payloadoffloading.PayloadS3Pointer"
STAGING = StagingLocation("stage", shapes.STAGING_PREFIX)


def reason_for(body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(InvalidMessage) as raised:
        validate_message(body)
    return raised.value.field, raised.value.reason


def test_a_deleted_that_is_not_true_is_told_to_be_left_out():
    assert reason_for({"id": "a", "updated_at": T, "record": 1, "deleted": False}) == (
        "deleted",
        "must be true; leave it out for a put",
    )


@pytest.mark.parametrize(
    ("payloads", "named"),
    [
        ({}, "(none)"),
        ({"record": 1, "body_base64": "AA=="}, "(record, body_base64)"),
        (
            {"body_base64": "AA==", "record_location": "s3://b/k", "deleted": True},
            "(body_base64, record_location, deleted)",
        ),
    ],
)
def test_the_payload_count_names_what_was_sent(payloads: dict[str, Any], named: str):
    field, reason = reason_for({"id": "a", "updated_at": T, **payloads})
    assert field == "record"
    assert reason == (
        f"exactly one of record, body_base64, record_location, deleted is required {named}"
    )


def test_a_claim_check_whose_payload_is_a_claim_check_is_refused():
    def fetch(location: S3Location, field: str) -> bytes:
        key = f"{shapes.STAGING_PREFIX}deeper"
        return json.dumps([POINTER, {"s3BucketName": "stage", "s3Key": key}]).encode()

    pointer = [POINTER, {"s3BucketName": "stage", "s3Key": f"{shapes.STAGING_PREFIX}p"}]
    with pytest.raises(InvalidMessage) as raised:
        read_message({"body": json.dumps(pointer)}, staging=STAGING, fetch=fetch)
    assert (raised.value.field, raised.value.reason) == (
        "payload",
        "is itself a claim check: pointers do not nest",
    )


def test_a_read_message_carries_its_content_type_and_record():
    staged = validate_message(
        {"id": "a", "updated_at": T, "record_location": "s3://b/k", "content_type": "text/xml"}
    )
    assert (staged.location, staged.content_type) == (S3Location("b", "k"), "text/xml")
    record = validate_message({"id": "a", "updated_at": T, "record": {"title": "x"}})
    assert (record.record, record.content_type) == ({"title": "x"}, "application/json")


def test_a_staged_body_is_stored_with_the_messages_content_type(inprocess: Backend):
    """The message's content type wins over the staged object's own."""
    provisioning.create_bucket(inprocess.s3, "stage", inprocess.region)
    key = f"{shapes.STAGING_PREFIX}marc"
    inprocess.s3.put_object(Bucket="stage", Key=key, Body=b"<record/>", ContentType="text/plain")
    sqs = inprocess.new_client("sqs")
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    store = inprocess.store()
    worker = Ingestor(store, sqs_client=sqs, dlq_url=dlq_url, staging=STAGING)
    message = {
        "id": "marc-1",
        "updated_at": T,
        "record_location": f"s3://stage/{key}",
        "content_type": "application/marcxml+xml",
    }
    result = worker.handle({"messageId": "m-1", "body": json.dumps(message)})
    assert result.outcome == "stored"
    stored = store.get("marc-1")
    assert (stored.content_type, stored.body) == ("application/marcxml+xml", b"<record/>")
