"""`python -m benchmarks real-data` (benchmarks/real_data.py, replay.py, corpora.py) on tiny
corpora made here: an npm-like tarball of features and a tzdata-like wheel of zone files,
three releases each, pinned by their hashes and cached as a fetch leaves them. Nothing
reaches a registry: the one fetch tested runs a stand-in `npm` on PATH."""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from vhs import StoreConfig, VersionedHybridStore
from vhs.bodies.packing import ZSTD
from vhs_ops.admin.dictionaries import TrainReport
from vhs_ops.local.stack import client

ROOT = Path(__file__).resolve().parents[2]
# The benchmarks package lives at the repository root, which pytest does not put on sys.path.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import corpora  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402
from benchmarks.corpora import CorpusError  # noqa: E402
from benchmarks.real_data import DICTIONARY, replay_corpus  # noqa: E402
from benchmarks.replay import Replay, share  # noqa: E402
from benchmarks.store import build_systems  # noqa: E402

DATES = ("2025-01-01T00:00:00Z", "2025-02-01T00:00:00.250000Z", "2025-03-01T00:00:00Z")


def compat(text: str) -> dict[str, Any]:
    return {"__compat": {"support": {"firefox": {"version_added": text}}, "status": {}}}


# Release 1 creates three features; release 2 changes api.A, re-sends api.A.b and css.C
# unchanged and adds html.D; release 3 re-sends api.A and html.D, changes api.A.b and drops
# css.C. With every shared id re-delivered stale: 3 after release 2, 3 after release 3.
FEATURES = (
    {"api": {"A": {**compat("1"), "b": compat("1")}}, "css": {"C": compat("1")}},
    {"api": {"A": {**compat("2"), "b": compat("1")}}, "css": {"C": compat("1")},
     "html": {"D": compat("1")}},
    {"api": {"A": {**compat("2"), "b": compat("3")}}, "html": {"D": compat("1")}},
)  # fmt: skip
CLASS_COUNTS = {"create": 4, "change": 2, "touch": 4, "stale": 6}
ZONES = (
    {"Europe/Paris": b"TZif2 paris 1", "UTC": b"TZif2 utc"},
    {"Europe/Paris": b"TZif2 paris 2", "UTC": b"TZif2 utc"},
    {"Europe/Paris": b"TZif2 paris 2", "UTC": b"TZif2 utc", "Asia/Tokyo": b"TZif2 tokyo"},
)


def npm_tarball(features: dict[str, Any], version: str) -> bytes:
    data = {"__meta": {"version": version}, "browsers": {"firefox": {"name": "Firefox"}},
            **features}  # fmt: skip
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, body in (("package/data.json", json.dumps(data).encode()),
                           ("package/package.json", b"{}")):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    # The same bytes whenever it is made (gzip's header would hold the second it was made in),
    # so a tarball made again matches the pin made from the first.
    return gzip.compress(out.getvalue(), mtime=0)


def wheel(zones: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    files = {
        "tzdata/__init__.py": b"",
        "tzdata/zoneinfo/zone.tab": b"FR\t+4852+00220\tEurope/Paris\n",
    }
    files |= {f"tzdata/zoneinfo/{name}": body for name, body in zones.items()}
    with zipfile.ZipFile(out, "w") as archive:
        for name, body in files.items():
            # A fixed time, not the clock's: the same bytes whenever it is made.
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), body)
    return out.getvalue()


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    """(the pin file, the cache) of two corpora, every release already fetched."""
    return write_pins(tmp_path, {
        "tiny-json": [(f"data-1.0.{n}.tgz", npm_tarball(f, f"1.0.{n}"))
                      for n, f in enumerate(FEATURES)],
        "tiny-zones": [(f"tzdata-2025.{n}-py3-none-any.whl", wheel(z))
                       for n, z in enumerate(ZONES)],
    })  # fmt: skip


