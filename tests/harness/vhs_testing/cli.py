"""The `vhs` command run as a user runs it, in a process of its own: `vhs local up` as a
fixture, a command against it, and its `--json` output held to the shapes docs/cli.md lists."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

VHS = [sys.executable, "-m", "vhs.cli"]


@pytest.fixture(scope="module")
def local_env() -> Iterator[dict[str, str]]:
    from vhs.local.stack import free_port

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


def vhs(env: dict[str, str], *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*VHS, *args], env=env, input=stdin, capture_output=True, timeout=60)


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


def json_of(env: dict[str, str], *args: str, stdin: bytes | None = None, status: int = 0) -> object:
    result = vhs(env, "--json", *args, stdin=stdin)
    assert result.returncode == status, (args, result.stderr)
    output = json.loads(result.stdout)  # one JSON document, nothing else
    for key, stamp in times_in(output):
        assert RFC3339.fullmatch(stamp), f"vhs {' '.join(args)}: {key} = {stamp!r}"
    return output
