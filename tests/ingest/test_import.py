"""`vhs import`: bulk import of JSON Lines and CSV through the ingest contract and write path.

The worker runs on in-process moto (the store, and S3 for s3:// sources); the command runs
on the session's moto server through `vhs import` itself. What is checked: every bad line is
in the report with its file, line, field and reason (the reason the ingest handler gives);
a hot id is written once per chunk whatever the line order; an interrupted import resumes
without storing anything twice or leaving anything out; an S3 prefix is read only for its
import files.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vhs.errors import InvalidInput, InvalidMessage
from vhs.ingest.bulk import Settled
from vhs.ingest.bulk_csv import CsvMapping
from vhs.ingest.bulk_lines import csv_rows, split_lines
from vhs.ingest.bulk_sources import plan_chunks, resolve_sources
from vhs.ingest.contract import read_message
from vhs.ingest.ingestor import Ingestor
from vhs_ops.cli.app import main as vhs
from vhs_ops.cli.importer import ImportRun, open_run
from vhs_testing.backends import Backend
from vhs_testing.calls import count_calls
from vhs_testing.cli import assert_documented
from vhs_testing.stacks import fresh_stack

T0 = "2024-05-01T00:00:00Z"


def message(id: str, at: str = T0, **payload: Any) -> str:
    return json.dumps({"id": id, "updated_at": at, **(payload or {"record": {"id": id}})})


def ingest_reason(line: str) -> tuple[str, str]:
    """The field and reason the ingest handler dead-letters `line` with."""
    try:
        read_message({"body": line}, staging=None, fetch=lambda *_: b"")
    except InvalidMessage as error:
        return error.field, error.reason
    raise AssertionError(f"the handler would store {line!r}")


class Requests:
    """DynamoDB requests the store sends, counted by operation (successful ones apart)."""

    def __init__(self, client: Any) -> None:
        self.sent: Counter[str] = Counter()
        self.succeeded: Counter[str] = Counter()
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, http_response: Any, parsed: dict, model: Any, **_: Any) -> None:
        self.sent[model.name] += 1
        if "Error" not in parsed:
            self.succeeded[model.name] += 1


@pytest.fixture
def ingestor(inprocess: Backend) -> Ingestor:
    return Ingestor(
        inprocess.store(), sqs_client=None, dlq_url="", staging=None, s3_client=inprocess.s3
    )


def run(
    ingestor: Ingestor, sources: list[str], tmp_path: Path, **options: Any
) -> tuple[ImportRun, list[dict[str, Any]]]:
    """Import `sources`; the run and its report's entries."""
    on_settled = options.pop("on_settled", None)
    imported = open_run(
        sources,
        fmt=options.pop("fmt", None),
        mapping=options.pop("mapping", CsvMapping()),
        report_path=tmp_path / "report.jsonl",
        resume=options.pop("resume", False),
        workers=options.pop("workers", 4),
        ingestor=ingestor,
        s3=ingestor.s3,
        **options,
    )
    imported.on_settled = on_settled
    try:
        imported.run()
    finally:
        imported.worker.close()
        imported.report.close()
    report = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text().splitlines()]
    return imported, report


# --- the report -------------------------------------------------------------------------------


