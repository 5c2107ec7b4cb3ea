"""`vhs send` sends what the file says, or refuses the line with the handler's reason.

The bad-input corpus goes through `vhs send` (the CLI, in process, on moto) with validation on
and off, and then through the real ingest handler: each line lands where the handler puts it.
A property test checks, for any line, that `vhs send` refuses it if and only if the handler
would dead-letter it, and that what it sends is the line's bytes.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_dlq import BUCKET, STAGING, Stack, configure_handler, handler_env, stack  # noqa: F401

from vhs.errors import InvalidMessage
from vhs.ingest.contract import read_message
from vhs.ingest.staging import StagingLocation, claim_check_pointer
from vhs_ops.admin.producer import Producer
from vhs_ops.cli.app import main as vhs
from vhs_ops.local.invoke import load_handler
from vhs_testing.bad_input_pipeline import MISSING, read_back
from vhs_testing.bad_inputs import (
    CASES,
    MAX_BODY_BYTES,
    MAX_PAYLOAD_BYTES,
    STAGING_PREFIX,
    Accepted,
    Case,
    Rejected,
)


def as_line(case: Case) -> bytes | None:
    """The case as one JSON Lines line, or None if a line cannot carry it: a body over
    several lines, or one whose meaning needs message attributes (a claim-check flag on a
    body that is not a pointer)."""
    body, _ = case.resolve(STAGING, BUCKET)
    if "\n" in body or "\r" in body:
        return None
    if case.attributes and claim_check_pointer_or_none(body) is None:
        return None
    try:
        return body.encode()
    except UnicodeEncodeError:
        return None


def claim_check_pointer_or_none(body: str) -> Any:
    try:
        return claim_check_pointer(json.loads(body), {})
    except (ValueError, RecursionError, InvalidMessage):
        return None


LINES = {case.name: line for case in CASES if (line := as_line(case)) is not None}
# Found by the handler only, so `vhs send` cannot refuse them: a staged body
# (`record_location`) that does not exist, since it may be uploaded after the message is sent
# (a claim check's payload is uploaded first, so a missing one is refused); and size limits,
# which are the function's configuration (this run's store takes bodies of 64 KiB at most, and
# claim-check payloads of 128 KiB, where `vhs send` checks the defaults).


def handler_only(expected: Rejected) -> bool:
    missing_body = (
        expected.field.endswith("record_location") and "does not exist" in expected.reason
    )
    return missing_body or "over the limit" in expected.reason


@pytest.fixture
def corpus(stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Stack:  # noqa: F811
    """The handler configured as the corpus run configures it (its staging prefix and small
    limits), its staged objects in place, and `vhs send` pointed at the same queue."""
    env = handler_env(stack.dlq_url) | {
        "VHS_STAGING_PREFIX": STAGING_PREFIX,
        "VHS_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD_BYTES),
        "VHS_QUEUE_URL": stack.queue_url,
    }
    configure_handler(monkeypatch, env)
    module = load_handler("ingest").__module__
    import sys

    sys.modules[module].ingestor().store.max_body_size = MAX_BODY_BYTES
    for case in CASES:
        for key, data in case.resolve(STAGING, BUCKET)[1].items():
            stack.s3.put_object(Bucket=STAGING, Key=key, Body=data)
    return stack


def send(tmp_path: Path, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, dict]:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in LINES.values()))
    capsys.readouterr()
    code = vhs(["--json", "send", str(path), *args])
    return code, json.loads(capsys.readouterr().out)


def dead_letter_fields(run: Stack) -> dict[bytes, str | None]:
    """Each dead letter's body (a staged dead letter's payload) and the field it names."""
    bodies: dict[str, bytes] = {}
    handles = []
    while messages := run.sqs.receive_message(
        QueueUrl=run.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=60
    ).get("Messages"):
        for message in messages:
            handles.append(message["ReceiptHandle"])
            body = message["Body"].encode()
            pointer = claim_check_pointer_or_none(message["Body"])
            if pointer is not None and StagingLocation(STAGING).holds_staged_dead_letter(pointer):
                body = run.s3.get_object(Bucket=pointer.bucket, Key=pointer.key)["Body"].read()
            bodies[message["MessageId"]] = body
    for handle in handles:
        run.sqs.change_message_visibility(
            QueueUrl=run.dlq_url, ReceiptHandle=handle, VisibilityTimeout=0
        )
    letters = run.dlq().list()
    assert all(letter.trusted for letter in letters)
    assert len(letters) == len(bodies)
    return {bodies[letter.message_id]: letter.error_field for letter in letters}


@pytest.mark.parametrize("validate", [True, False], ids=["validated", "unvalidated"])
def test_every_corpus_line_lands_where_the_handler_puts_it(
    corpus: Stack, tmp_path: Path, capsys: pytest.CaptureFixture, validate: bool
) -> None:
    assert len(LINES) >= len(CASES) - 5  # the few a line cannot carry, and no more
    code, report = send(tmp_path, capsys, *([] if validate else ["--no-validate"]))
    numbers = {name: n for n, name in enumerate(LINES, start=1)}
    refused = {r["line"]: r["field"] for r in report["refused"]}
    assert report["not_sent"] == []
    assert report["sent"] + len(refused) == len(LINES) == report["lines"]
    assert code == (1 if refused else 0)
    corpus.deliver_all()
    dead = dead_letter_fields(corpus)
    for case in CASES:
        if case.name not in LINES:
            continue
        line, number = LINES[case.name], numbers[case.name]
        expected = case.expected
        if isinstance(expected, Accepted):
            assert number not in refused, case.name
            assert read_back(corpus.store, expected) not in (MISSING,), case.name
            assert read_back(corpus.store, expected) == expected.body, case.name
        elif validate and not handler_only(expected):
            # Refused by `vhs send` with the handler's field, and never sent.
            assert refused.get(number) == expected.field, (case.name, refused.get(number))
            assert line not in dead, case.name
        else:
            # Sent as it is; the handler dead-letters it with its field.
            assert number not in refused, case.name
            assert dead.get(line) == expected.field, (case.name, dead.get(line))
    if not validate:
        assert len(dead) == sum(isinstance(c.expected, Rejected) for c in CASES if c.name in LINES)


# --- the property ---------------------------------------------------------------------------

T = "2026-01-01T00:00:00Z"
FRAGMENTS = [
    b'"id"',
    b'"updated_at"',
    b'"record"',
    b'"deleted"',
    b'"body_base64"',
    b'"content_type"',
    f'"{T}"'.encode(),
    b'"2026-01-01T00:00:00"',
    b'"x"',
    b'""',
    b'"\\ud800"',
    b'"\\u00e9"',
    "é".encode(),
    b"\xff",
    b"NaN",
    b"1e400",
    b"1",
    b"-0.5",
    b"true",
    b"false",
    b"null",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b" ",
    b"\t",
    b"\x00",
]


def objects(values: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A JSON object of the contract's fields, some values odd, some keys repeated."""
    keys = st.sampled_from([b'"id"', b'"updated_at"', b'"record"', b'"deleted"', b'"purge"'])
    pairs = st.lists(st.tuples(keys, values), min_size=0, max_size=5)
    return pairs.map(lambda items: b"{" + b",".join(k + b":" + v for k, v in items) + b"}")


