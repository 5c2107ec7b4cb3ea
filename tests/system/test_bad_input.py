"""Every case of the bad-input corpus (vhs_testing/bad_inputs.py), at two levels, real code only.

* The library, on in-process moto: the ingest logic (`Ingestor.handle`, which runs
  `validate_message` and the store) raises a typed `InvalidInput` naming the field for each
  rejected case and writes nothing; `VersionedHybridStore.put/get/delete` do the same for the
  bad ids, timestamps and bodies a library caller can pass. Hostile but valid input is stored,
  read back identically, under the key layout.
* The pipeline, on moto's server over HTTP: every case goes through the real ingest handler
  in batches of 10 mixed with valid messages (vhs_testing/bad_input_pipeline.py). Each rejected
  case is in the DLQ exactly once with its field and reason; every valid message of a batch is
  stored by that batch's one invocation (no batch item failure, no retry); nothing is lost.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vhs import (
    InvalidId,
    InvalidInput,
    InvalidRecord,
    InvalidTimestamp,
    StoreConfig,
    VersionedHybridStore,
    keys,
)
from vhs.ingest.contract import InvalidMessage
from vhs.ingest.ingestor import Ingestor
from vhs.ingest.staging import StagingLocation
from vhs_ops import provisioning
from vhs_ops.local.sqs_event import lambda_record
from vhs_testing.backends import Backend, open_backend
from vhs_testing.bad_input_pipeline import MISSING, CorpusRun, markdown_table, read_back, run_corpus
from vhs_testing.bad_inputs import (
    CASES,
    CATEGORIES,
    MAX_BODY_BYTES,
    MAX_PAYLOAD_BYTES,
    STAGING_PREFIX,
    STORE_CALLS,
    Accepted,
    Case,
    Rejected,
    by_name,
)

ROOT = Path(__file__).resolve().parents[2]

REJECTED = [c for c in CASES if isinstance(c.expected, Rejected)]
ACCEPTED = [c for c in CASES if isinstance(c.expected, Accepted)]
# The store's error and field for each category's bad value.
STORE_ERRORS = {
    "id": (InvalidId, "id"),
    "timestamp": (InvalidTimestamp, "updated_at"),
    "body": (InvalidRecord, "record"),
}
_SHARD = re.compile(r"[0-9a-f]{2}")
_CUT = re.compile(r"~[0-9a-f]{32}$")


def name_of(case: Case) -> str:
    return case.name


def body_key_problem(key: str, record_id: str, body: bytes) -> str | None:
    """What is wrong with `key` as the key of `record_id`'s body, or None. The layout is
    {shard}/{encoded id}/{sha256}: three segments whatever the id holds, none of them . or ..,
    the middle one naming the id (or a cut form ending in a digest)."""
    segments = key.split("/")
    if len(segments) != 3:
        return f"{key!r} has {len(segments)} segments"
    shard, encoded, digest = segments
    if not (_SHARD.fullmatch(shard) and digest == hashlib.sha256(body).hexdigest()):
        return f"{key!r} has no shard or the wrong digest"
    if encoded in {"", ".", ".."} or ".." in encoded or len(key.encode()) > 1024:
        return f"{key!r} has a segment a path could resolve, or is too long"
    decoded = keys.decode_id(encoded)
    if decoded != record_id and not (decoded is None and _CUT.search(encoded)):
        return f"{key!r} names {decoded!r}, not {record_id!r}"
    return None


# --- the library --------------------------------------------------------------------------


@dataclass
class Library:
    backend: Backend
    ingestor: Ingestor  # the handler's logic, with its own store
    api: VersionedHybridStore  # for library calls, on a table and bucket of its own
    staging_bucket: str

    def record(self, case: Case) -> dict[str, Any]:
        """The case as a record of Lambda's SQS event, its objects staged."""
        body, staged = case.resolve(self.staging_bucket, self.ingestor.store.bucket_name)
        for key, data in staged.items():
            self.backend.s3.put_object(Bucket=self.staging_bucket, Key=key, Body=data)
        received = {
            "MessageId": f"library-{case.name}",
            "ReceiptHandle": "library",
            "Body": body,
            "MessageAttributes": case.attributes,
        }
        return lambda_record(
            received, queue_arn="arn:aws:sqs:us-east-1:123456789012:library", region="us-east-1"
        )

    def written(self, store: VersionedHybridStore) -> tuple[list[Any], list[str]]:
        """Everything in a store's table and bucket."""
        s3, dynamodb = self.backend.s3, self.backend.dynamodb
        items = dynamodb.scan(TableName=store.table_name, ConsistentRead=True)["Items"]
        objects = s3.list_objects_v2(Bucket=store.bucket_name).get("Contents", [])
        return sorted(items, key=repr), sorted(o["Key"] for o in objects)


