"""The CLI's cases, command by command: every numeric option checked one way (exit 2 naming
the option, never a default), errors that name options, one rule for a file's lines at every
door (the bound, its reason, a byte order mark, standard input), nothing matched said so, a
version never written told from one no longer kept, a delete's tombstone, whole tables off a
terminal, 141 on a closed pipe, and handlers that record no metric publish none, silently.

The CLI runs in this process (`main(argv)`) against moto's server, except where only a
process shows it (the pipe)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from vhs.ingest.bulk_lines import MAX_LINE_BYTES
from vhs_ops.cli.app import main
from vhs_testing.cli import VHS
from vhs_testing.stacks import fresh_stack

T0 = "2026-11-01T09:00:00Z"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def message(id: str, at: str = T0, **payload: object) -> str:
    return json.dumps({"id": id, "updated_at": at, **(payload or {"record": {"id": id}})})


# --- every numeric option, one check ---------------------------------------------------------

OUT_OF_RANGE = {
    "reindex --segments 0": (["reindex", "--segments", "0"], "--segments"),
    "reindex --rate 0": (["reindex", "--rate", "0"], "--rate"),
    "reindex --rate 5000": (["reindex", "--rate", "5000"], "--rate"),
    "reindex --rate nan": (["reindex", "--rate", "nan"], "--rate"),
    "reindex --page-size 0": (["reindex", "--page-size", "0"], "--page-size"),
    "verify --segments 0": (["verify", "--segments", "0"], "--segments"),
    "verify --segments 1001": (["verify", "--segments", "1001"], "--segments"),
    "verify --workers 0": (["verify", "--workers", "0"], "--workers"),
    "migrate --segments 0": (["migrate", "--segments", "0"], "--segments"),
    "dlq list --limit -3": (["dlq", "list", "--limit", "-3"], "--limit"),
    "dlq redrive --max 0": (["dlq", "redrive", "--max", "0"], "--max"),
    "dlq discard --max -1": (["dlq", "discard", "--all", "--max", "-1"], "--max"),
    "import --workers 0": (["import", "x.jsonl", "--workers", "0"], "--workers"),
    "import --chunk-lines 0": (["import", "x.jsonl", "--chunk-lines", "0"], "--chunk-lines"),
    "send --from-line 0": (["send", "x.jsonl", "--from-line", "0"], "--from-line"),
    "send --max-queued -1": (["send", "x.jsonl", "--max-queued", "-1"], "--max-queued"),
    "get --version 0": (["get", "e1", "--version", "0"], "--version"),
    "get --version -1": (["get", "e1", "--version", "-1"], "--version"),
    "diff A 0": (["diff", "e1", "0", "2"], "A"),
    "diff B x": (["diff", "e1", "1", "x"], "B"),
    "invoke --timeout 0": (["invoke", "gc", "-", "--timeout", "0"], "--timeout"),
    "local up --port 70000": (["local", "up", "--port", "70000"], "--port"),
    "local up --read-api-port -1": (["local", "up", "--read-api-port", "-1"], "--read-api-port"),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_a_numeric_option_out_of_range_is_exit_2_naming_it(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before anything runs (no configuration is set here): never a silent default."""
    argv, option = OUT_OF_RANGE[case]
    status, out, err = run(["--json", *argv], capsys)
    assert status == 2
    [line] = err.splitlines()
    assert line.startswith(f"error: argument {option}: ")
    assert json.loads(out)["error"]["field"] == option


