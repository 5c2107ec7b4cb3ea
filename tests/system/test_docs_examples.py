"""Every example in README.md, events/README.md and docs/*.md runs as written, against the
local stack.

The examples are read from the documents, not copied here: each fenced block whose language
is `sh`, `bash`, `console` (its `$ ` lines) or `python` is one. A document's examples run in
order, in one bash shell (`set -e -o pipefail`, so the first command that fails stops it),
in a fresh directory that holds the repository's `events/`, with the `vhs` command and
`.venv/bin/{vhs,python}` on hand, after `eval "$(vhs local up --detach)"`: the local stack on
moto's server on 127.0.0.1, as docs/local.md starts it (on a free port, VHS_LOCAL_PORT). A
Python example runs in that shell's environment (`python FILE`), so it sees the same stack.

An example that cannot run here says so in the document itself, on the line before its
block: `<!-- example: skip (the reason) -->` (docs/testing.md). The reason is required, and a
test below holds the documents to the convention and to a floor of examples run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from vhs_ops.local.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "events" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
EXAMPLE_LANGUAGES = {"sh", "bash", "console", "python"}
# Fenced blocks that are not examples: data, output, diagrams, usage synopses.
OTHER_LANGUAGES = {"", "json", "text", "yaml", "mermaid"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>[\w-]*)\s*$")
MARKER = re.compile(r"^<!-- example: (?P<what>.*?) -->$")
SKIP = re.compile(r"^skip \((?P<reason>[^()]*\S[^()]*)\)$")
# The least number of examples that must run (the others need an AWS account, a deployed
# stage, Docker, or minutes): fewer means examples went missing or were skipped
# wholesale.
LEAST_RUN = 15
SECONDS_PER_DOCUMENT = 300


@dataclass(frozen=True)
class Example:
    document: Path
    line: int  # of the opening fence, counted from 1
    language: str
    text: str
    marker: str | None  # the `<!-- example: ... -->` before it

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        match = SKIP.match(self.marker or "")
        return match["reason"] if match else None


def fenced_blocks(document: Path) -> list[Example]:
    """Every fenced block of `document` (examples or not), each with the marker comment on
    the nearest non-blank line before it."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Example] = []
    n = 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if opening is None:
            n += 1
            continue
        previous = next((lines[k].strip() for k in range(n - 1, -1, -1) if lines[k].strip()), "")
        marker = MARKER.match(previous)
        end = next(k for k in range(n + 1, len(lines)) if lines[k].strip() == "```")
        body = textwrap.dedent("\n".join(lines[n + 1 : end]))
        blocks.append(
            Example(document, n + 1, opening["language"], body, marker["what"] if marker else None)
        )
        n = end + 1
    return blocks


def examples(document: Path) -> list[Example]:
    return [b for b in fenced_blocks(document) if b.language in EXAMPLE_LANGUAGES]


def shell_lines(example: Example, number: int) -> str:
    """The example as lines of the document's shell script."""
    if example.language == "python":
        script = f"example_{number}.py"
        heredoc = f"cat > {script} <<'VHS_EXAMPLE_EOF'\n{example.text}\nVHS_EXAMPLE_EOF"
        return f"{heredoc}\npython {script}"
    if example.language == "console":
        commands = [line[2:] for line in example.text.splitlines() if line.startswith("$ ")]
        return "\n".join(commands)
    return example.text


def document_script(document: Path) -> str:
    parts = [
        "set -e -o pipefail",
        'eval "$(vhs local up --detach)"',
        "trap 'vhs local down' EXIT",
    ]
    for number, example in enumerate(examples(document)):
        if example.skip_reason is None:
            # Which example the shell is in, for the failure message.
            parts.append(f"echo '>>> example {example.where}' >&2")
            parts.append(shell_lines(example, number))
    return "\n".join(parts) + "\n"


def workspace(directory: Path) -> dict[str, str]:
    """A fresh directory for a document's examples: the repository's events, `vhs` and
    `.venv/bin/{vhs,python}` running this checkout with this interpreter. Returns the
    environment the shell runs in."""
    (directory / "events").symlink_to(ROOT / "events")
    tools = directory / ".venv" / "bin"
    tools.mkdir(parents=True)
    commands = {
        "python": f'exec "{sys.executable}" "$@"',
        "python3": f'exec "{sys.executable}" "$@"',
        "vhs": f'exec "{sys.executable}" -m vhs_ops.cli "$@"',
    }
    for name, command in commands.items():
        wrapper = tools / name
        wrapper.write_text(f"#!/bin/sh\n{command}\n")
        wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VHS_", "AWS_"))}
    return {
        **env,
        "PATH": f"{tools}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": os.pathsep.join(
            [
                str(ROOT / "lambdas"),
                str(ROOT / "ops"),
                str(ROOT / "tests" / "harness"),
                env.get("PYTHONPATH", ""),
            ]
        ),
        "VHS_LOCAL_PORT": str(free_port()),
        # Tracebacks and rich output as plain text in the failure message.
        "TERM": "dumb",
    }


RUNNABLE = [d for d in DOCUMENTS if any(e.skip_reason is None for e in examples(d))]


@pytest.mark.slow
@pytest.mark.parametrize("document", RUNNABLE, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_example_runs_as_written(document: Path, tmp_path: Path):
    env = workspace(tmp_path)
    try:
        result = subprocess.run(
            ["bash", "-c", document_script(document)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=SECONDS_PER_DOCUMENT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        # The shell's trap stops the stack, unless the shell itself was killed (a timeout).
        subprocess.run(
            ["vhs", "local", "down"], cwd=tmp_path, env=env, capture_output=True, timeout=60
        )
    stderr = result.stderr.decode(errors="replace")
    reached = [line for line in stderr.splitlines() if line.startswith(">>> example ")]
    assert result.returncode == 0, (
        f"{reached[-1] if reached else 'starting the local stack'} failed "
        f"(exit {result.returncode}):\n--- stdout\n{result.stdout.decode(errors='replace')[-4000:]}"
        f"\n--- stderr\n{stderr[-6000:]}"
    )
    assert len(reached) == sum(e.skip_reason is None for e in examples(document))


def test_the_documents_keep_the_example_convention():
    """Every fenced block is an example or a known kind of non-example; every marker is a
    skip with its reason, before an example; and most examples run."""
    run, skipped = [], []
    for document in DOCUMENTS:
        for block in fenced_blocks(document):
            assert block.language in EXAMPLE_LANGUAGES | OTHER_LANGUAGES, (
                f"{block.where}: a ```{block.language} block: neither an example "
                f"({sorted(EXAMPLE_LANGUAGES)}) nor one of {sorted(OTHER_LANGUAGES)}"
            )
            if block.marker is not None:
                assert block.skip_reason, (
                    f"{block.where}: {block.marker!r}: the only marker is "
                    "`<!-- example: skip (the reason) -->`"
                )
                assert block.language in EXAMPLE_LANGUAGES, f"{block.where}: not an example"
            if block.language in EXAMPLE_LANGUAGES:
                (run if block.skip_reason is None else skipped).append(block)
    assert len(run) >= LEAST_RUN, f"only {len(run)} examples run ({len(skipped)} skipped)"