def write_pins(tmp_path: Path, files: dict[str, list[tuple[str, bytes]]]) -> tuple[Path, Path]:
    """Pins and a cache holding `files`: corpus name -> its releases' (file name, bytes); a
    corpus is npm's JSON when its files are tarballs, else PyPI's zone files."""
    cache, pins = tmp_path / "cache", {}
    for name, releases in files.items():
        npm = releases[0][0].endswith(".tgz")
        (cache / name).mkdir(parents=True)
        pins[name] = {"registry": "npm" if npm else "pypi", "package": "@example/data",
                      "kind": "json" if npm else "opaque", "releases": []}  # fmt: skip
        for n, (file, body) in enumerate(releases):
            (cache / name / file).write_bytes(body)
            digest = {"integrity": integrity(body)} if npm else {
                "sha256": hashlib.sha256(body).hexdigest()}  # fmt: skip
            pins[name]["releases"].append(
                {"version": f"1.0.{n}", "updated_at": DATES[n], "file": file, **digest}
            )
    (tmp_path / "pins.json").write_text(json.dumps(pins))
    return tmp_path / "pins.json", cache


def replay_on(endpoint: str, prefix: str, pins: Path, cache: Path, corpus: str = "tiny-json",
              vhs: dict[str, Any] | None = None) -> tuple[Replay, dict[str, Any]]:  # fmt: skip
    """The corpus replayed on fresh systems, every shared id re-delivered stale."""
    systems = build_systems(endpoint, prefix=prefix, vhs={"VHS": vhs or {}}, diagnostics=False)
    chosen = corpora.load_pins(pins)[corpus]
    replay = Replay(corpus, systems.values(), json_records=chosen.kind == "json",
                    stale_share=1.0, progress=lambda _: None)  # fmt: skip
    for release in corpora.releases(chosen, cache):
        replay.release(release)
    return replay, systems


def test_the_corpora_read_as_one_record_per_feature_and_per_zone_file(tiny: tuple) -> None:
    pins, cache = tiny
    found = corpora.load_pins(pins)
    json_releases = list(corpora.releases(found["tiny-json"], cache))
    assert json_releases[1].records == {
        "api.A": b'{"status":{},"support":{"firefox":{"version_added":"2"}}}',
        "api.A.b": b'{"status":{},"support":{"firefox":{"version_added":"1"}}}',
        "css.C": b'{"status":{},"support":{"firefox":{"version_added":"1"}}}',
        "html.D": b'{"status":{},"support":{"firefox":{"version_added":"1"}}}',
    }
    zones = list(corpora.releases(found["tiny-zones"], cache))
    assert [r.records for r in zones] == list(ZONES)  # zone.tab is no zone file
    assert [r.updated_at.isoformat() for r in zones][1] == "2025-02-01T00:00:00.250000+00:00"


def test_replay_classes_every_put_and_bills_each_class(moto_server: str, tiny: tuple) -> None:
    replay, _ = replay_on(moto_server, "rd-classes", *tiny)
    assert dict(replay.counts) == CLASS_COUNTS
    assert replay.problems() == []
    for system in ("VHS", "pynamodb_mate", "Wellcome 2018", "raw floor"):
        assert {c: replay.bill(system, (c,)).operations for c in CLASS_COUNTS} == CLASS_COUNTS
    mate, wellcome, floor = (replay.bills[s] for s in ("pynamodb_mate", "Wellcome 2018",
                                                        "raw floor"))  # fmt: skip
    # Each class is billed what the peers' algorithms do with it: the floor's stale writes
    # are refused by their condition (and billed), pynamodb_mate, with no ordering, stores
    # them, and Wellcome answers a touch by reading and comparing.
    assert floor["stale"].requests == {"PutItem": 6} and floor["stale"].write_units >= 6
    assert mate["stale"].per_operation("UpdateItem") == 1
    assert set(wellcome["touch"].requests) == {"GetItem", "GetObject"}
    assert replay.bill("VHS").operations == sum(CLASS_COUNTS.values())


def test_opaque_records_replay_as_bytes(moto_server: str, tiny: tuple) -> None:
    replay, systems = replay_on(moto_server, "rd-zones", *tiny, corpus="tiny-zones")
    assert dict(replay.counts) == {"create": 3, "change": 1, "touch": 3, "stale": 4}
    assert replay.problems() == []
    record = systems["VHS"].store.get("Europe/Paris")
    assert (record.content_type, record.body) == ("application/octet-stream", b"TZif2 paris 2")


