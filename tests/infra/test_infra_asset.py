"""The Lambda asset holds what runs in Lambda, all of it, and nothing else.

What runs is what the handlers import, followed through every module they reach: imports at
the top of a module and imports inside functions alike (`vhs.changes.publish.replay` imports its
stream reader only when it is called), read from the source rather than by importing it. The
asset is the folder lambdas/, whole: infra/function.py's ASSET_EXCLUDE leaves out only what
building and running Python leaves behind, and the operator side (the CLI, the local stack,
the operator tools) is the package in ops/, beside it. These tests hold the folder and the
handlers' imports together both ways: a module a handler comes to import that is not in
lambdas/ fails here before it fails in Lambda, and a module in lambdas/ that no handler
imports fails here until it moves out.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from infra_support import Synthesized

from infra.function import LAMBDAS_DIR

HANDLERS_DIR = LAMBDAS_DIR / "handlers"
SCHEMA = "vhs/schemas/ingest-message.schema.json"
ROOT = LAMBDAS_DIR.parent


def _module_file(name: str) -> Path | None:
    """The file of module `name` under lambdas/, or None (the standard library, boto3,
    Powertools: what the runtime and the layer provide)."""
    path = LAMBDAS_DIR.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(path: Path, module: str) -> Iterator[str]:
    """Every module name `path` imports, anywhere in it; `from x import y` yields both x and
    x.y (y may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            yield source
            yield from (f"{source}.{alias.name}" for alias in node.names)


def runtime_modules() -> set[str]:
    """The files (relative to lambdas/) of every module the handlers import, transitively,
    with the packages they sit in."""
    found: set[str] = set()
    pending = [f"handlers.{path.stem}" for path in HANDLERS_DIR.glob("*.py")]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            prefix = ".".join(parts[:depth])
            path = _module_file(prefix)
            if path is None:
                continue
            relative = str(path.relative_to(LAMBDAS_DIR))
            if relative not in found:
                found.add(relative)
                pending.extend(_imported_names(path, prefix))
    return found


@pytest.fixture(scope="module")
def asset_files(app: Synthesized) -> set[str]:
    return {str(p.relative_to(app.asset)) for p in app.asset.rglob("*") if p.is_file()}


def test_the_walk_finds_the_modules_every_handler_needs() -> None:
    """The walk itself: it reaches the core modules through the handlers' imports."""
    modules = runtime_modules()
    for name in ("vhs/__init__.py", "vhs/store.py", "vhs/settings.py", "handlers/observability.py"):
        assert name in modules, name


def test_every_handler_is_in_the_asset(asset_files: set[str]) -> None:
    handlers = {f"handlers/{path.name}" for path in HANDLERS_DIR.glob("*.py")}
    assert {"handlers/ingest.py", "handlers/changes.py", "handlers/gc.py"} <= handlers
    assert handlers <= asset_files


def test_every_module_the_handlers_import_is_in_the_asset(asset_files: set[str]) -> None:
    assert sorted(runtime_modules() - asset_files) == []


def test_the_asset_carries_no_module_the_handlers_do_not_import(asset_files: set[str]) -> None:
    python = {name for name in asset_files if name.endswith(".py")}
    assert sorted(python - runtime_modules()) == []


def test_the_asset_carries_the_ingest_message_schema(asset_files: set[str]) -> None:
    assert SCHEMA in asset_files
    data = {name for name in asset_files if not name.endswith(".py")}
    assert all(name.startswith("vhs/schemas/") and name.endswith(".json") for name in data), data


def test_the_asset_is_the_lambdas_folder_whole(asset_files: set[str]) -> None:
    """Every file of lambdas/ under git is in the asset, and nothing else: no exclude leaves
    out a source file, and no build debris (caches, the editable install's metadata) goes in."""
    tracked = subprocess.run(
        ["git", "ls-files", "lambdas"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "git lists no file under lambdas/"
    assert asset_files == {str(Path(name).relative_to("lambdas")) for name in tracked}


def test_nothing_of_the_operator_side_is_in_lambdas() -> None:
    """The operator side is its own package beside the asset: no module of lambdas/ is named
    after it, and its package is not under lambdas/."""
    assert not (LAMBDAS_DIR / "vhs_ops").exists()
    assert (ROOT / "ops" / "vhs_ops" / "__init__.py").is_file()
    assert not any((LAMBDAS_DIR / "vhs" / name).exists() for name in ("cli", "local", "operator"))
