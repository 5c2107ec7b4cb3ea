"""The `vhs` command as a user runs it: `vhs local up` in one process, commands in others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import jsonpatch
import pytest

from vhs_testing.cli import VHS, assert_documented, json_of, local_env, vhs
from vhs_testing.signals import restore_ctrl_c

__all__ = ["local_env"]  # the fixture: `vhs local up` for every test here


def test_local_up_exports_the_documented_environment(local_env):
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "VHS_TABLE_NAME",
        "VHS_BUCKET_NAME",
    ):
        assert local_env[name]
    assert local_env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")


def test_put_get_history_delete_round_trip(local_env, tmp_path: Path):
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"title": "Moby-Dick"}))
    put = vhs(
        local_env, "--json", "put", "cli-1", str(record), "--updated-at", "2026-01-01T00:00:00Z"
    )
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["outcome"] == "stored"

    again = vhs(
        local_env,
        "put",
        "cli-1",
        "-",
        "--updated-at",
        "2025-01-01T00:00:00Z",
        stdin=b'{"title": "older"}',
    )
    assert again.returncode == 0 and b"stale" in again.stdout

    got = vhs(local_env, "get", "cli-1", "--json")
    assert json.loads(got.stdout)["record"] == {"title": "Moby-Dick"}

    history = vhs(local_env, "history", "cli-1", "--json")
    assert [v["version"] for v in json.loads(history.stdout)] == [1]

    deleted = vhs(local_env, "delete", "cli-1", "--deleted-at", "2026-02-01T00:00:00Z")
    assert deleted.returncode == 0 and b"deleted" in deleted.stdout
    missing = vhs(local_env, "get", "cli-1")
    assert missing.returncode == 3
    assert b"not found" in missing.stderr


def test_delete_purge_drops_every_earlier_version_at_once(local_env):
    for n, stamp in ((1, "2026-01-01T00:00:00Z"), (2, "2026-01-02T00:00:00Z")):
        put = vhs(local_env, "put", "cli-purge", "-", "--updated-at", stamp, stdin=b'{"n": %d}' % n)
        assert put.returncode == 0, put.stderr
    purged = vhs(
        local_env,
        "--json",
        "delete",
        "cli-purge",
        "--deleted-at",
        "2026-02-01T00:00:00Z",
        "--purge",
    )
    assert purged.returncode == 0, purged.stderr
    assert json.loads(purged.stdout) == {
        "id": "cli-purge",
        "outcome": "deleted",
        "version": 3,
        "purged": True,
    }
    for version in ("1", "2"):
        gone = vhs(local_env, "get", "cli-purge", "--version", version)
        assert gone.returncode == 3 and b"not found" in gone.stderr
    history = vhs(local_env, "history", "cli-purge", "--json")
    assert [v["version"] for v in json.loads(history.stdout)] == [3]


def test_parts_put_get_and_history(local_env, tmp_path: Path):
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"title": "scan 7"}))
    scan, ocr = tmp_path / "scan.tiff", tmp_path / "ocr.txt"
    scan.write_bytes(os.urandom(20_000))
    ocr.write_bytes(b"recognised text")
    put = vhs(
        local_env,
        "--json",
        "put",
        "cli-parts",
        str(record),
        "--updated-at",
        "2026-01-01T00:00:00Z",
        "--part",
        f"scan={scan}",
        "--part",
        f"ocr={ocr}",
    )
    assert put.returncode == 0, put.stderr
    stored = json.loads(put.stdout)
    assert sorted(stored["parts"]) == ["ocr", "scan"]
    assert stored["parts"]["scan"]["size"] == 20_000

    got = vhs(local_env, "get", "cli-parts", "--part", "scan")
    assert got.returncode == 0 and got.stdout == scan.read_bytes()
    out = tmp_path / "ocr.out"
    saved = vhs(local_env, "get", "cli-parts", "--part", "ocr", "--output", str(out))
    assert saved.returncode == 0 and out.read_bytes() == b"recognised text"
    described = json.loads(vhs(local_env, "get", "cli-parts", "--json").stdout)
    assert described["record"] == {"title": "scan 7"} and sorted(described["parts"]) == [
        "ocr",
        "scan",
    ]
    history = json.loads(vhs(local_env, "history", "cli-parts", "--json").stdout)
    assert sorted(history[0]["parts"]) == ["ocr", "scan"]

    missing = vhs(local_env, "get", "cli-parts", "--part", "thumbnail")
    assert missing.returncode == 3 and b"no part 'thumbnail'" in missing.stderr
    bad = vhs(local_env, "put", "cli-parts", str(record), "--part", f"Scan={scan}")
    assert bad.returncode == 2 and bad.stderr.startswith(b"error: --part: part name 'Scan'")


def test_bad_input_exits_non_zero_with_the_field_named(local_env, tmp_path: Path):
    record = tmp_path / "r.json"
    record.write_text("{}")
    result = vhs(local_env, "put", "ok", str(record), "--updated-at", "2026-01-01T00:00:00")
    assert result.returncode == 2
    assert result.stderr.startswith(b"error: --updated-at: ")  # the option, as typed


def test_get_as_of_and_diff(local_env):
    """`vhs get --as-of/--source-as-of` and `vhs diff`, their JSON as docs/cli.md gives it."""
    first, second = {"title": "a", "tags": ["x"]}, {"title": "b", "tags": ["x", "y"]}
    for record, day in ((first, "01"), (second, "02")):
        stamp = f"2026-01-{day}T00:00:00Z"
        put = vhs(
            local_env, "put", "tt-1", "-", "--updated-at", stamp, stdin=json.dumps(record).encode()
        )
        assert put.returncode == 0, put.stderr
    got = json_of(local_env, "get", "tt-1", "--source-as-of", "2026-01-01T12:00:00Z")
    assert (got["version"], got["record"]) == (1, first)
    assert_documented("vhs get", got)
    later = json_of(local_env, "get", "tt-1", "--as-of", "2999-01-01T00:00:00Z")
    assert (later["version"], later["record"]) == (2, second)
    early = vhs(local_env, "get", "tt-1", "--as-of", "2000-01-01T00:00:00Z")
    assert early.returncode == 3 and b"no version by" in early.stderr
    assert (
        vhs(
            local_env, "get", "tt-1", "--version", "1", "--as-of", "2026-01-01T00:00:00Z"
        ).returncode
        == 2
    )

    diff = json_of(local_env, "diff", "tt-1", "1", "2")
    assert_documented("vhs diff", diff)
    assert (diff["kind"], diff["body_changed"]) == ("json", True)
    assert jsonpatch.apply_patch(first, diff["patch"]) == second
    table = vhs(local_env, "diff", "tt-1", "1", "2")
    assert table.returncode == 0, table.stderr
    assert (
        "JSON Patch: 2 operations" in table.stdout.decode() and "/tags/1" in table.stdout.decode()
    )
    gone = vhs(local_env, "diff", "tt-1", "1", "9")
    assert gone.returncode == 3 and b"never written (the latest is version 2)" in gone.stderr


def test_raw_bodies(local_env, tmp_path: Path):
    blob = tmp_path / "scan.bin"
    blob.write_bytes(bytes(range(256)) * 100)
    put = vhs(local_env, "put", "scan", str(blob), "--raw", "--content-type", "image/tiff")
    assert put.returncode == 0, put.stderr
    got = vhs(local_env, "get", "scan")
    assert got.stdout == blob.read_bytes()
    not_json = vhs(local_env, "put", "scan", str(blob))
    assert not_json.returncode == 2 and b"--raw" in not_json.stderr


def test_gc_dry_run_reports_every_shard(local_env):
    result = vhs(local_env, "--json", "gc", "--dry-run", "--grace", "0s")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["shards"] == 256 and report["dry_run"] and report["deleted"] == 0


def test_verify_passes_then_finds_a_corrupted_body(local_env, tmp_path: Path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(20_000))  # incompressible: it goes to S3
    assert vhs(local_env, "put", "verify-me", str(blob), "--raw").returncode == 0
    clean = vhs(local_env, "--json", "verify", "verify-me")
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["findings_total"] == 0

    [latest] = json.loads(vhs(local_env, "--json", "history", "verify-me").stdout)[-1:]
    location = latest["location"]
    # One form of time in every command's JSON: `history` as `get` writes it.
    got = json.loads(vhs(local_env, "--json", "get", "verify-me").stdout)
    assert latest["updated_at"] == got["updated_at"] and "T" in latest["updated_at"]
    bucket, key = location.removeprefix("s3://").split("/", 1)
    import boto3

    s3 = boto3.client("s3", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    s3.put_object(Bucket=bucket, Key=key, Body=b"corrupted")
    found = vhs(local_env, "--json", "verify", "verify-me")
    assert found.returncode == 1
    assert json.loads(found.stdout)["by_kind"]["size_mismatch"] == 1


def wait_for_dead_letters(env: dict[str, str], count: int) -> list[dict]:
    """`vhs dlq list --json` once `count` letters are there, each with its receipt: the handler
    sends a letter, then writes the receipt named by the letter's message id, so for a moment
    a letter reads as unverified (and `discard` keeps it)."""
    import time

    deadline = time.monotonic() + 60
    letters: list = []
    while time.monotonic() < deadline:
        letters = json.loads(vhs(env, "--json", "dlq", "list").stdout)
        if len(letters) >= count and all(not letter["unverified_reason"] for letter in letters):
            break
    return letters


def test_dlq_list_and_discard_a_poison_message(local_env, tmp_path: Path):
    poison = tmp_path / "poison.jsonl"
    poison.write_text('{"id": "p1", "updated_at": "2026-01-01T00:00:00", "record": 1}\n')
    assert vhs(local_env, "send", str(poison), "--no-validate").returncode == 0
    [letter] = wait_for_dead_letters(local_env, 1)  # the local pipeline dead-letters it
    assert (letter["record_id"], letter["error_field"]) == ("p1", "updated_at")
    discarded = vhs(local_env, "--json", "dlq", "discard", "--field", "updated_at")
    assert json.loads(discarded.stdout)["discarded"] == 1
    assert json.loads(vhs(local_env, "--json", "dlq", "list").stdout) == []


def test_stack_reads_configuration_from_stack_outputs(local_env):
    import boto3

    cloudformation = boto3.client(
        "cloudformation", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1"
    )
    outputs = {"TableName": local_env["VHS_TABLE_NAME"], "BucketName": local_env["VHS_BUCKET_NAME"]}
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }
    cloudformation.create_stack(StackName="Vhs-cli-Store", TemplateBody=json.dumps(template))
    env = {k: v for k, v in local_env.items() if k not in ("VHS_TABLE_NAME", "VHS_BUCKET_NAME")}
    assert vhs(env, "get", "anything").returncode == 2  # not configured
    result = vhs(env, "--stack", "Vhs-cli", "put", "via-stack", "-", stdin=b"{}")
    assert result.returncode == 0, result.stderr
    assert vhs(local_env, "get", "via-stack").stdout == b"{}"


def test_local_up_runs_the_change_feed(local_env, tmp_path: Path):
    """A put through the CLI reaches the change feed's watch queue (--watch-queue) as one
    notification."""
    import time

    import boto3

    for name in ("VHS_CHANGE_TOPIC_ARN", "VHS_CHANGE_DLQ_URL", "VHS_CHANGE_QUEUE_URL"):
        assert local_env[name]
    assert vhs(local_env, "put", "feed-1", "-", stdin=b'{"n": 1}').returncode == 0
    sqs = boto3.client("sqs", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    notifications: list = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(n["id"] == "feed-1" for n in notifications):
        received = sqs.receive_message(
            QueueUrl=local_env["VHS_CHANGE_QUEUE_URL"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        notifications += [json.loads(m["Body"]) for m in received.get("Messages", [])]
    [note] = [n for n in notifications if n["id"] == "feed-1"]
    assert (note["version"], note["change"], note["location"]) == (1, "stored", "inline")


# Ids that are valid (ids are opaque) and look like Rich markup or emoji codes: printed as
# markup, the first crashes the command (MarkupError), the second hides text behind a link.
MARKUP_IDS = ["x[/bold]", "[link=https://example.com]click[/link]", "[red]alarm", ":warning:"]


def _accepted_corpus_ids() -> list[str]:
    from vhs_testing.bad_inputs import CASES, Accepted

    return [
        case.expected.id
        for case in CASES
        if case.category == "id"
        and isinstance(case.expected, Accepted)
        and case.expected.id.isprintable()
    ]


@pytest.mark.slow
def test_every_table_prints_data_as_text_never_as_markup(local_env, tmp_path: Path):
    """The bad-input corpus's accepted ids, and ids that look like markup, through every table
    the CLI draws (history, dlq list) and verify's findings: each exits 0 (1 for a finding)
    and shows the id exactly as it is."""

    import boto3

    wide = {**local_env, "COLUMNS": "400"}
    ids = MARKUP_IDS + _accepted_corpus_ids()
    assert len(ids) > len(MARKUP_IDS)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(20_000))  # incompressible: it goes to S3
    for rid in ids:
        put = vhs(wide, "put", rid, str(blob), "--raw")
        assert put.returncode == 0, (rid, put.stderr)
        history = vhs(wide, "history", rid)
        assert history.returncode == 0, (rid, history.stderr)
        if len(rid) <= 100:  # (a longer one wraps, even at 400 columns)
            assert f"history of {rid}" in history.stdout.decode(), rid

    # verify's finding line: a corrupted body of a markup id.
    rid = MARKUP_IDS[0]
    location = json.loads(vhs(wide, "--json", "history", rid).stdout)[-1]["location"]
    bucket, key = location.removeprefix("s3://").split("/", 1)
    s3 = boto3.client("s3", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    s3.put_object(Bucket=bucket, Key=key, Body=b"corrupted")
    found = vhs(wide, "verify", rid)
    assert found.returncode == 1, found.stderr
    assert f"size_mismatch {rid} v1" in found.stderr.decode()

    # dlq list: dead letters whose ids (and reasons, which quote the timestamp) are markup.
    lines = tmp_path / "bad.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"id": r, "updated_at": "[bold]yesterday[/]", "record": {}}) + "\n"
            for r in MARKUP_IDS
        )
    )
    assert vhs(wide, "send", str(lines), "--no-validate").returncode == 0
    letters = wait_for_dead_letters(wide, len(MARKUP_IDS))
    assert sorted(letter["record_id"] for letter in letters) == sorted(MARKUP_IDS)
    listed = vhs(wide, "dlq", "list")
    assert listed.returncode == 0, listed.stderr
    for rid in MARKUP_IDS:
        assert rid in listed.stdout.decode()
    assert "[bold]yesterday[/]" in listed.stdout.decode()
    discarded = vhs(wide, "--json", "dlq", "discard", "--field", "updated_at")
    assert json.loads(discarded.stdout)["discarded"] == len(MARKUP_IDS)


# --- Every command's --json: the shapes docs/cli.md documents, and one form of time ----------


def test_every_command_writes_its_documented_json(local_env, tmp_path: Path):
    """Each command's --json output is one JSON document with the fields docs/cli.md gives
    it (no fewer, no more), and every time in it is RFC 3339 with a `T`, in UTC, as `get`
    writes it. (`vhs invoke changes` and `gc`: tests/local/test_invoke.py.)"""
    put = json_of(
        local_env,
        "put",
        "json-1",
        "-",
        "--updated-at",
        "2026-01-01T02:00:00.5+02:00",
        stdin=b'{"n": 1}',
    )
    assert_documented("vhs put", put)
    got = json_of(local_env, "get", "json-1")
    assert got["updated_at"] == "2026-01-01T00:00:00.500000+00:00"
    assert_documented("vhs get", got)
    deleted = json_of(local_env, "delete", "json-1", "--deleted-at", "2026-02-01T00:00:00Z")
    assert_documented("vhs delete", deleted)
    history = json_of(local_env, "history", "json-1")
    assert [v["updated_at"] for v in history] == [got["updated_at"], "2026-02-01T00:00:00+00:00"]
    assert_documented("vhs history", history)

    lines = tmp_path / "send.jsonl"
    lines.write_text(
        '{"id": "json-2", "updated_at": "2026-01-01T00:00:00Z", "record": {}}\n'
        '{"id": "json-3", "updated_at": "2026-01-01T00:00:00", "record": {}}\n'
    )
    sent = json_of(local_env, "send", str(lines), status=1)  # the second line is refused
    assert sent["refused"][0]["field"] == "updated_at"
    assert_documented("vhs send", sent)
    assert_documented("vhs gc", json_of(local_env, "gc", "--dry-run", "--shard", "00"))
    verified = json_of(local_env, "verify", "json-missing", status=1)
    assert verified["findings"][0]["kind"] == "not_found"
    assert_documented("vhs verify", verified)

    # A dead letter at once: the ingest handler run here on SAM's SQS event ("Hello from SQS!").
    sam_event = Path(__file__).resolve().parents[2] / "events" / "sam-sqs-receive-message.json"
    assert_documented(
        "vhs invoke ingest", json_of(local_env, "invoke", "ingest", str(sam_event), process=True)
    )
    try:
        letters = json_of(local_env, "dlq", "list")
        assert [letter["error_field"] for letter in letters] == ["body"]
        assert_documented("vhs dlq list", letters)
        assert_documented("vhs dlq redrive", json_of(local_env, "dlq", "redrive", "--dry-run"))
    finally:  # the other tests expect an empty DLQ
        discarded = json_of(local_env, "dlq", "discard", "--field", "body")
    assert discarded["discarded"] == 1
    assert_documented("vhs dlq discard", discarded)


def test_migrate_writes_its_documented_json_and_a_second_run_writes_nothing(local_env):
    assert vhs(local_env, "put", "migrate-1", "-", "--updated-at", "2026-01-01T00:00:00Z",
               stdin=b'{"n": 1}').returncode == 0  # fmt: skip
    first = json_of(local_env, "migrate")
    assert_documented("vhs migrate", first)
    again = json_of(local_env, "migrate")
    assert (again["rewritten"], again["compact"], again["ok"]) == (0, again["items"], True)


def test_local_up_json_is_documented(tmp_path: Path):
    from vhs_ops.local.stack import free_port

    process = subprocess.Popen(
        [*VHS, "local", "up", "--json", "--no-pipeline", "--port", str(free_port())],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout
    text = ""
    for line in process.stdout:  # blocks until the stack prints; no sleeping
        if line.strip() == "ready":
            break
        text += line
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    env = json.loads(text)
    assert all(isinstance(value, str) for value in env.values())
    # The stack may export more than the docs list (scripts take the object whole).
    assert_documented("vhs local up", env, more_allowed=True)


def test_send_interrupted_says_what_was_sent_and_a_rerun_sends_only_the_rest(
    local_env, tmp_path: Path
):
    """Ctrl-C while `vhs send` waits on a full queue (a queue nothing consumes, so the wait is
    certain): it exits 130 with the summary, and `--from-line` sends the rest, each line once."""
    import time

    import boto3

    sqs = boto3.client("sqs", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    url = sqs.create_queue(QueueName="cli-interrupted")["QueueUrl"]
    env = {**local_env, "VHS_QUEUE_URL": url}
    lines = tmp_path / "many.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"id": f"i{n}", "updated_at": "2026-01-01T00:00:00Z", "record": n}) + "\n"
            for n in range(1, 51)
        )
    )
    sending = subprocess.Popen(
        [*VHS, "--json", "send", str(lines), "--max-queued", "20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=restore_ctrl_c,  # Ctrl-C as a terminal delivers it
    )
    deadline = time.monotonic() + 60
    while int(queue_held(sqs, url)) < 20:  # the sender now waits on the queue
        assert time.monotonic() < deadline and sending.poll() is None
        time.sleep(0.05)
    sending.send_signal(signal.SIGINT)
    out, err = sending.communicate(timeout=30)
    assert sending.returncode == 130, err
    summary = json.loads(out)
    assert_documented("vhs send", summary)
    assert summary["interrupted"] and summary["sent"] == 20 and summary["next_line"] == 21
    assert summary["queue_waits"] == 1 and summary["max_queued"] == 20

    rest = json_of(env, "send", str(lines), "--from-line", "21", "--max-queued", "0")
    assert (rest["lines"], rest["sent"], rest["interrupted"]) == (30, 30, False)
    records = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        records += [json.loads(m["Body"])["record"] for m in got]
    assert sorted(records) == list(range(1, 51))


def queue_held(sqs, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(found[n]) for n in names)
