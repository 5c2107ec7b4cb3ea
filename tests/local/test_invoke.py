"""`vhs invoke`: a handler run in this process as Lambda runs it, on the local stack. Only the
response on standard output, the function's logs and metrics on standard error; SAM's
generated events for each handler's source; the deployed timeout; handler errors as one line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from vhs.keys import body_key
from vhs.shapes import CHANGES, GC, INGEST, READ_API
from vhs_testing.cli import assert_documented, local_env, vhs, vhs_process
from vhs_testing.events import EVENTS

__all__ = ["local_env"]  # the fixture: `vhs local up` for this module


def invoked(env: dict[str, str], *args: str, stdin: bytes | None = None, status: int = 0) -> Any:
    """`vhs invoke ARGS`, which must exit with `status`: in a process, as a user runs it (what
    goes to which stream is the subject here, and a handler's module state outlives a call)."""
    result = vhs_process(env, "invoke", *args, stdin=stdin)
    assert result.returncode == status, result.stderr.decode()
    return result


def logged(stderr: bytes) -> list[dict[str, Any]]:
    """The JSON lines on standard error: Powertools' log records and EMF metrics, and the
    reports of handed-on invocations."""
    lines = stderr.decode().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def handed_on(stderr: bytes) -> list[dict[str, Any]]:
    return [line["response"] for line in logged(stderr) if "handed_on" in line]


def error_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("function", "event", "memory"),
    [
        ("ingest", "sam-sqs-receive-message.json", INGEST.function_memory_mb),
        ("changes", "sam-dynamodb-update.json", CHANGES.function_memory_mb),
        ("gc", "sam-cloudwatch-scheduled-event.json", GC.function_memory_mb),
        ("read-api", "sam-read-api-get.json", READ_API.function_memory_mb),
    ],
)
def test_each_handler_takes_sams_generated_event(local_env, function, event, memory):
    """`sam local generate-event`'s event for each handler's source: exit 0, the response
    alone on standard output (the whole of it parses as one JSON document), the function's
    log records and metrics on standard error, with the deployed function's name and memory."""
    result = invoked(local_env, function, str(EVENTS / event))
    response = json.loads(result.stdout)
    records = logged(result.stderr)
    logs = [r for r in records if r.get("service") == f"vhs-{function}" and "level" in r]
    assert logs, result.stderr.decode()
    assert {(r["function_name"], r["function_memory_size"]) for r in logs} == {
        (f"vhs-{function}", memory)
    }
    assert any("_aws" in r for r in records)  # EMF metrics
    messages = {r["message"]: r for r in logs}
    if function == "ingest":
        # "Hello from SQS!" is not a VHS message: dead-lettered, not retried.
        assert response == {"batchItemFailures": []}
        assert messages["dead-lettered an invalid message"]["field"] == "body"
    elif function == "changes":
        # Its images are not VHS items (no id, no versions): nothing to publish, no failure.
        assert response == {"batchItemFailures": []}
        assert messages["batch"]["records"] == 3 and messages["batch"]["skipped"] == 3
    elif function == "read-api":
        # GET /records/demo-1 of a stack that holds no demo-1: a 404 problem document, as the
        # function URL would return it.
        assert response["statusCode"] == 404
        assert response["headers"]["Content-Type"] == "application/problem+json"
        assert json.loads(response["body"])["status"] == 404
        return
    else:
        # Every shard in one invocation: the deployed 900 s, not a 60 s context under the
        # handler's 120 s reserve.
        assert response["shards"] == 256 and response["continued_with"] == 0
        assert handed_on(result.stderr) == []
        assert_documented("vhs invoke gc (collecting)", response)
    if function != "gc":
        assert_documented(f"vhs invoke {function}", response)


def test_the_event_on_standard_input(local_env):
    """`-` reads the event from standard input (SAM's `-e -`)."""
    event = (EVENTS / "sqs-small-record.json").read_bytes()
    result = invoked(local_env, "ingest", "-", stdin=event)
    assert json.loads(result.stdout) == {"batchItemFailures": []}
    got = vhs(local_env, "--json", "get", "b1000001")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["record"]["title"] == "Moby-Dick"


