"""Guards of the layout: what holds of the code as a whole, and later work could undo.

* The import layers (pyproject.toml's [tool.importlinter], checked by lint-imports, which
  `make lint` runs too) hold, the core's floors among them, every module of lambdas/vhs and
  ops/vhs_ops is in a layer, a layer that imports one above it fails the check, and so does
  an import cycle (the acyclic contract).
* The library and the operator side import without Powertools.
* No function or method of the product code (lambdas/, ops/, infra/, benchmarks/, tools/,
  app.py) is over 80 lines, counted as tools/module_sizes.py counts them; that tool reports module
  sizes against their soft target, which nothing here enforces (docs/testing.md).
* ruff's complexity rules (pyproject.toml) are on for the product code, and find a function
  too complex.
* The environment's names ("VHS_...") are spelled only in lambdas/vhs/settings.py.
* Nothing refers to an issue by number: the tracker is not in the repository.
* Little code repeats itself (pylint's symilar, runs of six identical lines).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from math import comb
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CODE = ("lambdas", "ops", "infra", "benchmarks")
MAX_DUPLICATE_PAIRS = 12
DUPLICATE_MIN_LINES = 6
# The one module that spells the environment's names; everything else reads them through it.
SETTINGS = ROOT / "lambdas" / "vhs" / "settings.py"
# What may carry a reference to an issue: the code, the tests, the tools and the docs.
TEXT = ("lambdas", "ops", "infra", "benchmarks", "tests", "tools", "docs")
TEXT_FILES = ("README.md", "Makefile", "app.py", "pyproject.toml", "cdk.json")
ISSUE_NUMBER = re.compile(r"issue ?#?[0-9]+", re.IGNORECASE)
ENVIRONMENT_NAME = re.compile(r"""["']VHS_[A-Z0-9_]*""")


def python_files(*tops: str) -> Iterator[Path]:
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the tree at `root`, with its lambdas/ and ops/ first on the path (so
    `vhs`, `handlers` and `vhs_ops` are that tree's, not an installed copy)."""
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(root / "lambdas"), str(root / "ops")]),
        },
        capture_output=True,
        text=True,
        check=False,
    )