def test_a_refused_put_fails_the_run_naming_system_and_id(moto_server: str, tiny: tuple) -> None:
    # VHS configured to refuse bodies over 50 bytes: every feature's record is longer.
    replay, _ = replay_on(moto_server, "rd-refused", *tiny, vhs={"max_body_size": 50})
    assert replay.failures["refused"] == 16  # every put, stale ones too: an error each
    assert replay.failures["read-back"] > 0  # nothing was stored to read back
    assert any("refused: VHS, the create of 'api.A' (1.0.0): BodyTooLarge" in p
               for p in replay.problems())  # fmt: skip
    assert not any("pynamodb_mate" in p or "raw floor" in p for p in replay.problems())


def test_a_conditional_refusal_fails_the_run(moto_server: str, tiny: tuple) -> None:
    pins, cache = tiny
    systems = build_systems(moto_server, prefix="rd-floor", diagnostics=False)
    floor = systems["raw floor"]
    # Another writer's later version: the floor's create of api.A is refused by its condition.
    later = {"id": {"S": "api.A"}, "t": {"S": "2099-01-01T00:00:00+00:00"}, "b": {"B": b"{}"}}
    floor.dynamodb.put_item(TableName=floor.table, Item=later)
    replay = Replay("tiny-json", [floor], json_records=True, stale_share=0.0,
                    progress=lambda _: None)  # fmt: skip
    replay.release(next(corpora.releases(corpora.load_pins(pins)["tiny-json"], cache)))
    assert replay.failures == {"refused": 1, "read-back": 1}
    assert replay.problems()[0] == (
        "tiny-json: refused: raw floor, the create of 'api.A' (1.0.0): said 'refused'"
    )


def test_a_read_back_that_differs_fails_the_run(moto_server: str, tiny: tuple) -> None:
    replay, systems = replay_on(moto_server, "rd-readback", *tiny)
    wellcome = systems["Wellcome 2018"]
    row = wellcome.dynamodb.get_item(TableName=wellcome.table, Key={"id": {"S": "html.D"}})
    # Someone else's bytes under the key Wellcome's item names.
    wellcome.s3.put_object(Bucket=wellcome.bucket, Key=row["Item"]["s3key"]["S"], Body=b"{}")
    replay.read_back(wellcome, ["api.A", "html.D"])
    assert replay.failures == {"read-back": 1}
    assert replay.problems() == [
        "tiny-json: read-back: Wellcome 2018, 'html.D' after 1.0.2: read back 2 bytes that "
        "differ from what was put"
    ]


def test_a_cached_file_whose_hash_differs_is_refused(tiny: tuple) -> None:
    pins, cache = tiny
    corpus = corpora.load_pins(pins)["tiny-zones"]
    path = cache / "tiny-zones" / corpus.releases[1].file
    path.write_bytes(wheel({"UTC": b"TZif2 not the pinned release"}))
    with pytest.raises(CorpusError, match=r"tiny-zones 1\.0\.1: .* not the pinned .*: refused"):
        list(corpora.releases(corpus, cache))


