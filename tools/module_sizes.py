"""How big the product code's modules and functions are: a report for the review, not a gate.

Usage (stdlib only; from the repository's root):

    python3 tools/module_sizes.py [ROOT]

It prints how many modules of the product code (lambdas/, ops/, infra/, benchmarks/, tools/
and app.py) fall in each band of 50 lines, the modules over the soft target of 400 lines, and any
function or method over 80 lines. Module size is a target, not a rule: a module is cut where
its concerns part, not where a count says, and a pile-up of modules just under some line is
the sign of cutting by the ruler. Function size is a rule: tests/system/test_layout.py holds
every function to 80 lines, counted as this tool counts them (`long_functions`), and ruff's
complexity rules (pyproject.toml) hold their branches.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

PRODUCT = ("lambdas", "ops", "infra", "benchmarks", "tools", "app.py")
BAND = 50
MODULE_TARGET = 400
MAX_FUNCTION_LINES = 80


def python_files(root: Path, tops: tuple[str, ...] = PRODUCT) -> Iterator[Path]:
    """The Python files under `root`'s `tops` (folders, or files of its top level)."""
    for top in tops:
        path = root / top
        found = [path] if path.is_file() else sorted(path.rglob("*.py"))
        yield from (p for p in found if p.suffix == ".py" and "__pycache__" not in p.parts)


def module_lines(root: Path, tops: tuple[str, ...] = PRODUCT) -> dict[str, int]:
    """Each module's lines, by its path under `root`."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_files(root, tops)
    }


def long_functions(
    root: Path, tops: tuple[str, ...] = PRODUCT, limit: int = MAX_FUNCTION_LINES
) -> dict[str, int]:
    """Every function or method over `limit` lines, as ``path:line name`` to its lines: from
    its first line (its decorators' included) to its last, docstring and comments counted."""
    found = {}
    for path in python_files(root, tops):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > limit:
                    found[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = lines
    return found


def histogram(sizes: dict[str, int], band: int = BAND) -> list[tuple[int, int]]:
    """(the band's first line count, how many modules are in it), for every band from 0 to
    the largest module's, empty ones included (a gap shows as much as a pile)."""
    counts = Counter(n // band for n in sizes.values())
    return [(k * band, counts[k]) for k in range(max(counts, default=-1) + 1)]


def report(root: Path) -> str:
    sizes = module_lines(root)
    lines = [f"{len(sizes)} modules, {sum(sizes.values()):,} lines; modules by size:"]
    widest = max((count for _, count in histogram(sizes)), default=0)
    for low, count in histogram(sizes):
        bar = "#" * round(40 * count / widest) if widest else ""
        lines.append(f"  {low:>5}-{low + BAND - 1:<5} {count:>4} {bar}")
    over = sorted(((n, path) for path, n in sizes.items() if n > MODULE_TARGET), reverse=True)
    lines.append(f"over the soft target of {MODULE_TARGET} lines: {len(over)}")
    lines += [f"  {n:>5} {path}" for n, path in over]
    long = long_functions(root)
    lines.append(f"functions over {MAX_FUNCTION_LINES} lines: {len(long)}")
    lines += [f"  {n:>5} {where}" for where, n in sorted(long.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1]
    print(report(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