def layer_modules(contract: str = "layers") -> set[str]:
    """Every module the layers contract `contract` names (a container's modules by their full
    names)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (found,) = [c for c in config["contracts"] if c["id"] == contract]
    prefixes = [f"{container}." for container in found.get("containers", [])] or [""]
    return {
        prefix + name.strip().strip("()")
        for layer in found["layers"]
        for name in re.split(r"[|:]", layer)
        for prefix in prefixes
    }


# --- the import layers --------------------------------------------------------------------------


def test_the_import_layers_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_module_of_the_library_is_in_a_layer() -> None:
    """A new module or package of lambdas/vhs or ops/vhs_ops must be placed in a layer, or
    lint-imports would not check what it imports."""
    modules: set[str] = set()
    for package in (ROOT / "lambdas" / "vhs", ROOT / "ops" / "vhs_ops"):
        name = package.name
        modules |= {f"{name}.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
        modules |= {f"{name}.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert modules - layer_modules() == set()


def test_every_module_of_the_index_is_in_a_layer_of_its_own_contract() -> None:
    """The index package (vhs/index) has its own order: a new module there must be placed in
    it too."""
    package = ROOT / "lambdas" / "vhs" / "index"
    modules = {f"vhs.index.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    assert modules - layer_modules("index") == set()


# What each injected import breaks: (file, the import added, "importer -> imported" as
# lint-imports reports it). One per boundary of the layers, the core's floors included, and the
# two forbidden contracts.
UPWARD_IMPORTS = (
    ("lambdas/vhs/keys.py", "import vhs.maintenance", "vhs.keys -> vhs.maintenance"),
    ("lambdas/vhs/ingest/__init__.py", "import handlers", "vhs.ingest -> handlers"),
    ("lambdas/vhs/changes/__init__.py", "import vhs.read_api", "vhs.changes -> vhs.read_api"),
    ("lambdas/vhs/read_api/__init__.py", "import handlers", "vhs.read_api -> handlers"),
    ("lambdas/handlers/__init__.py", "import vhs_ops.errors", "handlers -> vhs_ops.errors"),
    (
        "ops/vhs_ops/errors.py",
        "import vhs_ops.provisioning",
        "vhs_ops.errors -> vhs_ops.provisioning",
    ),
    (
        "ops/vhs_ops/provisioning.py",
        "import vhs_ops.admin",
        "vhs_ops.provisioning -> vhs_ops.admin",
    ),
    ("ops/vhs_ops/admin/__init__.py", "import vhs_ops.local", "vhs_ops.admin -> vhs_ops.local"),
    ("ops/vhs_ops/local/__init__.py", "import vhs_ops.cli", "vhs_ops.local -> vhs_ops.cli"),
    ("ops/vhs_ops/cli/__init__.py", "import benchmarks", "vhs_ops.cli -> benchmarks"),
    ("infra/__init__.py", "import handlers", "infra -> handlers"),
    ("lambdas/vhs/store.py", "import infra", "vhs.store -> infra"),
    # Inside the core, one per boundary of its floors.
    ("lambdas/vhs/errors.py", "import vhs.shapes", "vhs.errors -> vhs.shapes"),
    ("lambdas/vhs/settings.py", "import vhs.keys", "vhs.settings -> vhs.keys"),
    ("lambdas/vhs/codec.py", "import vhs.bodies.parts", "vhs.codec -> vhs.bodies.parts"),
    (
        "lambdas/vhs/bodies/parts.py",
        "import vhs.history.diffs",
        "vhs.bodies.parts -> vhs.history.diffs",
    ),
    (
        "lambdas/vhs/history/diffs.py",
        "import vhs.index.size",
        "vhs.history.diffs -> vhs.index.size",
    ),
    (
        "lambdas/vhs/index/table.py",
        "import vhs.store_config",
        "vhs.index.table -> vhs.store_config",
    ),
    ("lambdas/vhs/store_config.py", "import vhs.write_path", "vhs.store_config -> vhs.write_path"),
    ("lambdas/vhs/write_path.py", "import vhs.store", "vhs.write_path -> vhs.store"),
    # Inside the index, one per boundary of its own order.
    (
        "lambdas/vhs/index/layouts.py",
        "import vhs.index.conditions",
        "vhs.index.layouts -> vhs.index.conditions",
    ),
    (
        "lambdas/vhs/index/decode.py",
        "import vhs.index.codec",
        "vhs.index.decode -> vhs.index.codec",
    ),
    ("lambdas/vhs/index/codec.py", "import vhs.index.size", "vhs.index.codec -> vhs.index.size"),
    ("lambdas/vhs/index/size.py", "import vhs.index.budget", "vhs.index.size -> vhs.index.budget"),
    (
        "lambdas/vhs/index/updates.py",
        "import vhs.index.table",
        "vhs.index.updates -> vhs.index.table",
    ),
)


def copied_tree(tmp_path: Path) -> Path:
    """The code and pyproject.toml, copied to plant imports in."""
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for top in CODE:
        shutil.copytree(ROOT / top, tree / top, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_a_layer_that_imports_one_above_it_fails(tmp_path: Path) -> None:
    tree = copied_tree(tmp_path)
    for file, statement, _ in UPWARD_IMPORTS:
        with (tree / file).open("a") as module:
            module.write(f"\n{statement}  # an upward import\n")

    result = lint_imports(tree)

    assert result.returncode != 0
    reported = result.stdout
    assert [route for _, _, route in UPWARD_IMPORTS if route not in reported] == [], reported


def test_an_import_cycle_fails(tmp_path: Path) -> None:
    """The acyclic contract holds the modules of one layer, and of one package, to a single
    direction too: two sibling modules that import each other, one of them inside a function,
    fail, and lint-imports names the import that would break the cycle."""
    tree = copied_tree(tmp_path)
    with (tree / "ops/vhs_ops/cli/output.py").open("a") as module:
        module.write("\n\ndef _planted() -> None:\n    import vhs_ops.cli.pipeline  # a cycle\n")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "No cycles are allowed in vhs_ops.cli." in result.stdout, result.stdout
    assert "- .output -> .pipeline" in result.stdout, result.stdout


# --- sizes, names, references, repetition -------------------------------------------------------


def module_sizes() -> ModuleType:
    """tools/module_sizes.py, which counts a function's lines for the check and the report."""
    spec = importlib.util.spec_from_file_location("module_sizes", ROOT / "tools/module_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_is_over_80_lines() -> None:
    sizes = module_sizes()
    assert sizes.MAX_FUNCTION_LINES == 80
    assert sizes.long_functions(ROOT) == {}


def test_a_function_over_80_lines_is_found(tmp_path: Path) -> None:
    """The count the check above relies on: from the first decorator to the last line. `fits`
    is 80 lines with its decorator; `too_long`, 81 with its two (79 without them)."""
    body = "".join(f"    x{n} = {n}\n" for n in range(77))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "m.py").write_text(
        f'import functools\n\n\n@functools.cache\ndef fits():\n    """Doc."""\n{body}\n\n'
        f"class C:\n    @staticmethod\n    @functools.cache\n    def too_long():\n"
        f'        """Doc."""\n{body.replace("    ", "        ")}'
    )

    found = module_sizes().long_functions(tmp_path, ("code",))

    assert found == {"code/m.py:89 too_long": 81}