@pytest.mark.parametrize(
    ("argv", "choices"),
    [(["dlq"], "{list,redrive,discard}"), (["local"], "{up,down,status}"), ([], "COMMAND")],
)
def test_a_missing_subcommand_names_the_choices(
    argv: list[str], choices: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(argv, capsys)
    assert status == 2
    assert f"the following arguments are required: {choices}" in err
    assert "_command" not in err


# --- against a stack --------------------------------------------------------------------------


@pytest.fixture
def stack(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A fresh store and ingest queue in the environment; the test's directory as the
    current one (checkpoints and reports go under it)."""
    for name, value in fresh_stack(moto_server, "cases").env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def put(id: str, at: str, capsys: pytest.CaptureFixture[str], body: str = '{"n": 1}') -> None:
    Path("record.json").write_text(body)
    assert run(["put", id, "record.json", "--updated-at", at], capsys)[0] == 0


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["get", "c1", "--source-as-of", "yesterday"], "--source-as-of"),
        (["get", "c1", "--as-of", "yesterday"], "--as-of"),
        (["put", "c1", "record.json", "--updated-at", "soon"], "--updated-at"),
        (["delete", "c1", "--deleted-at", "soon"], "--deleted-at"),
        (["reindex", "--since", "soon"], "--since"),
    ],
)
def test_an_error_names_the_option_not_the_parameter_inside(
    argv: list[str], option: str, stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("record.json").write_text("{}")
    status, out, err = run([*argv, "--json"], capsys)
    assert status == 2
    assert err.startswith(f"error: {option}: ")
    assert json.loads(out)["error"]["field"] == option


def test_a_version_never_written_is_told_from_one_not_retained(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put("c1", T0, capsys)
    status, _, err = run(["get", "c1", "--version", "9"], capsys)
    assert status == 3
    assert "never written (the latest is version 1)" in err and "not retained" not in err
    status, _, err = run(["diff", "c1", "1", "9"], capsys)
    assert status == 3 and "never written (the latest is version 1)" in err


def test_a_moment_before_the_year_1000_is_shown_as_what_it_is(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put("c1", T0, capsys)
    status, _, err = run(["get", "c1", "--as-of", "0001-01-01T00:00:00+01:00"], capsys)
    assert status == 3
    assert "no version by a moment before the year 1000" in err
    assert "0999" not in err


def test_a_delete_of_an_id_never_stored_is_a_tombstone_that_fences_older_puts(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As docs/cli.md says: version 1, `deleted`; a put dated before it is stale, one after
    it is version 2."""
    status, out, _ = run(["--json", "delete", "never", "--deleted-at", T0], capsys)
    assert status == 0
    assert json.loads(out) | {"purged": False} == {
        "id": "never",
        "outcome": "deleted",
        "version": 1,
        "purged": False,
    }
    Path("record.json").write_text('{"n": 1}')
    older = run(
        ["--json", "put", "never", "record.json", "--updated-at", "2026-10-01T00:00:00Z"], capsys
    )
    assert json.loads(older[1])["outcome"] == "stale"
    newer = run(
        ["--json", "put", "never", "record.json", "--updated-at", "2026-12-01T00:00:00Z"], capsys
    )
    assert (json.loads(newer[1])["outcome"], json.loads(newer[1])["version"]) == ("stored", 2)


# --- one rule for a file's lines at every door -------------------------------------------------


def test_a_line_over_the_bound_is_refused_alike_by_send_and_import(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1.2 MB line: `send` refused it as `import` does, one field, one reason (it was
    sent as a claim check, which `import` called a line the queue could never carry)."""
    long = message("long", record={"pad": "p" * 1_200_000})
    Path("long.jsonl").write_text(f"{message('ok')}\n{long}\n")
    status, out, _ = run(["--json", "send", "long.jsonl"], capsys)
    sent = json.loads(out)
    assert status == 1
    assert (sent["sent"], sent["claim_checks"]) == (1, 0)
    [refused] = sent["refused"]
    status, out, _ = run(["--json", "import", "long.jsonl", "--report", "r.jsonl"], capsys)
    assert status == 1 and json.loads(out)["stored"] == 1
    [entry] = [json.loads(line) for line in Path("r.jsonl").read_text().splitlines()]
    assert (refused["line"], refused["field"], refused["reason"]) == (
        entry["line"],
        entry["field"],
        entry["reason"],
    )
    assert refused["field"] == "line"
    assert (
        f"over the limit of {MAX_LINE_BYTES} bytes (the largest ingest message)"
        in (refused["reason"])
    )
    status, out, _ = run(["--json", "send", "long.jsonl", "--no-validate"], capsys)
    assert [r["line"] for r in json.loads(out)["refused"]] == [2]  # its bytes were never held


def test_a_byte_order_mark_starting_a_file_is_skipped_by_every_door(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON Lines as CSV: the mark is the file's (send and import take line 1); a message
    body that starts with one is still refused (the contract's rule)."""
    bom = b"\xef\xbb\xbf"
    Path("bom.jsonl").write_bytes(bom + message("j1").encode() + b"\n")
    Path("bom.csv").write_bytes(bom + f"id,updated_at,title\nc1,{T0},Emma\n".encode())
    status, out, _ = run(["--json", "send", "bom.jsonl"], capsys)
    assert status == 0 and json.loads(out)["sent"] == 1
    for name in ("bom.jsonl", "bom.csv"):
        status, out, _ = run(["--json", "import", name, "--report", f"{name}.r"], capsys)
        assert status == 0 and json.loads(out)["stored"] == 1, name
    Path("inner.jsonl").write_bytes(message("j2").encode() + b"\n\xef\xbb\xbf" + b"{}\n")
    status, out, _ = run(["--json", "send", "inner.jsonl"], capsys)
    [refused] = json.loads(out)["refused"]
    assert (refused["line"], refused["field"]) == (2, "body")


def test_send_dash_reads_standard_input(
    stack: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = f"{message('s1')}\n\n{message('s2')}\n".encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines)))
    status, out, _ = run(["--json", "send", "-"], capsys)
    sent = json.loads(out)
    assert status == 0
    assert (sent["lines"], sent["sent"]) == (2, 2)


def test_nothing_to_send_or_import_says_so(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("two.jsonl").write_text(f"{message('n1')}\n{message('n2')}\n")
    status, _, err = run(["send", "two.jsonl", "--from-line", "3"], capsys)
    assert status == 2
    assert err.startswith("error: --from-line: two.jsonl has no line from line 3 on")
    Path("empty.jsonl").write_text("")
    status, _, err = run(["send", "empty.jsonl"], capsys)
    assert status == 0 and "nothing to send: empty.jsonl holds no line" in err
    Path("exports").mkdir()
    Path("exports/notes.txt").write_text("not an export")
    status, _, err = run(["import", "exports"], capsys)
    assert status == 2
    assert "exports holds no .jsonl, .ndjson, .csv file (1 other files under it" in err


def test_a_missing_source_bucket_is_the_sources_fault(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["--json", "import", "s3://no-such-source-bucket/2024/"], capsys)
    assert status == 2
    assert "no such bucket 'no-such-source-bucket'" in err
    assert "configuration" not in err
    assert json.loads(out)["error"]["field"] == "SOURCE"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["reindex", "--checkpoint", "{missing}/x.json"], "--checkpoint"),
        (["import", "one.jsonl", "--report", "{missing}/r.jsonl"], "--report"),
    ],
)
def test_a_file_to_write_in_a_missing_directory_is_refused_not_created(
    argv: list[str], option: str, stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("one.jsonl").write_text(message("m1") + "\n")
    missing = stack / "nonexistent" / "dir"
    status, _, err = run([a.replace("{missing}", str(missing)) for a in argv], capsys)
    assert status == 2
    assert err.startswith(f"error: {option}: {missing}: no such directory")
    assert not (stack / "nonexistent").exists()


# --- output -----------------------------------------------------------------------------------


def test_tables_off_a_terminal_are_whole_and_columns_sets_their_width(
    stack: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at = "2026-11-21T10:00:00.123456+00:00"
    put("h1", at, capsys)
    monkeypatch.delenv("COLUMNS", raising=False)
    status, out, _ = run(["history", "h1"], capsys)
    assert status == 0 and at in out
    assert max(len(line) for line in out.splitlines()) > 80
    monkeypatch.setenv("COLUMNS", "60")
    _, narrow, _ = run(["history", "h1"], capsys)
    assert max(len(line) for line in narrow.splitlines()) <= 60


def test_get_into_a_pipe_closed_early_exits_141(moto_server: str, tmp_path: Path) -> None:
    """`vhs get ID | head -c 10`: the reader stops, the command stops, 141, silently."""
    stack = fresh_stack(moto_server, "pipe", pipeline=False)
    env = {**stack.env(), "PATH": "/usr/bin:/bin"}
    body = tmp_path / "scan.bin"
    body.write_bytes(bytes(range(256)) * (32 * 1024))  # 8 MiB: more than a pipe holds
    stored = subprocess.run(
        [*VHS, "put", "scan-1", str(body), "--raw"], env=env, capture_output=True, timeout=60
    )
    assert stored.returncode == 0, stored.stderr
    get = subprocess.Popen(
        [*VHS, "get", "scan-1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert get.stdout is not None and get.stderr is not None
    assert get.stdout.read(10) == body.read_bytes()[:10]
    get.stdout.close()  # what head does once it has its 10 bytes
    assert get.wait(timeout=60) == 141
    assert get.stderr.read() == b""


# --- Powertools -------------------------------------------------------------------------------


def test_a_handler_that_records_no_metric_publishes_none_silently(
    stack: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler error (gc's `{"parallel": 0}`) records no metric: no Powertools warning
    ("No application metrics to publish"); an ingest that stores one still publishes it."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"parallel": 0}')))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, _, err = run(["invoke", "gc", "-"], capsys)
        assert status == 1 and "error: gc: " in err
        status, _, err = run(["invoke", "ingest", str(EVENTS / "sqs-small-record.json")], capsys)
    assert status == 0
    assert [str(w.message) for w in caught if "metrics" in str(w.message)] == []
    assert '"_aws"' in err  # the ingest's EMF metrics, on standard error


EVENTS = Path(__file__).resolve().parents[2] / "events"