def test_every_bad_jsonl_line_is_reported_with_the_handlers_field_and_reason(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    bad = {
        2: '{"id": "b", "updated_at": ',  # not JSON
        4: message("c", colour="red"),  # a field the contract does not have
        5: message("", record=1),  # a bad id
        6: message("d", at="yesterday"),  # a bad timestamp
        7: message("e", record=1, deleted=True),  # two payloads
        8: '{"id": "f", "id": "g", "updated_at": "2024-05-01T00:00:00Z", "record": 1}',
    }
    lines = {1: message("a"), 3: "", **bad, 9: message("h", deleted=True)}
    source = tmp_path / "catalogue.jsonl"
    source.write_text("\n".join(lines[n] for n in sorted(lines)) + "\n")

    imported, report = run(ingestor, [str(source)], tmp_path)

    expected = [
        {"file": str(source), "line": n, "field": f, "reason": r, "outcome": "refused"}
        for n, (f, r) in ((n, ingest_reason(bad[n])) for n in sorted(bad))
    ]
    assert report == expected
    assert [e["field"] for e in report] == ["body", "colour", "id", "updated_at", "record", "id"]
    assert imported.tally.as_json() == {
        "stored": 1,
        "unchanged": 0,
        "stale": 0,
        "deleted": 1,
        "refused": 6,
        "failed": 0,
        "coalesced": 0,
    }
    assert json.loads(ingestor.store.get("a").body) == {"id": "a"}


def test_every_line_is_parsed_and_validated_once(
    ingestor: Ingestor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line is read once, before its chunk is coalesced, and written from that reading: a
    hot id's lines, coalesced or written, and a refused line each parse and validate once."""
    from vhs.codec import encode_record
    from vhs.ingest.contract import validate_message
    from vhs.strict_json import parse_json_body

    calls = count_calls(monkeypatch, parse_json_body, validate_message, encode_record)
    lines = [message(f"id-{n}", record={"n": n}) for n in range(4)]
    lines += [message("hot", at=f"2024-05-0{day}T00:00:00Z", record={"day": day}) for day in (1, 2)]
    lines.append(message("bad", colour="red"))
    source = tmp_path / "catalogue.jsonl"
    source.write_text("\n".join(lines) + "\n")

    imported, report = run(ingestor, [str(source)], tmp_path)

    assert [entry["field"] for entry in report] == ["colour"]
    assert imported.tally.as_json()["stored"] + imported.tally.as_json()["coalesced"] == 6
    assert json.loads(ingestor.store.get("hot").body) == {"day": 2}
    assert calls == {"parse_json_body": 7, "validate_message": 7, "encode_record": 6}


def test_csv_rows_become_messages_by_the_mapping_and_bad_rows_name_their_column(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    source = tmp_path / "export.csv"
    source.write_text(
        "ref,modified,doc,gone\n"  # 1
        'a,2024-05-01T00:00:00Z,"{""title"": ""A""}",\n'  # 2
        'b,2024-05-01T00:00:00Z,"{""title"":\n'  # 3: a row over two lines
        '""two""}",false\n'  # 4
        "c,2024-05-01T00:00:00Z\n"  # 5: too few columns
        "d,last tuesday,{},\n"  # 6: a bad timestamp
        "e,2024-05-01T00:00:00Z,{not json,\n"  # 7: the record column is not JSON
        "f,2024-05-01T00:00:00Z,,true\n"  # 8: a delete
        "g,2024-05-01T00:00:00Z,{},maybe\n"  # 9: a bad delete flag
    )
    mapping = CsvMapping.parse(["id=ref", "updated_at=modified", "record=doc", "deleted=gone"])

    imported, report = run(ingestor, [str(source)], tmp_path, mapping=mapping)

    assert [(e["line"], e["field"]) for e in report] == [
        (5, "doc"),
        (6, "modified"),
        (7, "doc"),
        (9, "gone"),
    ]
    assert report[0]["reason"] == "missing: the row has 2 of 4 columns"
    assert report[1]["reason"] == ingest_reason(message("d", at="last tuesday"))[1]
    assert report[2]["reason"].startswith("not a JSON record: ")
    assert report[3]["reason"] == "must be true, false or empty, not 'maybe'"
    assert json.loads(ingestor.store.get("b").body) == {"title": "two"}
    assert imported.tally.counts["stored"] == 2 and imported.tally.counts["deleted"] == 1


def test_without_a_record_column_the_other_columns_are_the_record(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    source = tmp_path / "plain.csv"
    source.write_text("id,updated_at,title,year\nx,2024-05-01T00:00:00Z,Moby-Dick,1851\n")

    _, report = run(ingestor, [str(source)], tmp_path)

    assert report == []
    assert json.loads(ingestor.store.get("x").body) == {"title": "Moby-Dick", "year": "1851"}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (["id"], "--map"),
        (["title=x"], "--map"),
        (["id=a", "id=b"], "--map id"),
        (["id=a", "record=a"], "--map id"),
    ],
)
def test_a_bad_mapping_is_refused_naming_the_option(options: list[str], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        CsvMapping.parse(options)
    assert refused.value.field == field


def test_a_header_without_a_mapped_column_stops_before_any_row(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    source = tmp_path / "export.csv"
    source.write_text("id,when\na,2024-05-01T00:00:00Z\n")
    with pytest.raises(InvalidInput) as refused:
        run(ingestor, [str(source)], tmp_path)
    assert refused.value.field == "--map updated_at"
    assert "no column 'updated_at'" in refused.value.reason


# --- coalescing -------------------------------------------------------------------------------


def test_a_hot_id_is_written_once_a_chunk_and_ends_at_its_latest_version(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    stamps = [f"2024-05-01T00:{m:02d}:00Z" for m in range(60)]
    shuffled = random.Random(15).sample(stamps, len(stamps))
    source = tmp_path / "hot.jsonl"
    source.write_text("".join(message("hot", at, record={"at": at}) + "\n" for at in shuffled))
    requests = Requests(ingestor.store.index.dynamodb)

    imported, report = run(ingestor, [str(source)], tmp_path, chunk_lines=20)

    # Three chunks: one write each (a read first, delta history), the rest coalesced.
    assert requests.sent["GetItem"] == 3
    assert requests.sent["UpdateItem"] <= 3
    assert imported.tally.coalesced == 57
    assert json.loads(ingestor.store.get("hot").body) == {"at": stamps[-1]}
    assert report == []


# --- resume -----------------------------------------------------------------------------------


class Interrupt:
    """Raise KeyboardInterrupt once `after` lines have settled (as Ctrl-C would)."""

    def __init__(self, after: int) -> None:
        self.after, self.seen = after, 0

    def __call__(self, settled: Settled) -> None:
        self.seen += 1
        if self.seen == self.after:
            raise KeyboardInterrupt


def test_an_interrupted_import_resumes_without_storing_twice_or_missing_a_line(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    ids = [f"r{n:03d}" for n in range(300)]
    bad_lines = {17, 150, 290}  # 1-based lines with a bad timestamp
    source = tmp_path / "big.jsonl"
    source.write_text(
        "".join(
            message(id, at="soon" if n + 1 in bad_lines else T0) + "\n" for n, id in enumerate(ids)
        )
    )
    requests = Requests(ingestor.store.index.dynamodb)

    with pytest.raises(KeyboardInterrupt):
        run(ingestor, [str(source)], tmp_path, chunk_lines=50, on_settled=Interrupt(120))
    first = requests.succeeded["UpdateItem"]
    assert 100 < first < 300
    checkpoint = json.loads((tmp_path / "report.jsonl.checkpoint.json").read_text())
    settled_to = checkpoint["files"][str(source)]["line"]
    assert 100 < settled_to <= 130

    imported, report = run(ingestor, [str(source)], tmp_path, chunk_lines=50, resume=True)

    # The resumed run read nothing below the checkpoint again: one read for write per good
    # line over both runs, and at most the lines in flight at the interruption twice.
    assert len(ids) - len(bad_lines) <= requests.sent["GetItem"] <= len(ids) + 4
    # Each good line stored exactly once over both runs, each bad one reported exactly once.
    assert requests.succeeded["UpdateItem"] == len(ids) - len(bad_lines)
    assert sorted(e["line"] for e in report) == sorted(bad_lines)
    good = [id for n, id in enumerate(ids) if n + 1 not in bad_lines]
    assert [ingestor.store.history(id)[-1].version for id in good] == [1] * len(good)
    assert imported.tally.counts["stored"] + imported.tally.counts["unchanged"] == 297
    assert json.loads((tmp_path / "report.jsonl.checkpoint.json").read_text())["files"][
        str(source)
    ]["done"]


def test_resuming_a_changed_file_is_refused(ingestor: Ingestor, tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text("".join(message(f"id{n}") + "\n" for n in range(10)))
    with pytest.raises(KeyboardInterrupt):
        run(ingestor, [str(source)], tmp_path, chunk_lines=2, on_settled=Interrupt(3))
    source.write_text(source.read_text() + message("late") + "\n")
    with pytest.raises(InvalidInput, match="changed since the interrupted run"):
        run(ingestor, [str(source)], tmp_path, resume=True)


# --- S3 sources ------------------------------------------------------------------------------


@pytest.fixture
def shared_bucket(inprocess: Backend) -> Iterator[str]:
    """A bucket whose imports/ prefix holds import files among other objects."""
    s3, bucket = inprocess.s3, "shared-exports"
    s3.create_bucket(Bucket=bucket)
    objects = {
        "imports/2024/a.jsonl": message("s1") + "\n" + message("s2", at="never") + "\n",
        "imports/2024/b.csv": "id,updated_at,title\ns3,2024-05-01T00:00:00Z,T\n",
        "imports/2024/README.txt": "not an import file",
        "imports/2024/c.jsonl.gz": "not read either",
        "elsewhere/d.jsonl": message("outside") + "\n",
    }
    for key, body in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    yield bucket


def test_an_s3_prefix_is_imported_file_by_file_reading_only_its_import_files(
    ingestor: Ingestor, shared_bucket: str, tmp_path: Path
) -> None:
    files, skipped = resolve_sources([f"s3://{shared_bucket}/imports/"], None, ingestor.s3)
    assert [f.name for f in files] == [
        f"s3://{shared_bucket}/imports/2024/a.jsonl",
        f"s3://{shared_bucket}/imports/2024/b.csv",
    ]
    assert sorted(skipped) == [
        f"s3://{shared_bucket}/imports/2024/README.txt",
        f"s3://{shared_bucket}/imports/2024/c.jsonl.gz",
    ]

    _, report = run(ingestor, [f"s3://{shared_bucket}/imports/"], tmp_path)

    assert [(e["file"], e["line"], e["field"]) for e in report] == [
        (f"s3://{shared_bucket}/imports/2024/a.jsonl", 2, "updated_at")
    ]
    assert {ingestor.store.get(id).id for id in ("s1", "s3")} == {"s1", "s3"}
    assert not ingestor.store.index.read("outside")


def test_plan_cuts_whole_lines_numbered_as_the_file_numbers_them(inprocess: Backend) -> None:
    s3 = inprocess.s3
    s3.create_bucket(Bucket="plans")
    body = "id,updated_at,t\n" + "".join(
        f'r{n},2024-05-01T00:00:00Z,"x\ny"\n' if n % 3 == 0 else f"r{n},{T0},x\n\n"
        for n in range(10)
    )
    s3.put_object(Bucket="plans", Key="p.csv", Body=body.encode())
    (file,), _ = resolve_sources(["s3://plans/p.csv"], None, s3)

    items = list(plan_chunks(file, s3, chunk_lines=4))

    assert items[0]["first_line"] == 2 and len(items) == 3
    raw = body.encode()
    numbered = []
    for item in items:
        chunk = raw[item["start"] : item["end"]]
        rows = csv_rows(
            split_lines([chunk], "p", first_line=item["first_line"], offset=0, keep_blank=True)
        )
        numbered += [(row.number, row.data.split(b",")[0].decode()) for row in rows]
    whole = list(csv_rows(split_lines([raw], "p", keep_blank=True)))[1:]
    assert numbered == [(row.number, row.data.split(b",")[0].decode()) for row in whole]
    assert len(numbered) == 10


# --- the command ------------------------------------------------------------------------------


def test_vhs_import_on_the_local_stack(
    moto_server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = fresh_stack(moto_server, "import", pipeline=False)
    for name, value in stack.env().items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "in.jsonl"
    source.write_text(message("one") + "\n" + message("two", at="later") + "\n")
    report = tmp_path / "report.jsonl"
    # A report in a directory that is not there is refused, not created (a typo).
    missing = str(tmp_path / "out" / "report.jsonl")
    assert vhs(["import", str(source), "--report", missing]) == 2
    assert "--report: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

    status = vhs(["import", str(source), "--report", str(report), "--json"])

    output = json.loads(capsys.readouterr().out)
    assert_documented("vhs import", output)
    assert status == 1  # a line was refused
    assert output["stored"] == 1 and output["refused"] == 1 and output["lines"] == 2
    assert output["report"] == str(report) and output["interrupted"] is False
    (entry,) = [json.loads(line) for line in report.read_text().splitlines()]
    assert (entry["file"], entry["line"], entry["field"]) == (str(source), 2, "updated_at")

    source.write_text(message("one") + "\n")
    assert vhs(["import", str(source), "--report", str(report), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] == 1


# --- the cloud worker -------------------------------------------------------------------------


@pytest.fixture
def import_function(
    inprocess: Backend, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Backend, str]]:
    """The import function's environment on in-process moto: the store, and an import
    bucket holding a catalogue under imports/ among other objects."""
    from vhs import settings, shapes

    bucket = "import-staging"
    inprocess.s3.create_bucket(Bucket=bucket)
    environment = settings.bulk_import_environment(
        settings.StoreSettings(inprocess.table_name, inprocess.bucket_name),
        bucket=bucket,
        prefix=shapes.IMPORT_PREFIX,
        results_prefix=shapes.IMPORT_RESULTS_PREFIX,
        staging_bucket=bucket,
        chunk_lines=3,
    )
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    import handlers.bulk_import as function

    function.ingestor.cache_clear()
    yield inprocess, bucket
    function.ingestor.cache_clear()


def test_the_cloud_worker_plans_chunks_and_imports_them_with_the_files_line_numbers(
    import_function: tuple[Backend, str],
) -> None:
    from vhs_ops.local.invoke import invoke

    backend, bucket = import_function
    lines = [message(f"c{n}") if n not in (2, 7) else message(f"c{n}", at="x") for n in range(8)]
    lines[4] = message("c3", at="2024-05-02T00:00:00Z", record={"v": 2})  # c3 again, later
    backend.s3.put_object(
        Bucket=bucket, Key="imports/run1/a.jsonl", Body="\n".join(lines).encode() + b"\n"
    )
    backend.s3.put_object(
        Bucket=bucket,
        Key="imports/run1/b.csv",
        Body=b"id,updated_at,t\nk1,2024-05-01T00:00:00Z,x\nk2,2024-05-01T00:00:00Z\n",
    )
    backend.s3.put_object(Bucket=bucket, Key="imports/run1/notes.txt", Body=b"skipped")

    planned = invoke("import", {"plan": {"prefix": "imports/run1/"}, "execution": "e1"})

    assert (planned["files"], planned["chunks"], planned["skipped"]) == (2, 4, 1)
    manifest = backend.s3.get_object(Bucket=bucket, Key=planned["manifest_key"])["Body"].read()
    items = [json.loads(line) for line in manifest.splitlines()]
    assert [(i["key"].rsplit("/", 1)[1], i["first_line"]) for i in items] == [
        ("a.jsonl", 1),
        ("a.jsonl", 4),
        ("a.jsonl", 7),
        ("b.csv", 2),
    ]
    results = [
        invoke("import", {"Items": [item], "BatchInput": {"execution": "e1", "mapping": {}}})
        for item in items
    ]

    reports = [uri for r in results for uri in r["reports"]]
    entries = []
    for uri in reports:
        key = uri.removeprefix(f"s3://{bucket}/")
        body = backend.s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        entries += [json.loads(line) for line in body.splitlines()]
    assert [(e["file"].rsplit("/", 1)[1], e["line"], e["field"]) for e in entries] == [
        ("a.jsonl", 3, "updated_at"),
        ("a.jsonl", 8, "updated_at"),
        ("b.csv", 3, "t"),
    ]
    assert all(uri.startswith(f"s3://{bucket}/import-results/e1/reports/") for uri in reports)
    # c0, c1, c3 (its later line: both are in the second chunk), c5, c6 and k1.
    assert sum(r["counts"]["stored"] for r in results) == 6
    assert sum(r["counts"]["coalesced"] for r in results) == 1
    store = backend.store()
    assert json.loads(store.get("c3").body) == {"v": 2}
    assert store.get("k1").id == "k1"


def test_the_cloud_plan_refuses_a_prefix_outside_the_import_prefix(
    import_function: tuple[Backend, str],
) -> None:
    from vhs_ops.local.invoke import invoke

    with pytest.raises(InvalidInput) as refused:
        invoke("import", {"plan": {"prefix": "incoming/"}, "execution": "e2"})
    assert refused.value.field == "prefix"
