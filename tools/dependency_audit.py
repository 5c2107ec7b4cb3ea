"""pip-audit on every package installed in the project's venvs (`make audit`).

Usage: ``python tools/dependency_audit.py VENV [VENV ...]`` (stdlib only; run it with the
scanners' venv, where pip-audit is).

It audits what is installed, not the requirement files: the installed set is the whole
dependency closure of requirements*.txt as `make setup` resolved it, so nothing needs
resolving again (no downloads, no pip in the loop).

pip-audit's PyPI service asks ``/pypi/NAME/VERSION/json`` for each package. Where only the
project endpoint ``/pypi/NAME/json`` answers (the PyPI mirror that this project's machines
and CI reach; OSV is not reachable at all), pip-audit skips every package, "Dependency not
found on PyPI", and still exits 0: a clean result that audited nothing. The project endpoint
lists the known vulnerabilities of the project's latest release, which, for a package
installed at its latest release, is the same answer. So a package pip-audit skips is audited
from that record when it is installed at the latest release, and reported as not auditable
here otherwise. Where pip-audit's service answers, it audits everything and the fallback is
never used.

Vulnerabilities fail the audit unless pip-audit-exceptions.txt names them (by id or alias)
with a reason.
"""

from __future__ import annotations

import json
import re

# subprocess runs only pip and pip-audit, as fixed argument lists (bandit B404, B603).
import subprocess  # nosec B404
import sys
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXCEPTIONS_FILE = ROOT / "pip-audit-exceptions.txt"
PROJECT_RECORD_URL = "https://pypi.org/pypi/{name}/json"
# A reason has to say why; the same floor as for cdk-nag acknowledgements (infra/nag.py).
MIN_REASON_LENGTH = 40
LOOKUP_THREADS = 8
LOOKUP_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Vulnerability:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...] = ()
    fixed_in: tuple[str, ...] = ()

    def names(self) -> set[str]:
        return {self.id, *self.aliases}


@dataclass
class Audit:
    """What one venv's audit found. `by_service` and `by_latest_record` are the packages
    audited (name, version); `not_auditable` are (name, installed, latest)."""

    by_service: list[tuple[str, str]] = field(default_factory=list)
    by_latest_record: list[tuple[str, str]] = field(default_factory=list)
    not_auditable: list[tuple[str, str, str]] = field(default_factory=list)
    vulnerabilities: list[Vulnerability] = field(default_factory=list)
    excepted: list[Vulnerability] = field(default_factory=list)

    @property
    def packages(self) -> int:
        return len(self.by_service) + len(self.by_latest_record) + len(self.not_auditable)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_exceptions(text: str) -> dict[str, str]:
    """``ID  # reason`` per line; blank lines and whole-line comments are ignored."""
    exceptions = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        vulnerability, _, reason = line.partition("#")
        if len(reason.strip()) < MIN_REASON_LENGTH:
            raise ValueError(f"exception on line {number} must say why: {line.strip()!r}")
        exceptions[vulnerability.strip()] = reason.strip()
    return exceptions


def audit(
    installed: dict[str, str],
    pip_audit_report: dict[str, Any],
    latest_record: Callable[[str], dict[str, Any]],
    exceptions: Iterable[str],
) -> Audit:
    """Merge pip-audit's JSON report over `installed` (name -> version) with the latest
    release records of the packages it could not audit."""
    excepted_ids = set(exceptions)
    result = Audit()
    answered = {
        canonical(dependency["name"]): dependency
        for dependency in pip_audit_report["dependencies"]
        if "skip_reason" not in dependency
    }
    found: list[Vulnerability] = []
    unanswered = []
    for name, version in sorted(installed.items()):
        dependency = answered.get(canonical(name))
        if dependency is None:
            unanswered.append((name, version))
            continue
        result.by_service.append((name, version))
        found += _vulnerabilities(name, version, dependency["vulns"], fixed_key="fix_versions")
    with ThreadPoolExecutor(LOOKUP_THREADS) as pool:
        records = list(pool.map(latest_record, [name for name, _ in unanswered]))
    for (name, version), record in zip(unanswered, records, strict=True):
        latest = record["info"]["version"]
        if latest != version:
            result.not_auditable.append((name, version, latest))
            continue
        result.by_latest_record.append((name, version))
        current = [entry for entry in record["vulnerabilities"] if not entry.get("withdrawn")]
        found += _vulnerabilities(name, version, current, fixed_key="fixed_in")
    for vulnerability in found:
        if vulnerability.names() & excepted_ids:
            result.excepted.append(vulnerability)
        else:
            result.vulnerabilities.append(vulnerability)
    return result