@pytest.fixture(scope="class")
def library() -> Iterator[Library]:
    with open_backend("inprocess", None) as backend:
        staging = f"{backend.bucket_name}-staging"
        provisioning.create_staging_bucket(backend.s3, staging, backend.region)
        api_table, api_bucket = f"{backend.table_name}-api", f"{backend.bucket_name}-api"
        provisioning.create_store_resources(
            backend.dynamodb,
            backend.s3,
            table_name=api_table,
            bucket_name=api_bucket,
            region=backend.region,
        )
        sqs = backend.new_client("sqs")
        ingestor = Ingestor(
            backend.store(max_body_size=MAX_BODY_BYTES),
            sqs_client=sqs,
            dlq_url=sqs.create_queue(QueueName="bad-input-dlq")["QueueUrl"],
            staging=StagingLocation(staging, STAGING_PREFIX),
            max_payload_bytes=MAX_PAYLOAD_BYTES,
        )
        api = VersionedHybridStore(
            api_table,
            api_bucket,
            StoreConfig(max_body_size=MAX_BODY_BYTES),
            s3_client=backend.s3,
            dynamodb_client=backend.dynamodb,
        )
        yield Library(backend, ingestor, api, staging)


class TestLibrary:
    """One in-process moto for the class: a fresh one per case costs most of a second here.
    Each case compares what is written before and after it instead."""

    @pytest.mark.parametrize("case", REJECTED, ids=name_of)
    def test_rejected_with_a_typed_error_naming_the_field_and_nothing_written(
        self, library: Library, case: Case
    ):
        expected = case.expected
        assert isinstance(expected, Rejected)
        record = library.record(case)
        before = library.written(library.ingestor.store)
        with pytest.raises(InvalidInput) as raised:
            library.ingestor.handle(record)
        error = raised.value
        assert isinstance(error, InvalidMessage)
        assert (type(error).__name__, error.field) == (expected.error_type, expected.field)
        assert expected.reason in error.reason
        assert library.written(library.ingestor.store) == before

    @pytest.mark.parametrize("case", ACCEPTED, ids=name_of)
    def test_hostile_but_valid_input_is_stored_and_reads_back(self, library: Library, case: Case):
        expected = case.expected
        assert isinstance(expected, Accepted)
        result = library.ingestor.handle(library.record(case))
        assert (result.outcome, result.record_id) == ("stored", expected.id)
        assert read_back(library.ingestor.store, expected) == expected.body

    @pytest.mark.parametrize("name", sorted(STORE_CALLS))
    def test_the_store_api(self, library: Library, name: str):
        case, call = by_name()[name], STORE_CALLS[name]
        store = library.api
        if isinstance(case.expected, Accepted):
            result = store.put(call.id, call.record, updated_at=call.updated_at)
            assert result.outcome == "stored"
            record = store.get(call.id)
            if isinstance(call.record, bytes):
                assert record.body == call.record
                if result.location != "inline":
                    key = result.location.removeprefix(f"s3://{store.bucket_name}/")
                    assert body_key_problem(key, call.id, call.record) is None
            else:
                assert record.json() == call.record
            return
        error_class, field = STORE_ERRORS[case.category]
        before = library.written(store)
        with pytest.raises(error_class) as raised:
            store.put(call.id, call.record, updated_at=call.updated_at)
        assert raised.value.field == field
        if case.category == "id":
            for read_or_delete in (
                lambda: store.get(call.id),
                lambda: store.delete(call.id, deleted_at=call.updated_at),
            ):
                with pytest.raises(InvalidId):
                    read_or_delete()
        if case.category == "timestamp":
            with pytest.raises(InvalidTimestamp) as raised:
                store.delete(call.id, deleted_at=call.updated_at)
            assert raised.value.field == "deleted_at"
        assert library.written(store) == before


# --- the pipeline -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(moto_server: str) -> CorpusRun:
    return run_corpus(moto_server)


@pytest.mark.slow
def test_every_invocation_acknowledged_its_whole_batch(run: CorpusRun):
    # Bad input is dead-lettered, never retried: no batch item failure, no failed invocation,
    # and nothing left on the queue after any invocation.
    assert [(i.failed, i.error) for i in run.invocations] == [([], None)] * len(run.invocations)
    assert all(depth.empty for depth in run.queue_after)


