"""tools/dependency_audit.py: how pip-audit's report and PyPI's latest-release records merge."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "dependency_audit.py"
_spec = importlib.util.spec_from_file_location("dependency_audit", SCRIPT)
assert _spec and _spec.loader
dependency_audit = importlib.util.module_from_spec(_spec)
sys.modules["dependency_audit"] = dependency_audit  # dataclasses look their module up
_spec.loader.exec_module(dependency_audit)

MINERVA = {
    "id": "PYSEC-2026-1325",
    "aliases": ["CVE-2024-23342", "GHSA-wj6h-64fc-37mp"],
    "fixed_in": [],
}
MINERVA_GHSA = {
    "id": "GHSA-wj6h-64fc-37mp",
    "aliases": ["CVE-2024-23342", "PYSEC-2026-1325"],
    "fixed_in": [],
}


def skipped(name: str) -> dict[str, str]:
    return {"name": name, "skip_reason": f"Dependency not found on PyPI: {name}"}


def records(**latest: tuple[str, list[dict[str, Any]]]) -> Any:
    def lookup(name: str) -> dict[str, Any]:
        version, vulnerabilities = latest[name]
        return {"info": {"version": version}, "vulnerabilities": vulnerabilities}

    return lookup


def test_pip_audit_answers_are_used_as_they_are() -> None:
    report = {
        "dependencies": [
            {
                "name": "Requests",
                "version": "2.0.0",
                "vulns": [{"id": "GHSA-x", "aliases": ["CVE-1"], "fix_versions": ["2.1.0"]}],
            }
        ]
    }
    result = dependency_audit.audit({"requests": "2.0.0"}, report, records(), exceptions=[])
    assert result.by_service == [("requests", "2.0.0")]
    (vulnerability,) = result.vulnerabilities
    assert (vulnerability.id, vulnerability.fixed_in) == ("GHSA-x", ("2.1.0",))


def test_a_skipped_package_at_its_latest_release_is_audited_from_its_record() -> None:
    report = {"dependencies": [skipped("ecdsa"), skipped("rich")]}
    lookup = records(ecdsa=("0.19.2", [MINERVA, MINERVA_GHSA]), rich=("15.0.0", []))
    result = dependency_audit.audit(
        {"ecdsa": "0.19.2", "rich": "15.0.0"}, report, lookup, exceptions=[]
    )
    assert result.by_latest_record == [("ecdsa", "0.19.2"), ("rich", "15.0.0")]
    # The PYSEC and GHSA records of one CVE name each other: one vulnerability.
    assert [v.id for v in result.vulnerabilities] == ["PYSEC-2026-1325"]


def test_a_skipped_package_behind_its_latest_release_is_not_auditable() -> None:
    report = {"dependencies": [skipped("setuptools")]}
    lookup = records(setuptools=("84.2.1", []))
    result = dependency_audit.audit({"setuptools": "65.5.0"}, report, lookup, exceptions=[])
    assert result.not_auditable == [("setuptools", "65.5.0", "84.2.1")]
    assert result.by_latest_record == result.vulnerabilities == []


def test_an_exception_matches_an_alias_and_withdrawn_advisories_do_not_count() -> None:
    report = {"dependencies": [skipped("ecdsa")]}
    withdrawn = {"id": "PYSEC-OLD", "aliases": [], "withdrawn": "2025-01-01"}
    lookup = records(ecdsa=("0.19.2", [MINERVA, withdrawn]))
    result = dependency_audit.audit(
        {"ecdsa": "0.19.2"}, report, lookup, exceptions=["GHSA-wj6h-64fc-37mp"]
    )
    assert [v.id for v in result.excepted] == ["PYSEC-2026-1325"]
    assert result.vulnerabilities == []


def test_exceptions_need_a_reason() -> None:
    text = "# comment\n\nGHSA-wj6h-64fc-37mp  # checkov verifies with ecdsa; signing is affected\n"
    assert list(dependency_audit.read_exceptions(text)) == ["GHSA-wj6h-64fc-37mp"]
    with pytest.raises(ValueError, match="must say why"):
        dependency_audit.read_exceptions("GHSA-wj6h-64fc-37mp  # fine\n")


def test_the_committed_exceptions_file_reads() -> None:
    assert dependency_audit.read_exceptions(dependency_audit.EXCEPTIONS_FILE.read_text())
