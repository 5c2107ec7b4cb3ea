"""The `vhs` command as a user runs it: `vhs local up` as a fixture (a process of its own), a
command against it, and its `--json` output held to the shapes docs/cli.md lists.

`vhs` runs a command in this process (`vhs_ops.cli.app.main`), as a fresh process would run it:
its own environment, standard streams that are not a terminal, empty standard input unless
given, and a new botocore session (so credentials and region are read anew). A process costs
about half a CPU-second to start and import; tests of what the CLI decides and prints use
`vhs`. `vhs_process` starts a real one, for what only a process shows (its exit status as the
shell sees it, signals, pipes, a terminal), and for `vhs invoke` of a handler, whose module
state (its cached store, Powertools' logger on the stream it first saw) would outlive the
command in this process. tests/cli/test_cli_user_errors.py checks that both give the same
status, lines and documents for every kind of failure."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

VHS = [sys.executable, "-m", "vhs_ops.cli"]


@pytest.fixture(scope="module")
def local_env() -> Iterator[dict[str, str]]:
    from vhs_ops.local.stack import free_port

    process = subprocess.Popen(
        [*VHS, "local", "up", "--port", str(free_port()), "--watch-queue"],
        stdout=subprocess.PIPE,
        text=True,
    )
    env: dict[str, str] = {}
    assert process.stdout
    for line in process.stdout:  # blocks until the stack prints; no sleeping
        line = line.strip()
        if line == "ready":
            break
        assert line.startswith("export "), line
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value
    yield {**os.environ, **env}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0


def vhs_process(
    env: Mapping[str, str], *args: str, stdin: bytes | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """`vhs ARGS` in a process of its own (standard input: the pytest process's unless given)."""
    return subprocess.run(
        [*VHS, *args], env=env, input=stdin, capture_output=True, timeout=300, cwd=cwd
    )


class _Stream(io.TextIOWrapper):
    """A standard stream that is not a terminal, whose bytes are kept when it is closed."""

    def __init__(self, data: bytes = b"") -> None:
        self.raw_bytes = io.BytesIO(data)
        super().__init__(self.raw_bytes, encoding="utf-8", errors="strict", write_through=True)

    def close(self) -> None:  # a command that closes standard output leaves what it wrote
        self.flush()

    def value(self) -> bytes:
        self.flush()
        return self.raw_bytes.getvalue()


_loader: list = []  # botocore's service models, read once: they are files, not configuration


def _fresh_session() -> object:
    """A botocore session as a new process makes it (reading credentials, region and config
    files anew), sharing only the parsed service models."""
    import botocore.session

    session = botocore.session.get_session()
    if _loader:
        session.register_component("data_loader", _loader[0])
    else:
        _loader.append(session.get_component("data_loader"))
    return session


@contextlib.contextmanager
def _as_a_process(env: Mapping[str, str], stdin: bytes, cwd: str | None) -> Iterator[tuple]:
    import vhs.aws

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_session = vhs.aws._session
    streams = _Stream(stdin), _Stream(), _Stream()
    os.environ.clear()
    os.environ.update(env)
    vhs.aws._session = _fresh_session()
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield streams
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        vhs.aws._session = saved_session
        os.environ.clear()
        os.environ.update(saved_env)


def vhs(
    env: Mapping[str, str], *args: str, stdin: bytes | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """`vhs ARGS` run in this process as a process would run it (the module's docstring), with
    a process's result: its exit status, and the bytes it wrote to each stream."""
    from vhs_ops.cli.app import main

    with _as_a_process(env, stdin or b"", cwd) as (_, out, err):
        try:
            status = main(list(args))
        except SystemExit as exit:  # as the interpreter turns it into a status
            status = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    return subprocess.CompletedProcess([*VHS, *args], status, out.value(), err.value())


CLI_DOC = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
LOOKS_LIKE_A_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d")
# The CLI's one form of time (docs/cli.md): RFC 3339 with a `T`, in UTC with a numeric offset,
# what `get` writes (datetime.isoformat()).
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00")


def documented_shapes() -> dict[str, tuple[set[str], set[str]]]:
    """docs/cli.md's tables: for each heading naming a command (`vhs get`, `vhs invoke gc`
    (collecting)), the (always present, optional) fields its table lists."""
    shapes: dict[str, tuple[set[str], set[str]]] = {}
    section = None
    for line in CLI_DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#+ `(vhs [^`]+)`( \([^)]+\))?$", line)
        if heading:
            section = heading[1] + (heading[2] or "")
            continue
        row = re.match(r"\| `([^`]+)` \| ([^|]+) \|", line)
        if row and section:
            always, optional = shapes.setdefault(section, (set(), set()))
            (optional if "optional" in row[2] else always).add(row[1])
    return shapes


def fields_of(value: object, prefix: str = "") -> set[str]:
    """The field names of a JSON value, as the docs name them: `a`, `a[]` (a non-empty
    array), `a[].b` (a field of its elements), `[].b` (of a top-level array's elements)."""
    found: set[str] = set()
    if isinstance(value, list):
        if value:
            found.add(prefix + "[]")
        for element in value:
            if isinstance(element, dict):
                found |= fields_of(element, prefix + "[].")
    elif isinstance(value, dict):
        for key, inner in value.items():
            found.add(prefix + key)
            if isinstance(inner, list) and any(isinstance(e, dict) for e in inner):
                found |= fields_of(inner, prefix + key)
    return found


def times_in(value: object, key: str = "") -> list[tuple[str, str]]:
    """(key, string) for every string in a JSON value that is, or looks like, a time."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in times_in(v, k)]
    if isinstance(value, list):
        return [t for v in value for t in times_in(v, key)]
    if isinstance(value, str) and (key.endswith("_at") or LOOKS_LIKE_A_TIME.match(value)):
        return [(key, value)]
    return []


def assert_documented(section: str, output: object, *, more_allowed: bool = False) -> None:
    always, optional = documented_shapes()[section]
    present = fields_of(output)
    # A field of an array's elements (`a[].b`, `[].b`) is there when the array has elements.
    missing = {f for f in always if f not in present and f.rpartition(".")[0] in ("", *present)}
    assert not missing, f"{section}: documented but missing: {sorted(missing)}"
    if not more_allowed:
        undocumented = {f for f in present if f not in always | optional and not f.endswith("[]")}
        assert not undocumented, f"{section}: not in docs/cli.md: {sorted(undocumented)}"


def json_of(
    env: dict[str, str],
    *args: str,
    stdin: bytes | None = None,
    status: int = 0,
    process: bool = False,
) -> object:
    """`vhs --json ARGS`'s one document (in a process of its own with `process`)."""
    result = (vhs_process if process else vhs)(env, "--json", *args, stdin=stdin)
    assert result.returncode == status, (args, result.stderr)
    output = json.loads(result.stdout)  # one JSON document, nothing else
    for key, stamp in times_in(output):
        assert RFC3339.fullmatch(stamp), f"vhs {' '.join(args)}: {key} = {stamp!r}"
    return output