@pytest.mark.slow
def test_each_rejected_case_is_dead_lettered_once_with_its_field_and_reason(run: CorpusRun):
    problems = []
    for case in REJECTED:
        expected, handled = case.expected, run.handled[case.name]
        assert isinstance(expected, Rejected)
        sent, _ = case.resolve(run.stack.staging_bucket, run.stack.bucket_name)
        if len(handled.dead_letters) != 1:
            problems.append(f"{case.name}: {len(handled.dead_letters)} dead letters")
            continue
        [letter] = handled.dead_letters
        got = (letter.error_type, letter.error_field)
        if got != (expected.error_type, expected.field):
            problems.append(f"{case.name}: {got}, expected {expected}")
        if expected.reason not in letter.reason:
            problems.append(f"{case.name}: reason {letter.reason!r}")
        if (letter.size, letter.preview) != (len(sent.encode()), sent[: len(letter.preview)]):
            problems.append(f"{case.name}: the dead letter's body is not the message sent")
    assert not problems, "\n".join(problems)
    assert all(depth.empty for depth in run.dlq_after)  # nothing else reached the DLQ


@pytest.mark.slow
def test_valid_and_hostile_but_valid_messages_are_stored_by_their_own_invocation(run: CorpusRun):
    # Read right after the batch's one invocation: a message delayed to a retry would be
    # missing here, not stored.
    accepted = [h for h in run.handled.values() if isinstance(h.case.expected, Accepted)]
    assert len(accepted) == len(ACCEPTED) + len(run.valid())
    not_stored = {
        h.case.name: (h.observed, h.failed, len(h.dead_letters))
        for h in accepted
        if h.observed != "stored" or h.failed or h.dead_letters
    }
    assert not_stored == {}
    assert all(h.read_back is not MISSING for h in accepted)


@pytest.mark.slow
def test_nothing_was_lost_and_nothing_rejected_was_written(run: CorpusRun):
    outcomes = [h.observed for h in run.handled.values()]
    assert outcomes.count("dead-lettered") + outcomes.count("stored") == len(run.handled)
    assert outcomes.count("dead-lettered") == len(REJECTED)
    # The table holds exactly the ids of what was accepted: no rejected case wrote an item.
    stored_ids = {
        h.case.expected.id for h in run.handled.values() if isinstance(h.case.expected, Accepted)
    }
    assert run.table_ids == stored_ids


@pytest.mark.slow
def test_every_body_key_keeps_the_layout_whatever_the_id(run: CorpusRun):
    bodies = [
        h.case.expected
        for h in run.handled.values()
        if isinstance(h.case.expected, Accepted) and isinstance(h.case.expected.body, bytes)
    ]
    in_s3 = set()
    for key in run.body_keys:
        owners = [b.id for b in bodies if body_key_problem(key, b.id, b.body) is None]
        assert len(owners) == 1, f"{key!r} is the body key of {owners}"
        in_s3.update(owners)
    hostile_ids = {c.expected.id for c in ACCEPTED if c.category == "id"}
    assert hostile_ids <= in_s3  # each hostile id's body went to S3 under a key built from it


@pytest.mark.slow
def test_the_report_lists_every_case(run: CorpusRun):
    table = markdown_table(run)
    assert all(f"`{case.name}`" in table for case in CASES)
    assert len(table.splitlines()) == len(CASES) + 2


@pytest.mark.slow
def test_docs_reliability_shows_every_case_as_it_is_handled(run: CorpusRun):
    """The published table cannot drift from the code: regenerate it with
    `.venv/bin/python -m vhs_testing.bad_input_pipeline`."""
    published = set((ROOT / "docs" / "reliability.md").read_text().splitlines())
    stale = [row for row in markdown_table(run).splitlines() if row not in published]
    assert stale == []


# --- the corpus ---------------------------------------------------------------------------


def test_the_corpus_covers_what_issue_6_lists():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)) >= 60
    assert {case.category for case in CASES} == set(CATEGORIES)
    listed = {
        "id": ["id-empty", "id-257-characters", "id-ark-with-slashes", "id-dot-dot"],
        "id (more)": ["id-latin", "id-nul", "id-only-spaces", "id-path-traversal"],
        "timestamp": ["ts-naive", "ts-word", "ts-epoch-seconds", "ts-far-future"],
        "body": ["body-empty-base64", "body-truncated-payload", "body-nan", "body-nested-10000"],
        "body (more)": ["body-base64-over-max-size", "body-payload-invalid-utf8"],
        "message": ["msg-not-json", "msg-base64-not-a-string", "msg-unknown-field"],
        "message (more)": [
            "msg-two-payloads",
            "msg-claim-check-missing",
            "msg-claim-check-foreign-bucket",
        ],
    }
    missing = [name for group in listed.values() for name in group if name not in names]
    assert missing == []
    # Cases that stage the same key stage the same object, so no case changes another's.
    staged: dict[str, bytes] = {}
    for case in CASES:
        for key, data in case.staged.items():
            assert staged.setdefault(key, data) == data, key
    assert {by_name()[name].category for name in STORE_CALLS} <= set(STORE_ERRORS)
