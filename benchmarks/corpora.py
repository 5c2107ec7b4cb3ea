"""The real-data benchmark's corpora: releases of public data sets, pinned in
benchmarks/corpora.json (each release's version, date and registry hash), fetched with their
registries' own clients (`npm pack`, `pip download`) into a cache (.bench/corpora), and read
only once the file's hash is the pin's. A file whose hash differs is refused, never read.

A corpus is JSON records (an npm package's data.json: one record per feature, each object
that holds a `__compat`) or opaque records (a wheel's zone files: one per TZif file)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .common import ROOT
from .workload import canonical

PINS = Path(__file__).with_name("corpora.json")
CACHE = ROOT / ".bench" / "corpora"
KINDS = ("json", "opaque")
REGISTRIES = ("npm", "pypi")
TZIF_MAGIC = b"TZif"  # RFC 9636: every zone file starts with it; the wheel's tables do not
ZONEINFO = "tzdata/zoneinfo/"
FETCH_TIMEOUT = 600  # seconds: one tarball or wheel of a few MB


class CorpusError(Exception):
    """A corpus that cannot be replayed: a bad pin, a failed fetch, or a file that is not
    what its pin says (the message names the corpus, the release and the file)."""


@dataclass(frozen=True)
class Pin:
    """One release: its version, its date (the records' `updated_at`), its file's name, and
    the file's hash as its registry publishes it (npm: an SRI `sha512-<base64>` integrity;
    PyPI: a sha256 in hex)."""

    version: str
    updated_at: datetime
    file: str
    algorithm: str
    digest: str  # in the registry's own encoding

    def hash_of(self, path: Path) -> str:
        hasher = hashlib.new(self.algorithm)
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                hasher.update(chunk)
        raw = hasher.digest()
        return base64.b64encode(raw).decode() if self.algorithm == "sha512" else raw.hex()


@dataclass(frozen=True)
class Corpus:
    name: str
    registry: str  # "npm" or "pypi"
    package: str
    kind: str  # "json" or "opaque"
    releases: tuple[Pin, ...]

    @property
    def versions(self) -> str:
        return f"{self.package} {self.releases[0].version} to {self.releases[-1].version}"


@dataclass
class Release:
    """A release's records, as the bytes a put stores (JSON: canonical), by id."""

    version: str
    updated_at: datetime
    records: dict[str, bytes]


def load_pins(path: Path = PINS) -> dict[str, Corpus]:
    """The corpora of the pin file at `path`, by name; CorpusError naming what is wrong."""
    try:
        pins = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise CorpusError(f"{path}: cannot read the pins: {error}") from None
    if not isinstance(pins, dict) or not pins:
        raise CorpusError(f"{path}: the pins must be an object of corpora by name")
    return {name: _corpus(name, spec, path) for name, spec in pins.items()}


def _corpus(name: str, spec: Any, path: Path) -> Corpus:
    where = f"{path}: {name}"
    if not isinstance(spec, dict):
        raise CorpusError(f"{where}: must be an object")
    for field, allowed in (("registry", REGISTRIES), ("kind", KINDS)):
        if spec.get(field) not in allowed:
            raise CorpusError(f"{where}: {field} must be one of {', '.join(allowed)}")
    if not isinstance(spec.get("package"), str) or not isinstance(spec.get("releases"), list):
        raise CorpusError(f"{where}: needs a package (text) and releases (a list)")
    field = "integrity" if spec["registry"] == "npm" else "sha256"
    releases = []
    for n, release in enumerate(spec["releases"]):
        at = f"{where}: releases[{n}]"
        if not isinstance(release, dict):
            raise CorpusError(f"{at}: must be an object")
        for key in ("version", "updated_at", "file", field):
            if not isinstance(release.get(key), str) or not release[key]:
                raise CorpusError(f"{at}: {key} is missing")
        if Path(release["file"]).name != release["file"]:
            raise CorpusError(f"{at}: file must be a file name, not a path")
        try:
            when = datetime.fromisoformat(release["updated_at"])
        except ValueError:
            raise CorpusError(f"{at}: updated_at is not an ISO 8601 time") from None
        if when.tzinfo is None:
            raise CorpusError(f"{at}: updated_at has no UTC offset")
        algorithm, digest = "sha256", release[field]
        if field == "integrity":
            algorithm, _, digest = digest.partition("-")
            if algorithm != "sha512":
                raise CorpusError(f"{at}: integrity must be sha512-<base64>")
        releases.append(Pin(release["version"], when, release["file"], algorithm, digest))
    if not releases:
        raise CorpusError(f"{where}: no releases")
    for before, after in itertools.pairwise(releases):
        if after.updated_at <= before.updated_at:
            raise CorpusError(f"{where}: {after.version} is not dated after {before.version}: "
                              "a replay puts releases in the order of their dates")  # fmt: skip
    return Corpus(name, spec["registry"], spec["package"], spec["kind"], tuple(releases))


