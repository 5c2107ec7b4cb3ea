"""tools/runtime_python.py: the Python the project runs on, found on the machine or fetched.

`make setup` makes .venv on the functions' runtime (LAMBDA_PYTHON_VERSION in infra/config.py),
and the lowest-Python job its own venv on requires-python's version. What is checked here:
where the tool looks and in what order, that an interpreter which does not run (a pyenv shim
of a version not installed) is passed over, the one line it prints where it can neither find
nor fetch one, and that a venv of another Python is made anew. The fetch from Debian itself
runs in every `make setup` on a machine without the runtime's Python (CI's).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The infra package lives at the repository root, which pytest does not put on sys.path.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra.config import LAMBDA_PYTHON_VERSION  # noqa: E402

THIS = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    path = ROOT / "tools" / "runtime_python.py"
    spec = importlib.util.spec_from_file_location("runtime_python", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of one empty folder, and no pyenv: nothing to find but what a test puts there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    return folder


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_the_version_is_the_functions_runtime(tool: ModuleType) -> None:
    assert tool.runtime_version() == LAMBDA_PYTHON_VERSION


def test_a_python_on_path_is_found_and_one_that_does_not_run_is_passed_over(
    tool: ModuleType, bare_path: Path, tmp_path: Path
) -> None:
    home = tmp_path / "fetched"
    real = script(bare_path, f"python{THIS}", f'exec "{sys.executable}" "$@"')
    assert tool.find(THIS, fetch=False, home=home) == str(real)
    # A pyenv shim of a version not installed exits non-zero: not an interpreter.
    script(bare_path, f"python{THIS}", "echo 'pyenv: version not installed' >&2; exit 127")
    with pytest.raises(tool.NotFound) as raised:
        tool.find(THIS, fetch=False, home=home)
    assert f"install Python {THIS}" in str(raised.value)
    # One that runs but is another version is passed over too.
    script(bare_path, f"python{THIS}", "echo 3.9")
    with pytest.raises(tool.NotFound):
        tool.find(THIS, fetch=False, home=home)


def test_pyenvs_pythons_are_found_newest_first(
    tool: ModuleType, bare_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pyenv"
    for patch in ("1", "10"):
        folder = root / "versions" / f"{THIS}.{patch}" / "bin"
        folder.mkdir(parents=True)
        script(folder, f"python{THIS}", f'exec "{sys.executable}" "$@"')
    monkeypatch.setenv("PYENV_ROOT", str(root))
    found = tool.candidates(THIS)
    assert [Path(p).parents[1].name for p in found] == [f"{THIS}.10", f"{THIS}.1"]


def test_where_none_can_be_fetched_one_line_says_what_to_install(
    tool: ModuleType, tmp_path: Path
) -> None:
    os_release = tmp_path / "os-release"
    os_release.write_text('NAME="Fedora Linux"\nID=fedora\n')
    with pytest.raises(tool.NotFound) as raised:
        tool.fetch_from_debian("3.99", tmp_path, os_release)
    message = str(raised.value)
    assert "\n" not in message
    assert "no Python 3.99 here" in message and "uv python install 3.99" in message
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools/runtime_python.py"), "find", "--version", "3.99",
         "--no-fetch"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "install Python 3.99" in done.stderr


def test_a_venv_of_another_python_is_made_anew_and_one_of_this_python_is_kept(
    tool: ModuleType, bare_path: Path, tmp_path: Path
) -> None:
    script(bare_path, f"python{THIS}", f'exec "{sys.executable}" "$@"')
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script(venv / "bin", "python", "echo 3.9")  # a venv made before the runtime moved
    tool.make_venv(venv, THIS, fetch=False, home=tmp_path / "fetched")
    python = venv / "bin" / "python"
    version = subprocess.run(
        [python, "-c", "import sys, pip; print(sys.version_info[:2], sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert version.startswith(str(sys.version_info[:2])) and str(venv) in version
    marker = venv / "kept"
    marker.touch()
    tool.make_venv(venv, THIS, fetch=False, home=tmp_path / "fetched")
    assert marker.exists()


def test_the_lowest_jobs_pins_are_the_dev_pins() -> None:
    def pins(name: str) -> dict[str, str]:
        found = {}
        for line in (ROOT / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)", line)
            if match:
                found[match.group(1).lower()] = match.group(3)
        return found

    lowest, dev = pins("requirements-lowest.txt"), pins("requirements-dev.txt")
    assert lowest and {name: dev.get(name) for name in lowest} == lowest
    lowest_version = re.search(
        r'^requires-python = ">=(\d+\.\d+)"$', (ROOT / "pyproject.toml").read_text(), re.M
    )
    assert lowest_version
    lowest_tuple = tuple(map(int, lowest_version.group(1).split(".")))
    assert lowest_tuple < tuple(map(int, LAMBDA_PYTHON_VERSION.split(".")))