def stand_in_npm(tmp_path: Path, body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `npm` on PATH whose `pack` leaves `body` where npm would leave the tarball."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "body").write_bytes(body)
    npm = tmp_path / "bin" / "npm"
    npm.write_text("#!/bin/sh\n"
                   'while [ $# -gt 1 ] && [ "$1" != --pack-destination ]; do shift; done\n'
                   f'cp {tmp_path / "body"} "$2/data-1.0.0.tgz"\n')  # fmt: skip
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


def test_a_fetched_file_is_cached_only_if_its_hash_is_the_pins(
    tiny: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pins, cache = tiny
    corpus = corpora.load_pins(pins)["tiny-json"]
    (cache / "tiny-json" / "data-1.0.0.tgz").unlink()
    stand_in_npm(tmp_path, npm_tarball(FEATURES[1], "1.0.0"), monkeypatch)
    with pytest.raises(CorpusError, match="not the pinned"):
        corpora.fetch(corpus, corpus.releases[0], cache)
    assert sorted(p.name for p in (cache / "tiny-json").iterdir()) == [
        "data-1.0.1.tgz", "data-1.0.2.tgz"]  # fmt: skip
    (tmp_path / "body").write_bytes(npm_tarball(FEATURES[0], "1.0.0"))
    assert corpora.fetch(corpus, corpus.releases[0], cache).parent == cache / "tiny-json"


def test_pins_out_of_date_order_are_refused(tmp_path: Path, tiny: tuple) -> None:
    pins = json.loads(tiny[0].read_text())
    pins["tiny-zones"]["releases"][2]["updated_at"] = DATES[0]
    (tmp_path / "bad.json").write_text(json.dumps(pins))
    with pytest.raises(CorpusError, match=r"tiny-zones: 1\.0\.2 is not dated after 1\.0\.1"):
        corpora.load_pins(tmp_path / "bad.json")


def test_the_sample_of_an_id_never_moves() -> None:
    # The quick mode's sample is every id whose share is under --sample: the same ids in
    # every run and on every machine.
    assert share("api.AbortController.abort") == pytest.approx(0.61020159, abs=1e-8)


def test_the_command_writes_a_section_per_corpus(tiny: tuple, tmp_path: Path) -> None:
    pins, cache = tiny
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    code = main(["real-data", "--pins", str(pins), "--cache", str(cache), "--stale", "1",
                 "--write", str(doc)])  # fmt: skip
    assert code == 0
    text = doc.read_text()
    for name in ("tiny-json", "tiny-zones"):
        assert f"<!-- real-data.{name}:start -->" in text
    assert "| touch (same body, later date) | 4 |" in text
    assert "Checks: every put accepted and every read-back equal to what was put" in text


def test_the_command_fails_on_a_refused_file(tiny: tuple, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:  # fmt: skip
    pins, cache = tiny
    (cache / "tiny-json" / "data-1.0.2.tgz").write_bytes(b"not a tarball")
    doc = tmp_path / "benchmarks.md"
    code = main(["real-data", "--pins", str(pins), "--cache", str(cache), "--corpus",
                 "tiny-json", "--write", str(doc)])  # fmt: skip
    assert code == 1
    assert "check failed: tiny-json 1.0.2:" in capsys.readouterr().err
    assert "real-data" not in doc.read_text()


def test_a_share_out_of_range_is_refused_naming_the_option(capsys: pytest.CaptureFixture) -> None:
    assert main(["real-data", "--sample", "0"]) == 1
    assert "--sample must be in (0, 1] and --stale in [0, 1], not 0.0 and 0.02" in (
        capsys.readouterr().err
    )


def test_the_dictionary_configuration_trains_after_the_first_release_and_writes_with_it(
    moto_server: str, tmp_path: Path
) -> None:
    """`VHS + dictionary` trains its dictionary on its own table once the first release is in
    (enough inline bodies), publishes it, and the next release's writes pack with it; the
    read-backs stay equal to what was put."""
    features = [
        {"api": {f"F{n}": compat(f"{n % 7}") for n in range(60)}},
        {"api": {f"F{n}": compat(f"{n % 7 + (n % 3 == 0)}") for n in range(60)}},
    ]
    pins, cache = write_pins(tmp_path, {
        "wide-json": [(f"data-1.0.{n}.tgz", npm_tarball(f, f"1.0.{n}"))
                      for n, f in enumerate(features)],
    })  # fmt: skip
    options = argparse.Namespace(sample=1.0, stale=0.0, cache=str(cache))
    corpus = corpora.load_pins(pins)["wide-json"]
    replay, _ = replay_corpus(corpus, moto_server, options, lambda _: None)

    trained = replay.trained[DICTIONARY]
    assert isinstance(trained, TrainReport) and trained.published, trained
    assert replay.failures == {}
    table = "real-wide-json-vhs-1"  # the second configuration's (benchmarks/store.py)
    store = VersionedHybridStore(table, table, StoreConfig(prefix="bench"),
                                 s3_client=client("s3", moto_server),
                                 dynamodb_client=client("dynamodb", moto_server))  # fmt: skip
    changed = [f"api.F{n}" for n in range(0, 60, 3)]
    items = [store.index.read(id) for id in changed]
    assert {item.current.dictionary for item in items} == {trained.dictionary}
    assert {item.current.codec for item in items} == {ZSTD}


def test_too_few_bodies_to_train_on_is_said_in_the_section(tiny: tuple, tmp_path: Path) -> None:
    pins, cache = tiny
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    assert main(["real-data", "--pins", str(pins), "--cache", str(cache), "--corpus",
                 "tiny-json", "--write", str(doc)]) == 0  # fmt: skip
    assert (f"{DICTIONARY}: dictionary not trained (--sample: the table holds 3 inline bodies"
            in doc.read_text())  # fmt: skip