VALUES = st.one_of(
    st.sampled_from([f'"{T}"'.encode(), b'"x"', b"1", b"NaN", b"1e400", b"true", b'"\\ud800"']),
    st.text(string.printable + "é\u2028", max_size=8).map(lambda s: json.dumps(s).encode()),
    st.binary(max_size=4),
)
LINES_OF_ANY_KIND = st.one_of(
    objects(VALUES),
    st.lists(st.sampled_from(FRAGMENTS), max_size=12).map(b"".join),
    st.binary(max_size=40),
).filter(lambda line: b"\n" not in line and b"\r" not in line and line.strip())


def handler_dead_letters(line: bytes) -> bool:
    """Whether the ingest handler dead-letters a message whose body is this line (as SQS
    would carry it), judged by the handler's own reading of a message."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return True  # goes as a claim check; the handler refuses the payload: not UTF-8
    try:
        read_message({"body": text}, staging=None, fetch=lambda *_: b"")
    except InvalidMessage:
        return True
    return False


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(line=LINES_OF_ANY_KIND)
@example(line=b'{"id":"d","updated_at":"%s","record":{"a":1,"a":2}}' % T.encode())
@example(line=b'{"id":"s","updated_at":"%s","record":"\\ud800"}' % T.encode())
@example(line=b'{"id":"n","updated_at":"%s","record":NaN}' % T.encode())
@example(line=b'{"id":"ok","updated_at":"%s","record":1e400}' % T.encode())
@example(line=b'{"id":"ok","updated_at":"%s","record":{"x":1}}  ' % T.encode())
def test_send_refuses_a_line_iff_the_handler_would_and_never_alters_it(
    stack: Stack,  # noqa: F811
    line: bytes,
) -> None:
    staging_bucket = {"s3_client": stack.s3, "staging_bucket": STAGING, "staging_prefix": "p/"}
    refused = Producer(stack.queue_url, sqs_client=stack.sqs, **staging_bucket).send_lines(
        [(1, line)]
    )
    assert bool(refused.refused) == handler_dead_letters(line)
    unvalidated = Producer(stack.queue_url, sqs_client=stack.sqs, validate=False, **staging_bucket)
    report = unvalidated.send_lines([(1, line)])
    assert report.ok
    received = []
    while messages := stack.sqs.receive_message(
        QueueUrl=stack.queue_url, MaxNumberOfMessages=10
    ).get("Messages"):
        for message in messages:
            stack.sqs.delete_message(
                QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
            pointer = claim_check_pointer_or_none(message["Body"])
            if pointer is not None and StagingLocation(STAGING, "p/").contains(pointer):
                received.append(stack.s3.get_object(Bucket=STAGING, Key=pointer.key)["Body"].read())
            else:
                received.append(message["Body"].encode())
    # What was sent is the line: once unvalidated, and once more if validation let it pass.
    assert received == [line] * (1 + (not refused.refused))
