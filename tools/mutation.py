"""Run mutmut over the core modules, one module at a time, and report kill rates per module.

    python tools/mutation.py run [MODULE ...]     # fresh run (all modules by default), then report
    python tools/mutation.py report [--survivors] # the table again; --survivors adds their diffs

Run it with the mutation venv's Python (`make mutation` does). tools/mutation.toml names the
modules and the sampling; a module's tests are the folder of its concern (`selection`). Each
module gets a work directory .mutation/<name>/ holding links to lambdas/vhs (as vhs/, so mutmut
names mutants by the import name vhs.*, which its test-to-mutant map needs), tests/ and what the
tests read (`LINKS`), and a pyproject.toml of its own; mutmut writes its mutants/ there. A run
starts each module afresh, so re-running gives the same verdicts for the same code and tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil

# B404, B603 below: it runs mutmut and this Python with our own arguments, never a shell.
import subprocess  # nosec B404
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tools" / "mutation.toml"
# The core: vhs/ itself and its packages (the index, the bodies, history), whose tests are
# tests/core/.
CORE = (Path("vhs"), Path("vhs/index"), Path("vhs/bodies"), Path("vhs/history"))
WORK = ROOT / ".mutation"
# handlers/ beside vhs/, as in the asset: the tests import the handlers, and the local stack
# finds them beside the vhs package it runs (vhs_ops.local).
LINKS = {
    "vhs": "lambdas/vhs",
    "handlers": "lambdas/handlers",
    "tests": "tests",
    "events": "events",
    "docs": "docs",
}
# What the selected tests read from the repository besides vhs and tests (the CDK app that the
# state-machine tests synthesize, the tools, the Makefile and the audit's exceptions that
# tests/system checks, README.md for the docs examples, the benchmarks for their own test, the
# operator side that tests/system's layout checks read): mutmut copies them into its mutants/
# directory, where the tests run. None of them is on sys.path: the operator side the tests
# import (vhs_ops) is the repository's own, installed in the mutation venv, and it imports the
# mutated vhs, which is first on the path.
READ = (
    "lambdas",
    "ops",
    "infra",
    "app.py",
    "cdk.json",
    "tools",
    "Makefile",
    "pip-audit-exceptions.txt",
    "README.md",
    "benchmarks",
    # The pins that tests/system/test_runtime_python.py compares.
    *sorted(path.name for path in ROOT.glob("requirements*.txt")),
)
LINKS |= {name: name for name in READ}
COPIED = [name for name in LINKS if name not in ("vhs", "tests")]
GOAL = 0.90

# mutmut 3's exit codes for a mutant's test run (mutmut.stats.status_by_exit_code).
KILLED = {1, 3}
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {36, -24, 24, 152, 255}


def load_config() -> dict:
    return tomllib.loads(CONFIG.read_text())


def selection(module: dict, run: dict) -> list[str]:
    """The tests a module is checked against: the folder of its concern, tests/<package>/ for a
    module of a feature's package under vhs/ and tests/core/ for one of the core (vhs/ itself
    and the core's packages, CORE), then run's `also`."""
    package = Path(module["path"]).parent
    concern = "core" if package in CORE else package.name
    return [f"tests/{concern}", *run.get("also", [])]


# The tables of the project's pyproject.toml that the work directory's sets itself.
OWN_TABLES = ("tool.pytest", "tool.mutmut")


def project_tables() -> list[str]:
    """The project's pyproject.toml without OWN_TABLES: the rest is what the selected tests read
    from it (requires-python for the Makefile's test, the import contracts for lint-imports)."""
    kept, own = [], False
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("["):
            own = line.strip("[] ").startswith(OWN_TABLES)
        if not own:
            kept.append(line)
    return kept


def pyproject(module: dict, run: dict) -> str:
    """The work directory's pyproject.toml: the project's, with mutmut's settings and pytest's
    own (pythonpath: the test harness, tests/harness/vhs_testing)."""
    toml = json.dumps  # a TOML basic string or array of them is also valid JSON
    return "\n".join(
        [
            *project_tables(),
            "",
            "[tool.mutmut]",
            'source_paths = ["vhs"]',
            f"only_mutate = {toml([module['path']])}",
            f"pytest_add_cli_args = {toml(run['pytest_args'])}",
            f"pytest_add_cli_args_test_selection = {toml(selection(module, run))}",
            f"also_copy = {toml(COPIED)}",
            "use_git_change_detection = false",
            "",
            "[tool.pytest.ini_options]",
            'pythonpath = ["tests/harness"]',
            'filterwarnings = ["ignore::DeprecationWarning:botocore.*"]',
            'markers = ["live: runs against real AWS", "slow: takes more than a few seconds"]',
            "",
        ]
    )


def prepare(name: str, module: dict, run: dict) -> Path:
    work = WORK / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for link, target in LINKS.items():
        (work / link).symlink_to(os.path.relpath(ROOT / target, work))
    (work / "pyproject.toml").write_text(pyproject(module, run))
    return work


def meta(work: Path, module: dict) -> dict[str, int | None]:
    path = work / "mutants" / (module["path"] + ".meta")
    return json.loads(path.read_text())["exit_code_by_key"] if path.exists() else {}


def sampled(names: list[str], every: int, seed: str) -> list[str]:
    """Every k-th mutant by a hash of its name: the same mutants on every run."""
    if every <= 1:
        return names
    pick = []
    for name in names:
        digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
        if int.from_bytes(digest[:8], "big") % every == 0:
            pick.append(name)
    return pick


def mutmut(work: Path, *args: str) -> None:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    log = (work / "mutmut.log").open("w")
    result = subprocess.run(  # nosec B603
        command, cwd=work, stdout=log, stderr=subprocess.STDOUT, check=False
    )
    if result.returncode != 0:
        tail = (work / "mutmut.log").read_text()[-3000:]
        sys.exit(
            f"mutmut failed in {work} (exit {result.returncode}); the end of mutmut.log:\n{tail}"
        )


def generate(work: Path) -> None:
    """Write the mutants without testing them (mutmut 3.8's own steps), to sample their names."""
    code = (
        "import os\n"
        "from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants\n"
        "os.makedirs('mutants', exist_ok=True)\n"
        "copy_src_dir(); copy_also_copy_files(); create_mutants(1)\n"
    )
    run_code = [sys.executable, "-c", code]
    subprocess.run(run_code, cwd=work, check=True, stdout=subprocess.DEVNULL)  # nosec B603


def run(names: list[str]) -> None:
    config = load_config()
    settings, modules = config["run"], config["modules"]
    unknown = set(names) - set(modules)
    if unknown:
        sys.exit(f"unknown modules {sorted(unknown)}: tools/mutation.toml has {sorted(modules)}")
    every, seed = int(settings.get("sample", 1)), str(settings.get("seed", ""))
    children = str(settings.get("max_children", 1))
    started = time.monotonic()
    for name in names or list(modules):
        module = modules[name]
        begun = time.monotonic()
        work = prepare(name, module, settings)
        print(f"{name}: mutating {module['path']}", flush=True)
        if every > 1:
            generate(work)
            chosen = sampled(sorted(meta(work, module)), every, seed)
            print(f"{name}: testing {len(chosen)} of {len(meta(work, module))} mutants", flush=True)
            mutmut(work, "run", "--max-children", children, *chosen)
        else:
            mutmut(work, "run", "--max-children", children)
        seconds = time.monotonic() - begun
        (work / "seconds").write_text(f"{seconds:.0f}\n")
        print(f"{name}: done in {seconds / 60:.1f} min", flush=True)
    print(f"mutation run: {(time.monotonic() - started) / 60:.1f} min")
    report(survivors=False)


def counts(codes: dict[str, int | None]) -> dict[str, int]:
    tested = {k: v for k, v in codes.items() if v is not None}
    out = {
        "mutants": len(tested),
        "killed": sum(v in KILLED for v in tested.values()),
        "survived": sum(v in SURVIVED for v in tested.values()),
        "no tests": sum(v in NO_TESTS for v in tested.values()),
        "timeout": sum(v in TIMEOUT for v in tested.values()),
    }
    out["other"] = out["mutants"] - sum(
        out[k] for k in ("killed", "survived", "no tests", "timeout")
    )
    return out


def report(survivors: bool) -> None:
    config = load_config()
    print()
    print("| module | mutants | killed | survived | no tests | timeout | other | kill rate |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    total = dict.fromkeys(("mutants", "killed", "survived", "no tests", "timeout", "other"), 0)
    below = []
    for name, module in config["modules"].items():
        work = WORK / name
        c = counts(meta(work, module))
        if not c["mutants"]:
            continue
        for k in total:
            total[k] += c[k]
        rate = (c["killed"] + c["timeout"]) / c["mutants"]
        if rate < GOAL:
            below.append(name)
        cells = " | ".join(str(c[k]) for k in total)
        print(f"| {module['path']} | {cells} | {rate:.1%} |")
    if total["mutants"]:
        rate = (total["killed"] + total["timeout"]) / total["mutants"]
        cells = " | ".join(f"**{total[k]}**" for k in total)
        print(f"| **all** | {cells} | **{rate:.1%}** |")
    print()
    print(
        "kill rate = (killed + timeout) / mutants tested; a mutant no selected test reaches counts"
    )
    print(f"against it. Goal {GOAL:.0%}: below it: {', '.join(below) or 'none'}")
    if survivors:
        for name, module in config["modules"].items():
            work = WORK / name
            alive = [k for k, v in meta(work, module).items() if v is not None and v not in KILLED]
            if alive:
                print(f"\n## {module['path']}: {len(alive)} not killed\n")
                sys.stdout.flush()
                show(work, sorted(alive, key=mutant_order))


def mutant_order(name: str) -> tuple[str, int]:
    function, _, number = name.rpartition("__mutmut_")
    return function, int(number)


SHOW = """
import ast, re, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
from mutmut.utils.format_utils import orig_function_and_class_names_from_key

def first_line(path, function, cls):
    tree = ast.parse(open(path).read())
    scope = tree.body
    if cls:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in scope if getattr(n, "name", None) == function)
    return min([node.lineno] + [d.lineno for d in node.decorator_list])

for name in sys.argv[1:]:
    m = find_mutant(name)
    function, cls = orig_function_and_class_names_from_key(name)
    start = first_line(m.path, function, cls)
    old, new, line = [], [], None
    for text in get_diff_for_mutant(name, path=m.path).splitlines():
        hunk = re.match(r"@@ -(\\d+)", text)
        if hunk:
            at = start + int(hunk[1]) - 1
        elif text.startswith(("---", "+++")):
            continue
        elif text.startswith("-"):
            line = at if line is None else line
            old.append(text[1:].strip())
            at += 1
        elif text.startswith("+"):
            new.append(text[1:].strip())
        else:
            at += 1
    status = {0: "survived", 5: "no tests", 33: "no tests"}.get(m.exit_code_by_key[name], "other")
    short = name.rpartition(".")[2]
    print(f"- {m.path}:{line} `{short}` ({status}): `{' / '.join(old)}` -> `{' / '.join(new)}`")
"""


def show(work: Path, names: list[str]) -> None:
    subprocess.run([sys.executable, "-c", SHOW, *names], cwd=work, check=True)  # nosec B603


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="a fresh run, then the report")
    run_parser.add_argument("modules", nargs="*", help="names from tools/mutation.toml")
    report_parser = commands.add_parser("report", help="the kill rates of the last run")
    report_parser.add_argument("--survivors", action="store_true", help="and each survivor's diff")
    args = parser.parse_args()
    if args.command == "run":
        run(args.modules)
    else:
        report(args.survivors)


if __name__ == "__main__":
    main()
