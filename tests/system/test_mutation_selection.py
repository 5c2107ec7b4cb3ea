"""tools/mutation.py's selection follows the folders: every module it mutates exists, and is
tested by its concern's folder of tests and the cross-cutting suites, folders that hold tests."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_mutation_tool():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "tools" / "mutation.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_module_is_tested_by_its_concerns_folder_and_the_system_suites():
    tool = load_mutation_tool()
    config = tool.load_config()
    expected = {
        "vhs/store.py": ["tests/core", "tests/system"],
        "vhs/maintenance/gc.py": ["tests/maintenance", "tests/system"],
        "vhs/ingest/contract.py": ["tests/ingest", "tests/system"],
    }
    for path, folders in expected.items():
        assert tool.selection({"path": path}, config["run"]) == folders
    for name, module in config["modules"].items():
        assert (ROOT / "lambdas" / module["path"]).is_file(), name
        for folder in tool.selection(module, config["run"]):
            assert list((ROOT / folder).glob("test_*.py")), (name, folder)


def test_the_work_directorys_pyproject_is_the_projects_with_mutmuts_and_pytests_own():
    """What the selected tests read from pyproject.toml is there in mutmut's copy (the Makefile's
    test reads requires-python; lint-imports, the import contracts), beside mutmut's settings
    and a pytest configuration of its own."""
    tool = load_mutation_tool()
    config = tool.load_config()
    module = config["modules"]["gc"]
    written = tomllib.loads(tool.pyproject(module, config["run"]))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert written["project"] == project["project"]
    assert written["tool"]["importlinter"] == project["tool"]["importlinter"]
    assert written["tool"]["mutmut"]["only_mutate"] == [module["path"]]
    assert written["tool"]["mutmut"]["pytest_add_cli_args"] == config["run"]["pytest_args"]
    assert written["tool"]["pytest"]["ini_options"]["pythonpath"] == ["tests/harness"]