def _vulnerabilities(
    package: str, version: str, entries: list[dict[str, Any]], *, fixed_key: str
) -> list[Vulnerability]:
    """One Vulnerability per advisory: an entry whose id is an alias of one already taken
    (PyPI lists a PYSEC and a GHSA record of the same CVE, each naming the other) is the
    same advisory. pip-audit's report calls the fixed versions `fix_versions`, PyPI's
    record `fixed_in`."""
    taken: list[Vulnerability] = []
    for entry in entries:
        vulnerability = Vulnerability(
            package,
            version,
            entry["id"],
            tuple(entry.get("aliases") or ()),
            tuple(entry.get(fixed_key) or ()),
        )
        if not any(vulnerability.names() & other.names() for other in taken):
            taken.append(vulnerability)
    return taken


def fetch_latest_record(name: str) -> dict[str, Any]:
    url = PROJECT_RECORD_URL.format(name=name)
    # An https URL of PyPI's, named by an installed distribution (bandit B310).
    with urllib.request.urlopen(url, timeout=LOOKUP_TIMEOUT_SECONDS) as response:  # nosec B310
        return json.load(response)


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, check=False, capture_output=True, text=True)  # nosec B603


def _venv_output(venv: Path, *arguments: str) -> str:
    finished = _run(str(venv / "bin" / "python"), *arguments)
    if finished.returncode != 0:
        raise RuntimeError(f"{venv}: {' '.join(arguments)} failed: {finished.stderr}")
    return finished.stdout


def installed_packages(venv: Path) -> dict[str, str]:
    """Every distribution in the venv but editable ones (the project itself)."""
    listing = _venv_output(venv, "-m", "pip", "list", "--format", "json", "--exclude-editable")
    return {package["name"]: package["version"] for package in json.loads(listing)}


def run_pip_audit(venv: Path) -> dict[str, Any]:
    site_packages = _venv_output(
        venv, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    ).strip()
    # Exit status 1 means "vulnerabilities found": the JSON report says which, and the
    # exceptions apply to them here, the same way as to the latest-release records.
    finished = _run(
        sys.executable,
        "-m",
        "pip_audit",
        "--vulnerability-service",
        "pypi",
        "--format",
        "json",
        "--progress-spinner",
        "off",
        "--skip-editable",
        "--path",
        site_packages,
    )
    if finished.returncode not in (0, 1) or not finished.stdout.strip():
        raise RuntimeError(f"pip-audit failed ({finished.returncode}): {finished.stderr}")
    return json.loads(finished.stdout)


def _named(packages: Iterable[tuple[str, ...]]) -> str:
    return ", ".join(" ".join(package) for package in packages) or "none"


def main(venvs: list[str]) -> int:
    exceptions = read_exceptions(EXCEPTIONS_FILE.read_text())
    used: set[str] = set()
    failed = False

    def audit_venv(venv: Path) -> Audit:
        return audit(installed_packages(venv), run_pip_audit(venv), fetch_latest_record, exceptions)

    # The venvs are audited at once: most of the time goes waiting on PyPI.
    paths = [Path(venv) for venv in venvs]
    with ThreadPoolExecutor(len(paths) or 1) as pool:
        results = list(pool.map(audit_venv, paths))
    for venv, result in zip(paths, results, strict=True):
        print(
            f"pip-audit {venv}: {result.packages} packages; audited {len(result.by_service)} "
            f"by pip-audit's service and {len(result.by_latest_record)} by their latest "
            f"release's record; not auditable here (installed < latest): "
            f"{_named((n, f'{v} < {latest}') for n, v, latest in result.not_auditable)}"
        )
        for vulnerability in result.excepted:
            matched = vulnerability.names() & exceptions.keys()
            used |= matched
            print(
                f"  excepted: {vulnerability.package} {vulnerability.version} "
                f"{vulnerability.id}: {exceptions[min(matched)]}"
            )
        for vulnerability in result.vulnerabilities:
            failed = True
            print(
                f"  VULNERABLE: {vulnerability.package} {vulnerability.version} "
                f"{vulnerability.id} ({', '.join(vulnerability.aliases) or 'no aliases'}); "
                f"fixed in {', '.join(vulnerability.fixed_in) or 'no release yet'}"
            )
    for stale in sorted(exceptions.keys() - used):
        print(
            f"  note: the exception for {stale} matched nothing: "
            f"remove it from {EXCEPTIONS_FILE.name}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
