"""Marked sections of a generated Markdown file, owned by other scripts.

docs/benchmarks.md is written by benchmarks/run.py, and other benchmark scripts (gc.py) own a
section of it between `<!-- NAME:start -->` and `<!-- NAME:end -->`. A script updates only its
own section (`write_section`); run.py, which rewrites the whole file, keeps the sections it
finds in the old file (`keep_sections`).
"""

from __future__ import annotations

import re
from pathlib import Path

_SECTION = re.compile(r"<!-- ([\w.-]+):start -->\n.*?<!-- \1:end -->\n?", re.DOTALL)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def section(name: str, body: str) -> str:
    start, end = markers(name)
    return f"{start}\n{body.strip(chr(10))}\n{end}\n"


def find_sections(text: str) -> dict[str, str]:
    """Every marked section of `text`, markers included, by name, in order."""
    return {match.group(1): match.group(0) for match in _SECTION.finditer(text)}


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with the section `name` holding `body`: replaced between its markers if present
    (nothing outside them changes), else appended at the end after a blank line."""
    start, end = markers(name)
    new = section(name, body)
    begin = text.find(start)
    if begin != -1:
        finish = text.find(end, begin)
        if finish == -1:
            raise ValueError(f"{start} has no matching {end}")
        finish += len(end)
        if text[finish : finish + 1] == "\n":
            finish += 1
        return text[:begin] + new + text[finish:]
    if not text:
        return new
    return text.rstrip("\n") + "\n\n" + new


def write_section(path: str | Path, name: str, body: str) -> None:
    """Rewrite the file at `path` with its section `name` holding `body` (`replace_section`);
    a file that does not exist yet is created holding only that section."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    path.write_text(replace_section(text, name, body))


def keep_sections(new_text: str, path: str | Path) -> str:
    """`new_text` with the marked sections of the file at `path` (if it exists) carried over:
    each replaces its counterpart in `new_text`, or is appended. For scripts that rewrite a
    whole file that other scripts own sections of."""
    path = Path(path)
    if not path.exists():
        return new_text
    text = new_text
    for name, old in find_sections(path.read_text()).items():
        start, end = markers(name)
        body = old.removeprefix(start + "\n").rstrip("\n").removesuffix(end).rstrip("\n")
        text = replace_section(text, name, body)
    return text
