"""One nesting limit for JSON records (strict_json.MAX_DEPTH), the same on every Python.

Every door refuses a record one level past it, with one reason: a message (its record, its
body_base64 with application/json, a claim check's payload), `vhs send`, `vhs import` (JSON
Lines and a CSV record column), `vhs put`, and `store.put` (a value, or bytes that claim JSON).
A record nested exactly to the limit is stored, read, diffed and carried in its change
notification with a patch. A body past the limit that got in before the doors applied it is
read as "not JSON", with the reason, by every reader: never a RecursionError. These run on the
runtime's Python and on the lowest supported one (tests/lowest.txt): the limit is the store's
own, not the interpreter's.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import boto3
import jsonpatch
import moto
import pytest

from vhs.changes.feed import changes_from_images
from vhs.codec import JSON_CONTENT_TYPE
from vhs.errors import InvalidInput, InvalidMessage, InvalidRecord
from vhs.ingest.contract import first_read, read_message
from vhs.ingest.staging import StagingLocation
from vhs.json_patch import UNREADABLE
from vhs.strict_json import MAX_DEPTH, parse_document, too_deep_reason
from vhs_ops import provisioning
from vhs_ops.admin.producer import Producer
from vhs_testing.backends import Backend
from vhs_testing.records import at

REASON = too_deep_reason()
T = "2026-01-01T00:00:00Z"


def nested(depth: int, leaf: Any = None) -> Any:
    """`depth` arrays, one in another, around `leaf` (none: the innermost is empty)."""
    value: Any = [] if leaf is None else [leaf]
    for _ in range(depth - 1):
        value = [value]
    return value


def text(depth: int) -> str:
    return "[" * depth + "]" * depth


def message(**fields: Any) -> str:
    return json.dumps({"id": "deep", "updated_at": T, **fields})


def raw_message(record_text: str) -> str:
    return f'{{"id": "deep", "updated_at": "{T}", "record": {record_text}}}'


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as raised:
        call(*args, **kwargs)
    return raised.value


def test_the_limit_is_read_from_the_text_the_same_on_every_python() -> None:
    assert parse_document(text(MAX_DEPTH)) == nested(MAX_DEPTH)
    for depth in (MAX_DEPTH + 1, 1_000, 100_000):  # 3.11 refused near 1,000; 3.14 near 64,000
        error = refused(parse_document, text(depth))
        assert (error.field, error.reason) == ("record", REASON)
    # Brackets inside strings are text, not levels.
    bracketed = ["[" * 500, {"k{": "]" * 500}]
    assert parse_document(json.dumps(bracketed)) == bracketed
    # Objects count as arrays do; a key nested past the limit is named by where it is.
    deep_object = '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    assert refused(parse_document, deep_object, "body_base64").field == "body_base64"


def test_every_message_door_refuses_one_level_past_the_limit_naming_the_field() -> None:
    cases = {
        "record": raw_message(text(MAX_DEPTH + 1)),
        "body_base64": message(
            content_type=JSON_CONTENT_TYPE,
            body_base64=base64.b64encode(text(MAX_DEPTH + 1).encode()).decode(),
        ),
    }
    for field, body in cases.items():
        reading = first_read({"body": body}, staging=None)
        assert isinstance(reading, InvalidMessage), field
        assert (reading.field, reading.reason) == (field, REASON)
    # A claim check's payload is read by the same rules, its fields named under "payload.".
    staging = StagingLocation("staging", "")
    pointer = json.dumps(
        [
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": "staging", "s3Key": "claim-checks/deep.json"},
        ]
    )
    payload = raw_message(text(MAX_DEPTH + 1)).encode()
    error = refused(
        read_message,
        {"body": pointer, "messageAttributes": {}},
        staging=staging,
        fetch=lambda location, field: payload,
    )
    assert (error.field, error.reason) == ("payload.record", REASON)
    # To the limit, each is a message ready to store.
    accepted = first_read({"body": raw_message(text(MAX_DEPTH))}, staging=None)
    assert not isinstance(accepted, InvalidMessage)
    assert json.loads(accepted.encoded.data) == nested(MAX_DEPTH)


def test_store_put_refuses_a_value_or_json_bytes_past_the_limit_and_writes_nothing(
    inprocess: Backend,
) -> None:
    store = inprocess.store()
    for record, content_type in (
        (nested(MAX_DEPTH + 1), None),
        (nested(10_000), None),
        (text(MAX_DEPTH + 1).encode(), JSON_CONTENT_TYPE),
    ):
        error = refused(store.put, "deep", record, updated_at=at(1), content_type=content_type)
        assert isinstance(error, InvalidRecord)
        assert (error.field, error.reason) == ("record", REASON)
    assert store.index.read("deep") is None
    # The same bytes that claim no JSON are opaque, and stored as they are.
    store.put("deep", text(MAX_DEPTH + 1).encode(), updated_at=at(1))
    assert store.get("deep").body == text(MAX_DEPTH + 1).encode()


@pytest.fixture
def queue() -> Any:
    with moto.mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, _ = provisioning.create_ingest_queues(sqs, queue_name="in", dlq_name="dlq")
        yield sqs, queue_url


def test_vhs_send_refuses_the_line_as_the_handler_would(queue: Any) -> None:
    sqs, url = queue
    report = Producer(url, sqs_client=sqs).send_lines(
        [(1, raw_message(text(MAX_DEPTH + 1)).encode()), (2, raw_message(text(MAX_DEPTH)).encode())]
    )
    [refusal] = report.refused
    assert (refusal.line, refusal.field, refusal.reason) == (1, "record", REASON)
    assert report.sent == 1


def test_vhs_import_and_vhs_put_refuse_it_naming_the_field(
    inprocess: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from vhs_ops.cli.app import main as vhs

    monkeypatch.setenv("VHS_TABLE_NAME", inprocess.table_name)
    monkeypatch.setenv("VHS_BUCKET_NAME", inprocess.bucket_name)
    lines = tmp_path / "records.jsonl"
    lines.write_text(raw_message(text(MAX_DEPTH + 1)) + "\n")
    table = tmp_path / "records.csv"
    table.write_text(f'id,updated_at,record\ndeep,{T},"{text(MAX_DEPTH + 1)}"\n')
    for source, extra in ((lines, []), (table, ["--map", "record=record"])):
        report = tmp_path / f"{source.name}.report.jsonl"
        status = vhs(["--json", "import", str(source), "--report", str(report), *extra])
        capsys.readouterr()
        [entry] = [json.loads(line) for line in report.read_text().splitlines()]
        assert (entry["field"], entry["reason"].removeprefix("not a JSON record: ")) == (
            "record",
            REASON,
        ), status
    deep = tmp_path / "deep.json"
    deep.write_text(text(MAX_DEPTH + 1))
    assert vhs(["--json", "put", "deep", str(deep)]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["field"] == "FILE" and REASON in error["message"]
    assert inprocess.store().index.read("deep") is None


def _images(backend: Backend, rid: str) -> dict[str, Any] | None:
    got = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})
    return got.get("Item")


def test_a_record_to_the_limit_is_stored_read_diffed_and_notified_with_a_patch(
    inprocess: Backend,
) -> None:
    store = inprocess.store()
    first, second = nested(MAX_DEPTH, leaf=1), nested(MAX_DEPTH, leaf=2)
    store.put("deep", first, updated_at=at(1))
    before = _images(inprocess, "deep")
    store.put("deep", second, updated_at=at(2))
    after = _images(inprocess, "deep")
    assert store.get("deep").json() == second
    assert store.get("deep", version=1).json() == first
    diff = store.diff("deep", 1, 2)
    assert diff.kind == "json" and diff.patch_omitted is None
    assert jsonpatch.apply_patch(first, diff.patch) == second
    (change,) = changes_from_images(before, after, bucket="bodies").changes
    assert change.patch == diff.patch
    assert jsonpatch.apply_patch(first, json.loads(change.body())["patch"]) == second


def plant_legacy_json(store: Any, backend: Backend, rid: str, body: bytes, when: Any) -> None:
    """A body that claims JSON and breaks the rules of every door, as one stored before
    they applied them: put as bytes (no content type means JSON in an entry), then claimed."""
    store.put(rid, body, updated_at=when, content_type="application/octet-stream")
    backend.dynamodb.update_item(
        TableName=backend.table_name,
        Key={"id": {"S": rid}},
        UpdateExpression="REMOVE c[0].ct",
    )


@pytest.mark.parametrize(
    "body",
    [
        text(5_000).encode(),  # 3.11's json raised RecursionError on it, uncaught
        text(MAX_DEPTH + 1).encode(),
        b'{"price": 1e400}',  # json.loads made it inf, and the patch wrote Infinity
        b"{not json",
    ],
    ids=["5000-deep", "past-the-limit", "1e400", "not-json"],
)
def test_a_legacy_body_past_the_rules_is_read_as_not_json_by_every_reader(
    inprocess: Backend, body: bytes
) -> None:
    store = inprocess.store()
    store.put("legacy", {"a": 1}, updated_at=at(1))
    before = _images(inprocess, "legacy")
    plant_legacy_json(store, inprocess, "legacy", body, at(2))
    after = _images(inprocess, "legacy")
    record = store.get("legacy")
    assert (record.content_type, record.body) == (JSON_CONTENT_TYPE, body)
    error = refused(record.json)
    assert error.field == "body"
    diff = store.diff("legacy", 1, 2)
    assert (diff.kind, diff.patch, diff.patch_omitted) == ("opaque", None, UNREADABLE)
    assert diff.reason == f"version 2's body is not JSON: {error.reason}"
    json.loads(json.dumps(diff.as_json(), allow_nan=False))
    (change,) = changes_from_images(before, after, bucket="bodies").changes
    assert (change.patch, change.patch_omitted) == (None, UNREADABLE)