def test_gc_fans_out_and_collects_an_orphan_here(local_env):
    """The deployed schedule's event, `{"parallel": N}`: the fan-out's invocations run in
    this process (there is no `vhs-gc` to call), each with the configured timeout, and the
    orphan is deleted."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    body = b"a body whose writer died before it wrote the index"
    orphan = body_key("", "crashed-writer", hashlib.sha256(body).hexdigest())
    s3.put_object(Bucket=local_env["VHS_BUCKET_NAME"], Key=orphan, Body=body)

    env = {**local_env, "VHS_GC_GRACE": "0s"}
    result = invoked(env, "gc", "-", stdin=b'{"parallel": 2}')
    response = json.loads(result.stdout)
    assert response == {"fanned_out": 2}
    assert_documented("vhs invoke gc (fanning out)", response)
    reports = handed_on(result.stderr)
    assert [r["continued_with"] for r in reports] == [0, 0]
    assert sum(r["shards"] for r in reports) == 256
    assert sum(r["deleted"] for r in reports) == 1
    listed = s3.list_objects_v2(Bucket=local_env["VHS_BUCKET_NAME"], Prefix=orphan)
    assert listed.get("KeyCount", 0) == 0


def test_timeout_gives_the_time_left(local_env):
    """--timeout 60 is under the gc handler's 120 s reserve: each invocation collects one
    shard (at least one page) and hands the rest on, as the deployed function would."""
    event = json.dumps({"shards": ["00", "01", "02"], "dry_run": True}).encode()
    result = invoked(local_env, "gc", "-", "--timeout", "60", stdin=event)
    response = json.loads(result.stdout)
    assert (response["shards"], response["continued_with"]) == (1, 2)
    assert [(r["shards"], r["continued_with"]) for r in handed_on(result.stderr)] == [
        (1, 1),
        (1, 0),
    ]


def test_a_handler_error_is_one_line_and_a_non_zero_exit(local_env):
    result = invoked(local_env, "gc", "-", stdin=b'{"parallel": 0}', status=1)
    assert result.stdout == b""
    assert error_lines(result.stderr) == [
        "error: gc: InvalidInput: parallel: must be a whole number from 1 to 256"
    ]
    assert b"Traceback" not in result.stderr

    debug = invoked(local_env, "gc", "-", "--debug", stdin=b'{"parallel": 0}', status=1)
    assert b"Traceback" in debug.stderr and len(error_lines(debug.stderr)) == 1

    # Every record of the batch failed (no such table): Powertools' BatchProcessingError,
    # whose message holds each record's traceback, named with its first record's error.
    no_table = {**local_env, "VHS_TABLE_NAME": "no-such-table"}
    event = str(EVENTS / "sqs-small-record.json")
    failed = invoked(no_table, "ingest", event, status=1)
    [line] = error_lines(failed.stderr)
    assert line.startswith(
        "error: ingest: BatchProcessingError: all 1 records of the batch failed; "
        "the first: ResourceNotFoundException: "
    )
    assert b"Traceback" not in failed.stderr and failed.stdout == b""


def test_an_event_that_cannot_be_read(local_env, tmp_path: Path):
    missing = invoked(local_env, "ingest", str(tmp_path / "missing.json"), status=2)
    assert error_lines(missing.stderr) == [
        f"error: EVENT: cannot read {tmp_path / 'missing.json'}: No such file or directory"
    ]
    not_json = invoked(local_env, "ingest", "-", stdin=b"not json", status=2)
    [line] = error_lines(not_json.stderr)
    assert line.startswith("error: EVENT: the event in standard input is not JSON")


@pytest.mark.parametrize(
    ("function", "event", "named"),
    [
        ("gc", "sam-sqs-receive-message.json", "an event whose Records come from aws:sqs"),
        ("gc", "sam-dynamodb-update.json", "an event whose Records come from aws:dynamodb"),
        ("ingest", "sam-dynamodb-update.json", "an event whose Records come from aws:dynamodb"),
        ("changes", "sqs-small-record.json", "an event whose Records come from aws:sqs"),
        ("ingest", "sam-cloudwatch-scheduled-event.json", "an EventBridge event (Scheduled Event)"),
        ("read-api", "reindex-segment.json", "an object with cursor, run, segment"),
        ("reindex", "sam-read-api-get.json", "a function URL request"),
        ("import", "sqs-small-record.json", "an event whose Records come from aws:sqs"),
    ],
)
def test_an_event_of_another_kind_is_refused_before_the_handler_runs(
    local_env, function, event, named
):
    """Not the function's kind of event: one line naming both kinds, exit 2, and nothing run
    (the garbage collector would have read an SQS event as "collect every shard")."""
    result = invoked(local_env, function, str(EVENTS / event), status=2)
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(
        f"error: EVENT: the event in {EVENTS / event} is not one for {function}: "
    )
    assert line.endswith(f"; this is {named}")
    assert result.stdout == b""


def test_gc_refuses_an_unknown_field_and_runs_no_collection(local_env):
    import boto3

    s3 = boto3.client("s3", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    orphan = body_key("", "not-collected", hashlib.sha256(b"kept").hexdigest())
    s3.put_object(Bucket=local_env["VHS_BUCKET_NAME"], Key=orphan, Body=b"kept")
    env = {**local_env, "VHS_GC_GRACE": "0s"}
    result = invoked(env, "gc", "-", stdin=b'{"shard": ["00"]}', status=2)
    assert b"it takes a gc event" in result.stderr and b"an object with shard" in result.stderr
    assert s3.list_objects_v2(Bucket=local_env["VHS_BUCKET_NAME"], Prefix=orphan)["KeyCount"] == 1


def test_every_function_has_its_kind_of_event_and_the_docs_name_them_all():
    """One list of the functions `vhs invoke` runs: settings.FUNCTIONS, the parser's choices.
    The event check knows each, and the README's synopsis and docs/cli.md name exactly them."""
    import re

    from vhs import settings
    from vhs_ops.cli.app import build_parser
    from vhs_ops.local.event_shapes import KINDS

    functions = list(settings.FUNCTIONS)
    assert list(KINDS) == functions
    invoke = build_parser()._subparsers._group_actions[0].choices["invoke"]
    [choices] = [a.choices for a in invoke._actions if a.dest == "function"]
    assert list(choices) == functions
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    [synopsis] = re.findall(r"^vhs invoke ([\w|-]+) EVENT", readme, re.MULTILINE)
    assert synopsis.split("|") == functions
    cli = (root / "docs" / "cli.md").read_text(encoding="utf-8")
    [listed] = re.findall(r"FUNCTION is\s+one of the CDK app's functions: ([^.]+)\.", cli)
    assert re.findall(r"`([\w-]+)`", listed) == functions
    local = (root / "docs" / "local.md").read_text(encoding="utf-8")
    [named] = re.findall(r"the CDK app gives them: ([^.]+)\.", local)
    assert re.findall(r"`([\w-]+)`", named) == functions