def verified(corpus: Corpus, pin: Pin, path: Path) -> Path:
    """`path` if its hash is the pin's; else CorpusError (the file is left for a look)."""
    found = pin.hash_of(path)
    if found != pin.digest:
        raise CorpusError(
            f"{corpus.name} {pin.version}: {path} has {pin.algorithm} {found}, not the pinned "
            f"{pin.digest}: refused (delete it to fetch it again)"
        )
    return path


def fetch(corpus: Corpus, pin: Pin, cache: Path = CACHE) -> Path:
    """The release's file from the cache, verified; fetched first if the cache lacks it."""
    path = cache / corpus.name / pin.file
    if path.exists():
        return verified(corpus, pin, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        command = _fetch_command(corpus, pin, Path(scratch))
        try:
            done = subprocess.run(command, cwd=scratch, capture_output=True, text=True,
                                  timeout=FETCH_TIMEOUT, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise CorpusError(f"{corpus.name} {pin.version}: {command[0]}: {error}") from None
        fetched = Path(scratch) / pin.file
        if done.returncode != 0 or not fetched.exists():
            found = ", ".join(p.name for p in Path(scratch).iterdir()) or "nothing"
            raise CorpusError(
                f"{corpus.name} {pin.version}: {' '.join(command)} gave {found} (exit "
                f"{done.returncode}), not {pin.file}: {done.stderr.strip()[-500:]}"
            )
        verified(corpus, pin, fetched)  # refused before it reaches the cache
        fetched.replace(path)
    return path


def _fetch_command(corpus: Corpus, pin: Pin, into: Path) -> list[str]:
    if corpus.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise CorpusError(f"{corpus.name}: npm is needed to fetch {corpus.package}")
        return [npm, "pack", f"{corpus.package}@{pin.version}", "--pack-destination",
                str(into), "--silent"]  # fmt: skip
    return [sys.executable, "-m", "pip", "download", f"{corpus.package}=={pin.version}",
            "--no-deps", "--only-binary=:all:", "--dest", str(into), "--quiet"]  # fmt: skip


def releases(corpus: Corpus, cache: Path = CACHE, *,
             keep: Callable[[str], bool] = lambda id: True) -> Iterator[Release]:  # fmt: skip
    """Every pinned release, oldest first, with the records whose ids `keep` keeps. Every
    file is fetched and verified before the first release is read."""
    paths = [fetch(corpus, pin, cache) for pin in corpus.releases]
    read = json_records if corpus.kind == "json" else zone_records
    for pin, path in zip(corpus.releases, paths, strict=True):
        try:
            records = {id: data for id, data in read(path) if keep(id)}
        except (OSError, ValueError, KeyError, tarfile.TarError, zipfile.BadZipFile) as error:
            raise CorpusError(f"{corpus.name} {pin.version}: cannot read {path}: {error}") from None
        yield Release(pin.version, pin.updated_at, records)


def json_records(path: Path) -> Iterator[tuple[str, bytes]]:
    """Each feature of an npm tarball's package/data.json: its id the dotted path of names
    (`api.AbortController.abort`), its record its `__compat` as canonical JSON. The feature's
    object holds nothing else but its child features, which are records of their own: with
    them inside, every change to a feature would change each of its ancestors too."""
    with tarfile.open(path, "r:gz") as archive:
        try:
            member = archive.extractfile("package/data.json")
        except KeyError:
            raise ValueError(
                "no package/data.json: a layout this benchmark does not read (releases "
                "before 5 ship one JSON file per folder)"
            ) from None
        data = json.load(member)  # type: ignore[arg-type]
    seen: set[str] = set()
    for name, tree in data.items():
        if name in ("__meta", "browsers"):  # the release's own data, and no features
            continue
        for id, compat in _features(tree, name):
            if id in seen:
                raise ValueError(f"two features have the id {id!r}")
            seen.add(id)
            yield id, canonical(compat)


def _features(tree: Any, path: str) -> Iterator[tuple[str, Any]]:
    if not isinstance(tree, dict):
        return
    if "__compat" in tree:
        yield path, tree["__compat"]
    for name, child in tree.items():
        if name != "__compat":
            yield from _features(child, f"{path}.{name}")


def zone_records(path: Path) -> Iterator[tuple[str, bytes]]:
    """Each zone file of a tzdata wheel, its id the zone's name (`America/New_York`). The
    other files under zoneinfo/ (zone.tab, tzdata.zi...) are tables about the zones."""
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.startswith(ZONEINFO) and not name.endswith("/"):
                data = archive.read(name)
                if data.startswith(TZIF_MAGIC):
                    yield name[len(ZONEINFO) :], data