def test_the_module_size_report_shows_every_band(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n" * 120)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "big.py").write_text("x = 1\n" * 420)

    report = module_sizes().report(tmp_path).splitlines()

    bands = [line.split()[:2] for line in report if line.startswith("  ") and "-" in line]
    assert bands == [["0-49", "0"], ["50-99", "0"], ["100-149", "1"]] + [
        [f"{n}-{n + 49}", "0"] for n in range(150, 400, 50)
    ] + [["400-449", "1"]]
    assert "over the soft target of 400 lines: 1" in report
    assert "    420 tools/big.py" in report


def test_ruff_finds_a_function_too_complex(tmp_path: Path) -> None:
    """The complexity rules are on, with pyproject.toml's bound: a chain of 13 branches is
    one over it."""
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(13))
    (tmp_path / "m.py").write_text(f"def f(x):\n{branches}    return -1\n")
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
         "--output-format", "concise", str(tmp_path / "m.py")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "C901 `f` is too complex (14 > 12)" in result.stdout
    assert "PLR0912 Too many branches (13 > 12)" in result.stdout


def test_the_environment_names_are_spelled_in_the_settings_module_only() -> None:
    spelled = {
        str(path.relative_to(ROOT)): sorted(set(ENVIRONMENT_NAME.findall(path.read_text())))
        for path in python_files(*CODE)
        if path != SETTINGS
    }
    assert {path: names for path, names in spelled.items() if names} == {}
    assert ENVIRONMENT_NAME.search(SETTINGS.read_text())


def test_nothing_refers_to_an_issue_by_number() -> None:
    files = [ROOT / name for name in TEXT_FILES]
    files += [p for top in TEXT for p in (ROOT / top).rglob("*") if p.is_file()]
    found = {}
    for path in files:
        if "__pycache__" in path.parts or path.suffix in (".pyc", ".zip", ".gz"):
            continue
        lines = path.read_text(errors="replace").splitlines()
        hits = [n for n, line in enumerate(lines, 1) if ISSUE_NUMBER.search(line)]
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def symilar_pairs(files: list[Path]) -> list[list[str]]:
    """The places symilar finds sharing `DUPLICATE_MIN_LINES` or more identical lines (comments
    and docstrings aside), as one list of ``file:[start:end]`` per repeated run."""
    result = subprocess.run(
        [
            str(BIN / "symilar"),
            f"--duplicates={DUPLICATE_MIN_LINES}",
            "--ignore-comments",
            "--ignore-docstrings",
            *map(str, files),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout.rstrip().splitlines()[-1].startswith("TOTAL lines="), result.stderr
    runs: list[list[str]] = []
    for line in result.stdout.splitlines():
        if re.match(r"\d+ similar lines in \d+ files", line):
            runs.append([])
        elif line.startswith("==") and runs:
            runs[-1].append(line[2:])
    return runs


def test_symilar_sees_a_repeated_run(tmp_path: Path) -> None:
    """The count below can fail: a run repeated in two files is one pair."""
    body = "".join(f"    total = total + {n} * value\n" for n in range(DUPLICATE_MIN_LINES))
    files = []
    for name in ("a", "b"):
        files.append(tmp_path / f"{name}.py")
        files[-1].write_text(f"def {name}(value):\n    total = 0\n{body}    return total\n")
    assert [len(places) for places in symilar_pairs(files)] == [2]


def test_at_most_12_pairs_of_places_repeat_six_lines() -> None:
    runs = symilar_pairs(list(python_files(*CODE)))
    pairs = sum(comb(len(places), 2) for places in runs)
    assert pairs <= MAX_DUPLICATE_PAIRS, runs


# The modules of `vhs` that wrap Powertools for their functions (the layer provides it in
# Lambda): the read API's resolver, and the batch answers that raise its BatchProcessingError.
NEEDS_POWERTOOLS = ("vhs.read_api", "vhs.ingest.batch", "vhs.changes.batch")
WITHOUT_POWERTOOLS = """
import importlib, pkgutil, sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "aws_lambda_powertools":
            raise ImportError(f"no {name}: Powertools is not installed")
sys.meta_path.insert(0, Refuse())
import vhs, vhs_ops
lambda_side = tuple(sys.argv[1:])
failed = []
for top in (vhs, vhs_ops):
    for info in pkgutil.walk_packages(top.__path__, top.__name__ + "."):
        name = info.name
        if name.endswith("__main__") or name.startswith(lambda_side) or name in lambda_side:
            continue
        try:
            importlib.import_module(name)
        except ImportError as error:
            failed.append(f"{name}: {error}")
print("\\n".join(failed))
"""


def test_the_library_and_the_operator_side_need_no_powertools() -> None:
    """pyproject.toml's dependencies do not name Powertools: only the functions need it (the
    managed layer provides it). Every module of `vhs` but the Lambda side's few, and every
    module of `vhs_ops` (whose handlers, run locally, are imported only when invoked), imports
    without it."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any("powertools" in d for d in dependencies["dependencies"])
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_POWERTOOLS, *NEEDS_POWERTOOLS],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "lambdas"), str(ROOT / "ops")]),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", result.stdout
