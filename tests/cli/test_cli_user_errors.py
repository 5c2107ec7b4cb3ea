"""Every `vhs` command fed a user's mistakes (a missing file, a bad flag or shard, no
configuration, no region, no credentials, an endpoint that does not answer, a table that is
not there): one line on standard error and no traceback, the exit status docs/cli.md gives,
and under --json one JSON document on standard output, `{"error": {...}}`, as documented.

Every case runs in this process (vhs_testing.cli.vhs), with --json and without; a few, one of
each kind of failure, also run as real processes, which must exit and print exactly as the
command did in this process."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from vhs_testing.cli import assert_documented, local_env, vhs, vhs_process

__all__ = ["local_env"]

BAD_INPUT, NOT_FOUND, UNAVAILABLE = 2, 3, 4
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens

# Each command, with arguments it would run on (the files exist: see `files`).
COMMANDS = {
    "put": ["put", "e1", "{record}"],
    "get": ["get", "e1"],
    "history": ["history", "e1"],
    "diff": ["diff", "e1", "1", "2"],
    "delete": ["delete", "e1"],
    "send": ["send", "{lines}"],
    "import": ["import", "{lines}", "--report", "{report}"],
    "gc": ["gc", "--dry-run", "--shard", "00"],
    "verify": ["verify"],
    "verify ids": ["verify", "e1"],
    "migrate": ["migrate"],
    "reindex": ["reindex", "--checkpoint", "{checkpoint}"],
    "reindex ids": ["reindex", "e1", "--checkpoint", "{checkpoint}"],
    "dlq list": ["dlq", "list"],
    "dlq redrive": ["dlq", "redrive", "--dry-run"],
    "dlq discard": ["dlq", "discard", "--all", "--dry-run"],
    "--stack": ["--stack", "Vhs-nope", "get", "e1"],
}

# What AWS's environment may say: the store's configuration, a region, credentials.
CONFIGURATION = {
    "VHS_TABLE_NAME": "vhs-errors-records",
    "VHS_BUCKET_NAME": "vhs-errors-bodies",
    "VHS_QUEUE_URL": f"{UNREACHABLE}/000000000000/vhs-errors",
    "VHS_DLQ_URL": f"{UNREACHABLE}/000000000000/vhs-errors-dlq",
    "VHS_CHANGE_TOPIC_ARN": "arn:aws:sns:us-east-1:000000000000:vhs-errors.fifo",
}
REGION = {"AWS_DEFAULT_REGION": "us-east-1"}
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
# One attempt (AWS_MAX_ATTEMPTS, docs/design.md "Failures"): what an endpoint that does not
# answer makes of a command is the same after one attempt as after the SDK's backoff (15 s).
ENDPOINT = {"AWS_ENDPOINT_URL": UNREACHABLE, "AWS_MAX_ATTEMPTS": "1"}

# Each situation: the environment it runs in, and the exit status it must end with.
SITUATIONS = {
    "no region": ({**CONFIGURATION, **CREDENTIALS, **ENDPOINT}, BAD_INPUT),
    "no credentials": ({**CONFIGURATION, **REGION, **ENDPOINT}, BAD_INPUT),
    "unreachable endpoint": ({**CONFIGURATION, **REGION, **CREDENTIALS, **ENDPOINT}, UNAVAILABLE),
}
# With no configuration, a command stops before asking AWS anything (--stack needs it).
NOT_CONFIGURED = [name for name in COMMANDS if name != "--stack"]

# A bad value for one of each command's options, and files that are not there.
BAD_ARGUMENTS = {
    "put --updated-at": ["put", "e1", "{record}", "--updated-at", "yesterday"],
    "put --part": ["put", "e1", "{record}", "--part", "scan"],
    "put --part type": ["put", "e1", "{record}", "--part", "scan={record};type="],
    "put, not JSON": ["put", "e1", "{text}"],
    "invoke, not JSON": ["invoke", "ingest", "{text}"],
    "get --version": ["get", "e1", "--version", "one"],
    "get --as-of": ["get", "e1", "--as-of", "yesterday"],
    "diff version": ["diff", "e1", "1", "two"],
    "send --from-line": ["send", "{lines}", "--from-line", "0"],
    "import --chunk-lines": ["import", "{lines}", "--chunk-lines", "0"],
    "import --format": ["import", "{lines}", "--format", "xml"],
    "gc --shard 2D": ["gc", "--shard", "2D"],
    "gc --shard zz": ["gc", "--shard", "zz"],
    "gc --shard 2d0": ["gc", "--shard", "2d0"],
    "gc --grace": ["gc", "--grace", "soon"],
    "verify --segments": ["verify", "--segments", "many"],
    "verify --workers": ["verify", "--workers", "0"],
    "migrate --segments": ["migrate", "--segments", "0"],
    "reindex --since": ["reindex", "--since", "yesterday"],
    "reindex --rate": ["reindex", "--rate", "fast"],
    "dlq list --limit": ["dlq", "list", "--limit", "x"],
    "dlq discard, no filter": ["dlq", "discard"],
    "invoke --timeout": ["invoke", "ingest", "{event}", "--timeout", "0"],
    "local up --port": ["local", "up", "--port", "any"],
    "unknown flag": ["get", "e1", "--colour"],
    "unknown command": ["fetch", "e1"],
    "no command": [],
    "put, no such file": ["put", "e1", "{missing}"],
    "put, a directory": ["put", "e1", "{directory}"],
    "put --part, no such file": ["put", "e1", "{record}", "--part", "scan={missing}"],
    "send, no such file": ["send", "{missing}"],
    "import, no such file": ["import", "{missing}"],
    "reindex --resume, no such file": ["reindex", "--resume", "{missing}"],
    "invoke, no such file": ["invoke", "ingest", "{missing}"],
}
# (unknown flag, command and no command are refused before any configuration is read)


def _cases() -> dict[str, tuple[list[str], dict[str, str], int]]:
    cases = {}
    for situation, (env, status) in SITUATIONS.items():
        for name, args in COMMANDS.items():
            cases[f"{name}, {situation}"] = (args, env, status)
    for name in NOT_CONFIGURED:
        cases[f"{name}, not configured"] = (COMMANDS[name], {**REGION, **CREDENTIALS}, BAD_INPUT)
    for name, args in BAD_ARGUMENTS.items():
        cases[name] = (args, {**CONFIGURATION, **REGION, **CREDENTIALS, **ENDPOINT}, BAD_INPUT)
    return cases


CASES = _cases()


def _clean_environment(home: Path) -> dict[str, str]:
    """This process's environment without AWS's or VHS's settings, and with no AWS config
    files or instance metadata to fall back on."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VHS_"))}
    return {
        **kept,
        "HOME": str(home),
        "AWS_CONFIG_FILE": str(home / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "COLUMNS": "400",
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("errors")
    (home / "record.json").write_text('{"n": 1}')
    (home / "lines.jsonl").write_text(
        '{"id": "e1", "updated_at": "2026-01-01T00:00:00Z", "record": {}}\n'
    )
    (home / "event.json").write_text('{"Records": []}')
    (home / "text.txt").write_text("not JSON")
    (home / "directory").mkdir()
    return {
        "home": str(home),
        "record": str(home / "record.json"),
        "lines": str(home / "lines.jsonl"),
        "event": str(home / "event.json"),
        "text": str(home / "text.txt"),
        "directory": str(home / "directory"),
        "missing": str(home / "nope.jsonl"),
        "report": str(home / "report.jsonl"),
        "checkpoint": str(home / "checkpoint.json"),
    }


def _run(
    args: list[str],
    env: dict[str, str],
    files: dict[str, str],
    *,
    as_json: bool,
    process: bool = False,
) -> Run:
    """The command in this process, or (`process`) in a process of its own."""
    argv = [a.format(**files) for a in args] + (["--json"] if as_json and args else [])
    if as_json and not args:
        argv = ["--json"]
    run = vhs_process if process else vhs
    result = run({**_clean_environment(Path(files["home"])), **env}, *argv, cwd=files["home"])
    return Run(argv, result)


class Run:
    def __init__(self, argv: list[str], result: subprocess.CompletedProcess) -> None:
        self.argv, self.status = argv, result.returncode
        self.out, self.err = result.stdout.decode(), result.stderr.decode()

    def __repr__(self) -> str:
        return f"vhs {' '.join(self.argv)} -> {self.status}\n{self.err}{self.out}"


@pytest.fixture(scope="module")
def outcomes(files: dict[str, str]) -> Iterator[dict[tuple[str, bool], Run]]:
    """Every case, under --json and without it."""
    yield {
        (name, as_json): _run(args, env, files, as_json=as_json)
        for name, (args, env, _) in CASES.items()
        for as_json in (True, False)
    }


def assert_one_line(run: Run, status: int) -> str:
    assert run.status == status, run
    assert "Traceback" not in run.err, run
    lines = run.err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), run
    return lines[0]


def assert_json_error(run: Run, status: int) -> dict:
    document = json.loads(run.out)  # one JSON document, nothing else
    assert_documented("vhs … --json (an error)", document)
    error = document["error"]
    assert error["exit_status"] == status and error["message"], run
    assert error["message"] in run.err, run  # the same words as the line
    return error


@pytest.mark.parametrize("case", list(CASES))
def test_a_user_error_is_one_line_and_its_documented_status(
    case: str, outcomes: dict[tuple[str, bool], Run]
) -> None:
    _, _, status = CASES[case]
    line = assert_one_line(outcomes[case, True], status)
    assert line.startswith(("error: ", "not found: ")), line
    assert_json_error(outcomes[case, True], status)
    assert assert_one_line(outcomes[case, False], status) == line
    assert outcomes[case, False].out == "", outcomes[case, False]


# One case of each kind of failure (each situation, configuration missing, argparse's refusal,
# a bad value, a file that is not there, no command at all), under --json or without it.
IN_PROCESSES = {
    "get, no region": True,
    "get, no credentials": False,
    "get, unreachable endpoint": True,
    "--stack, unreachable endpoint": False,
    "get, not configured": True,
    "unknown flag": False,
    "gc --shard zz": True,
    "put, no such file": False,
    "no command": True,
}


@pytest.mark.parametrize("case", IN_PROCESSES)
def test_a_process_exits_and_prints_as_the_command_did_in_process(
    case: str, outcomes: dict[tuple[str, bool], Run], files: dict[str, str]
) -> None:
    """What the tests above see in this process is what a user's shell sees: the same exit
    status, the same line on standard error, the same document on standard output."""
    args, env, status = CASES[case]
    as_json = IN_PROCESSES[case]
    run = _run(args, env, files, as_json=as_json, process=True)
    assert_one_line(run, status)
    in_process = outcomes[case, as_json]
    assert (run.status, run.err, run.out) == (in_process.status, in_process.err, in_process.out)


def test_each_situation_says_what_to_do(outcomes: dict[tuple[str, bool], Run]) -> None:
    said = {case: outcomes[case, True].err for case in CASES}
    assert "AWS_REGION" in said["get, no region"]
    assert "AWS_PROFILE" in said["get, no credentials"]
    assert UNREACHABLE in said["get, unreachable endpoint"]
    assert "vhs local up" in said["get, unreachable endpoint"]
    assert "VHS_TABLE_NAME" in said["get, not configured"]
    for shard in ("2D", "zz", "2d0"):
        assert f"not a shard: '{shard}'" in said[f"gc --shard {shard}"]
    assert "--help" in said["unknown flag"]
    error = json.loads(outcomes["gc --shard zz", True].out)["error"]
    assert (error["kind"], error["field"]) == ("bad_input", "--shard")


@pytest.mark.parametrize("command", ["get", "gc", "verify", "migrate", "reindex", "dlq list"])
def test_a_table_bucket_or_queue_that_is_not_there(
    command: str, local_env: dict[str, str], files: dict[str, str]
) -> None:
    """Configured, reachable, but naming what the account does not hold: a configuration
    error, one line."""
    env = {
        **local_env,
        "VHS_TABLE_NAME": "no-such-table",
        "VHS_BUCKET_NAME": "no-such-bucket",
        "VHS_DLQ_URL": local_env["VHS_DLQ_URL"] + "-nope",
    }
    for as_json in (False, True):
        run = _run(COMMANDS[command], env, files, as_json=as_json)
        assert_one_line(run, BAD_INPUT)
        if as_json:
            assert "check the configuration" in assert_json_error(run, BAD_INPUT)["message"]


def test_a_record_not_found_under_json(local_env: dict[str, str], files: dict[str, str]) -> None:
    run = _run(["get", "never-stored"], local_env, files, as_json=True)
    assert assert_one_line(run, NOT_FOUND).startswith("not found: ")
    assert assert_json_error(run, NOT_FOUND)["kind"] == "not_found"


@pytest.mark.parametrize(
    ("code", "status", "says"),
    [
        ("UnrecognizedClientException", BAD_INPUT, "AWS_PROFILE"),
        ("AccessDeniedException", BAD_INPUT, "aws sts get-caller-identity"),
        ("ResourceNotFoundException", BAD_INPUT, "check the configuration"),
        ("ProvisionedThroughputExceededException", UNAVAILABLE, "try again later"),
    ],
)
def test_what_aws_refuses_is_told_by_its_code(code: str, status: int, says: str) -> None:
    """The refusals moto does not make (it checks no credentials or permissions), as botocore
    raises them."""
    from botocore.exceptions import ClientError

    from vhs_ops.cli.boundary import failure_of

    failure = failure_of(ClientError({"Error": {"Code": code, "Message": "no"}}, "GetItem"))
    assert (failure.status, failure.as_json()["exit_status"]) == (status, status)
    assert says in failure.line and "\n" not in failure.line
