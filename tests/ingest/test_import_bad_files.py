"""Bulk import of files an attacker (or an exporter that does not follow RFC 4180) could
write: every line ends in exactly one outcome (stored, refused with its line number and
reason, or its chunk failed with a reason), in linear work and bounded memory.

Empty files and ranges; a line longer than the largest ingest message; CSV rows split by the
csv module's rules (a stray quote is data; a quoted field that never closes is one bounded
row, refused); a retried chunk's report; keys outside the import prefix; an export replaced
between listing and reading (S3's If-Match, a local file's size and mtime); a local file
name that is not UTF-8.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_import import T0, Interrupt, import_function, ingestor, message, run

from vhs.errors import ExportChanged, InvalidInput
from vhs.ingest.bulk_csv import CsvMapping
from vhs.ingest.bulk_lines import MAX_LINE_BYTES, Line, csv_rows, split_lines
from vhs.ingest.bulk_sources import file_lines, resolve_sources
from vhs.ingest.ingestor import Ingestor
from vhs_testing.backends import Backend

__all__ = ["import_function", "ingestor"]  # the fixtures, from test_import


def invoke(event: dict[str, Any]) -> Any:
    from vhs_ops.local.invoke import invoke as invoke_function

    return invoke_function("import", event)


def chunk_event(item: dict[str, Any], execution: str = "e1") -> dict[str, Any]:
    return {"Items": [item], "BatchInput": {"execution": execution, "mapping": {}}}


def planned_items(backend: Backend, planned: dict[str, Any]) -> list[dict[str, Any]]:
    body = backend.s3.get_object(Bucket=planned["bucket"], Key=planned["manifest_key"])["Body"]
    return [json.loads(line) for line in body.read().splitlines()]


def requests_of(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every `operation` request `client` sends from now on."""
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.s3.{operation}", lambda params, **_: sent.append(dict(params))
    )
    return sent


# --- empty files and ranges ------------------------------------------------------------------


def test_an_empty_file_is_zero_lines_locally_and_from_s3(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "a.jsonl").write_text(message("local") + "\n")
    (exports / "empty.jsonl").write_bytes(b"")
    (exports / "empty.csv").write_bytes(b"")
    s3 = ingestor.s3
    s3.create_bucket(Bucket="empty-exports")
    for key, body in {
        "x/a.jsonl": message("remote") + "\n",
        "x/e.jsonl": "",
        "x/e.csv": "",
    }.items():
        s3.put_object(Bucket="empty-exports", Key=key, Body=body.encode())
    gets = requests_of(s3, "GetObject")

    imported, report = run(ingestor, [str(exports), "s3://empty-exports/x/"], tmp_path)

    assert report == []
    assert imported.tally.counts["stored"] == 2 and sum(imported.tally.counts.values()) == 2
    assert [g["Key"] for g in gets] == ["x/a.jsonl"]  # an empty range is never asked for
    checkpoint = json.loads((tmp_path / "report.jsonl.checkpoint.json").read_text())
    assert all(state["done"] for state in checkpoint["files"].values())
    assert len(checkpoint["files"]) == 6


def test_the_cloud_plan_gives_an_empty_file_no_chunk(
    import_function: tuple[Backend, str],
) -> None:
    backend, bucket = import_function
    for key in ("imports/e/empty.jsonl", "imports/e/empty.csv"):
        backend.s3.put_object(Bucket=bucket, Key=key, Body=b"")
    backend.s3.put_object(Bucket=bucket, Key="imports/e/a.jsonl", Body=message("a").encode())

    planned = invoke({"plan": {"prefix": "imports/e/"}, "execution": "e1"})

    assert (planned["files"], planned["chunks"]) == (3, 1)
    (item,) = planned_items(backend, planned)
    assert item["key"] == "imports/e/a.jsonl"
    assert invoke(chunk_event(item))["counts"]["stored"] == 1


# --- a retried chunk's report ----------------------------------------------------------------


def test_a_retried_chunk_replaces_its_report_with_the_final_outcome(
    import_function: tuple[Backend, str],
) -> None:
    import handlers.bulk_import as function
    from vhs.errors import ImportIncomplete

    backend, bucket = import_function
    lines = [message("r1"), message("r2"), message("r3", at="never")]
    backend.s3.put_object(Bucket=bucket, Key="imports/r/a.jsonl", Body="\n".join(lines).encode())
    planned = invoke({"plan": {"prefix": "imports/r/"}, "execution": "e1"})
    (item,) = planned_items(backend, planned)
    report = f"import-results/e1/reports/imports/r/a.jsonl/{1:012d}.jsonl"

    def read_report() -> list[tuple[int, str]]:
        body = backend.s3.get_object(Bucket=bucket, Key=report)["Body"].read().decode()
        return sorted((e["line"], e["outcome"]) for e in map(json.loads, body.splitlines()))

    # The first attempt: DynamoDB denies the write of r2 (permanent: failed at once).
    dynamodb = function.ingestor().store.index.dynamodb

    def deny_r2(params: dict[str, Any], **_: Any) -> Any:
        if json.loads(params["body"])["Key"]["id"]["S"] == "r2":  # the serialised request
            error = {"Code": "AccessDeniedException", "Message": "denied"}
            return SimpleNamespace(status_code=400), {
                "Error": error,
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
        return None

    dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", deny_r2)
    with pytest.raises(ImportIncomplete):
        invoke(chunk_event(item))
    dynamodb.meta.events.unregister("before-call.dynamodb.UpdateItem", deny_r2)
    assert read_report() == [(2, "failed"), (3, "refused")]

    # The retry stores r2: the report lists only what is still not stored.
    retried = invoke(chunk_event(item))
    assert retried["counts"]["stored"] == 1 and retried["counts"]["unchanged"] == 1
    assert read_report() == [(3, "refused")]

    # Once every line is in, no report is left at all.
    backend.s3.put_object(
        Bucket=bucket, Key="imports/r/a.jsonl", Body="\n".join(lines[:2]).encode()
    )
    (item,) = planned_items(backend, invoke({"plan": {"prefix": "imports/r/"}, "execution": "e1"}))
    assert invoke(chunk_event(item))["reports"] == []
    with pytest.raises(backend.s3.exceptions.NoSuchKey):
        backend.s3.get_object(Bucket=bucket, Key=report)


# --- CSV rows by the csv module's rules --------------------------------------------------------


def rows_of(text: str, **options: Any) -> list[Line]:
    return list(csv_rows(split_lines([text.encode()], "f.csv", keep_blank=True), **options))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='a,"\n', max_size=40))
def test_csv_rows_are_the_rows_the_csv_module_reads(text: str) -> None:
    """Any text of commas, quotes and line breaks: the same rows, row for row, as the csv
    module reading the whole file (blank lines between rows apart, which both skip), but a
    quoted field left open at the end, which is refused."""
    whole = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    rows = rows_of(text)
    if rows and rows[-1].refused is not None:
        # A quoted field open at the end: the module's last row, refused.
        assert rows[-1].refused[1].endswith("is not closed at the end")
        assert len(whole) == len(rows)
        rows, whole = rows[:-1], whole[:-1]
    assert all(row.refused is None for row in rows)
    assert [next(csv.reader([row.data.decode()])) for row in rows] == whole


def test_a_stray_quote_is_data_and_every_later_row_is_its_own_in_linear_work() -> None:
    """`12" vinyl` in an unquoted field opens nothing: each of the 40,000 rows after it is a
    row of its own, yielded before the next line is read (no gluing, nothing re-scanned)."""
    later = 40_000
    pulled = yielded = 0

    def lines() -> Iterator[Line]:
        nonlocal pulled
        texts = [b'a1,12" vinyl,x'] + [f"a{n},LP,y".encode() for n in range(2, later + 2)]
        for number, data in enumerate(texts, start=2):
            pulled += 1
            # Bounded look-ahead: a row is yielded as soon as its last line is read.
            assert pulled - yielded <= 1, f"line {number} read with {pulled - yielded} unsent"
            yield Line("f.csv", number, data, number * 100)

    rows = []
    for row in csv_rows(lines()):
        yielded += 1
        rows.append(row)

    assert len(rows) == later + 1
    assert next(csv.reader([rows[0].data.decode()])) == ["a1", '12" vinyl', "x"]
    assert [r.number for r in rows] == list(range(2, later + 3))
    assert all(r.span == 1 and r.refused is None for r in rows)


def test_a_quoted_field_that_never_closes_is_one_bounded_row_and_reading_resumes() -> None:
    text = 'id,t\na,"open\n' + "b,filler\n" * 5 + "c,1\nd,2\n"
    rows = rows_of(text, max_bytes=40)

    refused = rows[1]
    assert (refused.number, refused.refused[0]) == (2, "row")  # type: ignore[index]
    assert "opened on line 2 is still open on line 6" in refused.refused[1]  # type: ignore[index]
    assert refused.data == b""
    # Every physical line is in exactly one row: the refused row covers lines 2..6.
    assert [(r.number, r.span) for r in rows] == [(1, 1), (2, 5), (7, 1), (8, 1), (9, 1)]
    assert [r.data for r in rows[2:]] == [b"b,filler", b"c,1", b"d,2"]


def test_an_import_stores_every_row_after_a_stray_quote(ingestor: Ingestor, tmp_path: Path) -> None:
    source = tmp_path / "vinyl.csv"
    rows = [f"v{n},{T0},LP {n}" for n in range(60)]
    rows[3] = f'v3,{T0},12" vinyl'
    source.write_text("id,updated_at,title\n" + "\n".join(rows) + "\n")

    imported, report = run(ingestor, [str(source)], tmp_path)

    assert report == []
    assert imported.tally.counts["stored"] == 60
    assert json.loads(ingestor.store.get("v3").body) == {"title": '12" vinyl'}
    assert json.loads(ingestor.store.get("v59").body) == {"title": "LP 59"}


def test_an_import_refuses_an_unclosed_quote_as_one_row_and_stores_what_follows(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    # Enough lines of 10 kB to take the open field past the bound, and a few more.
    filler = [f"f{n},{T0},{'x' * 10_000}" for n in range(MAX_LINE_BYTES // 10_000 + 3)]
    after = [f"z{n},{T0},ok" for n in range(3)]
    source = tmp_path / "open.csv"
    source.write_text(
        "id,updated_at,title\n"
        + "\n".join([f"a,{T0},fine", f'b,{T0},"never closed', *filler, *after])
        + "\n"
    )

    imported, report = run(ingestor, [str(source)], tmp_path)

    (entry,) = report
    assert (entry["line"], entry["field"], entry["outcome"]) == (3, "row", "refused")
    last = int(entry["reason"].split("still open on line ")[1].split(",")[0])
    last_filler = 3 + len(filler)
    assert 3 < last < last_filler  # the bound was passed inside the filler
    # Read afresh after the refused row: the rest of the filler, then the three after it.
    assert imported.tally.counts["stored"] == 1 + (last_filler - last) + 3
    assert sum(imported.tally.counts.values()) == 1 + 1 + (last_filler - last) + 3
    for id in ("a", "z0", "z2"):
        assert ingestor.store.get(id).id == id


# --- a bound on a line ------------------------------------------------------------------------


def test_a_line_fifty_times_the_bound_is_refused_without_being_held(tmp_path: Path) -> None:
    """ "Never loaded whole": reading a file with a line of 50 times the bound (no line feed
    for 50 MiB) holds at most about the bound and a read chunk."""
    source = tmp_path / "huge.jsonl"
    with source.open("wb") as out:
        out.write(message("before").encode() + b"\n")
        block = b"y" * (1024 * 1024)
        for _ in range(50 * MAX_LINE_BYTES // len(block)):
            out.write(block)
        out.write(b"\n" + message("after").encode() + b"\n")
    (file,), _ = resolve_sources([str(source)], None)

    tracemalloc.start()
    try:
        lines = list(file_lines(file))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 4 * MAX_LINE_BYTES
    assert [(line.number, line.refused is None) for line in lines] == [
        (1, True),
        (2, False),
        (3, True),
    ]
    assert lines[1].refused == (
        "line",
        f"is {50 * MAX_LINE_BYTES} bytes, over the limit of {MAX_LINE_BYTES} bytes "
        "(the largest ingest message)",
    )
    assert lines[1].end == len(message("before")) + 1 + 50 * MAX_LINE_BYTES + 1
    assert lines[2].data == message("after").encode()


@pytest.mark.parametrize("terminated", [True, False])
def test_a_long_line_is_refused_and_reading_resumes_at_the_next_line_feed(
    ingestor: Ingestor, tmp_path: Path, terminated: bool
) -> None:
    long = message("long", record={"pad": "p" * MAX_LINE_BYTES})
    source = tmp_path / "long.jsonl"
    lines = [message("one"), long, message("two")] if terminated else [message("one"), long]
    source.write_text("\n".join(lines) + ("\n" if terminated else ""))

    imported, report = run(ingestor, [str(source)], tmp_path)

    assert [(e["line"], e["field"], e["outcome"]) for e in report] == [(2, "line", "refused")]
    assert f"over the limit of {MAX_LINE_BYTES} bytes" in report[0]["reason"]
    assert imported.tally.counts["stored"] == len(lines) - 1
    assert not ingestor.store.index.read("long")


def test_the_cloud_plan_and_worker_refuse_a_long_line_and_keep_the_others(
    import_function: tuple[Backend, str],
) -> None:
    backend, bucket = import_function
    lines = [message(f"k{n}") for n in range(5)]
    lines[1] = "x" * (3 * MAX_LINE_BYTES)  # no JSON: were it held, it would be refused as one
    backend.s3.put_object(Bucket=bucket, Key="imports/l/a.jsonl", Body="\n".join(lines).encode())

    planned = invoke({"plan": {"prefix": "imports/l/"}, "execution": "e1"})
    results = [invoke(chunk_event(item)) for item in planned_items(backend, planned)]

    (uri,) = [uri for r in results for uri in r["reports"]]
    body = backend.s3.get_object(Bucket=bucket, Key=uri.split("/", 3)[3])["Body"].read()
    assert [(e["line"], e["field"]) for e in map(json.loads, body.splitlines())] == [(2, "line")]
    assert sum(r["counts"]["stored"] for r in results) == 4


# --- the chunk worker reads only what the plan names -----------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"key": "incoming/secret.jsonl"}, "key"),
        ({"key": "import-results/e0/manifest.jsonl"}, "key"),
        ({"etag": None}, "etag"),
        ({"format": "xml"}, "format"),
        ({"start": "0"}, "start"),
        ({"end": -1}, "end"),
    ],
)
def test_the_chunk_worker_refuses_an_item_outside_the_import_prefix_or_without_its_etag(
    import_function: tuple[Backend, str], change: dict[str, Any], field: str
) -> None:
    import handlers.bulk_import as function

    backend, bucket = import_function
    backend.s3.put_object(Bucket=bucket, Key="incoming/secret.jsonl", Body=message("s").encode())
    backend.s3.put_object(Bucket=bucket, Key="imports/p/a.jsonl", Body=message("a").encode())
    (item,) = planned_items(backend, invoke({"plan": {"prefix": "imports/p/"}, "execution": "e1"}))
    gets = requests_of(function.ingestor().s3, "GetObject")

    with pytest.raises(InvalidInput) as refused:
        invoke(chunk_event({**item, **change}))

    assert refused.value.field == field
    assert gets == []  # nothing was read
    assert not backend.store().index.read("s")


# --- a replaced export -----------------------------------------------------------------------


def test_a_chunk_of_an_export_replaced_since_the_plan_fails_naming_both_etags(
    import_function: tuple[Backend, str],
) -> None:
    backend, bucket = import_function
    key = "imports/c/a.jsonl"
    old = backend.s3.put_object(Bucket=bucket, Key=key, Body=message("old").encode())["ETag"]
    (item,) = planned_items(backend, invoke({"plan": {"prefix": "imports/c/"}, "execution": "e1"}))
    assert item["etag"] == old
    new = backend.s3.put_object(Bucket=bucket, Key=key, Body=message("new").encode())["ETag"]

    with pytest.raises(ExportChanged) as changed:
        invoke(chunk_event(item))

    assert changed.value.name == f"s3://{bucket}/{key}"
    assert (changed.value.expected, changed.value.found) == (f"ETag {old}", f"ETag {new}")
    assert old in str(changed.value) and new in str(changed.value)
    assert not backend.store().index.read("new") and not backend.store().index.read("old")


def changed_after_listing(
    ingestor: Ingestor, source: str, tmp_path: Path, change: Callable[[], None]
) -> ExportChanged:
    """What importing `source` raises when `change` runs between its listing and its read."""
    from vhs_ops.cli.importer import open_run

    imported = open_run(
        [source],
        fmt=None,
        mapping=CsvMapping(),
        report_path=tmp_path / "listed.jsonl",
        resume=False,
        workers=2,
        ingestor=ingestor,
        s3=ingestor.s3,
    )
    change()
    try:
        with pytest.raises(ExportChanged) as changed:
            imported.run()
    finally:
        imported.worker.close()
        imported.report.close()
    return changed.value


def test_an_s3_export_replaced_after_listing_or_before_a_resume_is_refused(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    s3 = ingestor.s3
    s3.create_bucket(Bucket="moving-exports")
    body = "".join(message(f"m{n}") + "\n" for n in range(10))
    old = s3.put_object(Bucket="moving-exports", Key="x/a.jsonl", Body=body.encode())["ETag"]

    # Replaced between the listing and the read: If-Match refuses the read.
    def replace() -> None:
        s3.put_object(Bucket="moving-exports", Key="x/a.jsonl", Body=body.replace("m", "n"))

    changed = changed_after_listing(ingestor, "s3://moving-exports/x/", tmp_path, replace)
    assert changed.name == "s3://moving-exports/x/a.jsonl" and changed.expected == f"ETag {old}"
    assert not ingestor.store.index.read("n0")

    # Replaced after an interruption: --resume refuses it (its ETag is not the checkpoint's).
    with pytest.raises(KeyboardInterrupt):
        run(ingestor, ["s3://moving-exports/x/"], tmp_path, chunk_lines=2, on_settled=Interrupt(3))
    s3.put_object(Bucket="moving-exports", Key="x/a.jsonl", Body=body.encode() + b"\n")
    with pytest.raises(InvalidInput, match="changed since the interrupted run"):
        run(ingestor, ["s3://moving-exports/x/"], tmp_path, resume=True)


def test_a_local_file_changed_after_listing_is_refused(ingestor: Ingestor, tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text(message("first") + "\n")

    def rewrite() -> None:
        source.write_text(message("second") + "\n" + message("third") + "\n")

    changed = changed_after_listing(ingestor, str(source), tmp_path, rewrite)
    assert changed.name == str(source) and changed.found.startswith(f"{source.stat().st_size} ")
    assert not ingestor.store.index.read("second")


# --- a file name that is not UTF-8 -----------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_reported_escaped_and_resumes(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    raw = os.path.join(os.fsencode(exports), b"caf\xe9-\xff.jsonl")
    with open(raw, "wb") as out:
        out.write("".join(message(f"u{n}") + "\n" for n in range(6)).encode())
        out.write(message("late", at="soon").encode() + b"\n")
    escaped = f"{exports}/caf\\xe9-\\xff.jsonl"

    with pytest.raises(KeyboardInterrupt):
        run(ingestor, [str(exports)], tmp_path, chunk_lines=2, on_settled=Interrupt(3))
    _, report = run(ingestor, [str(exports)], tmp_path, chunk_lines=2, resume=True)

    assert [(e["file"], e["line"], e["field"]) for e in report] == [(escaped, 7, "updated_at")]
    report_bytes = (tmp_path / "report.jsonl").read_bytes()
    assert report_bytes.decode("utf-8").count("caf\\\\xe9-\\\\xff.jsonl") == 1
    checkpoint = json.loads((tmp_path / "report.jsonl.checkpoint.json").read_text())
    assert list(checkpoint["files"]) == [escaped] and checkpoint["files"][escaped]["done"]
    assert {ingestor.store.get(f"u{n}").id for n in range(6)} == {f"u{n}" for n in range(6)}


# --- all of it at once ---------------------------------------------------------------------


def test_a_hostile_export_ends_with_every_line_in_exactly_one_outcome(
    ingestor: Ingestor, tmp_path: Path
) -> None:
    """A stray quote, a line three times the bound, an empty file and a name that is not
    UTF-8, in one directory: each line is stored or in the report, once."""
    exports = tmp_path / "exports"
    exports.mkdir()
    csv_rows_text = [f"q{n},{T0},LP {n}" for n in range(20)]
    csv_rows_text[0] = f'q0,{T0},12" vinyl'
    (exports / "a.csv").write_text("id,updated_at,title\n" + "\n".join(csv_rows_text) + "\n")
    long = [message("l0"), "z" * (3 * MAX_LINE_BYTES), message("l2"), message("l3", at="x")]
    (exports / "b.jsonl").write_text("\n".join(long) + "\n")
    (exports / "c.jsonl").write_bytes(b"")
    with open(os.path.join(os.fsencode(exports), b"d-\xff.jsonl"), "wb") as out:
        out.write(f"{message('n0')}\n{message('n1', at='x')}\n".encode())

    imported, report = run(ingestor, [str(exports)], tmp_path)

    assert sorted((Path(e["file"]).name, e["line"], e["field"]) for e in report) == [
        ("b.jsonl", 2, "line"),
        ("b.jsonl", 4, "updated_at"),
        ("d-\\xff.jsonl", 2, "updated_at"),
    ]
    counts = imported.tally.counts
    assert (counts["stored"], counts["refused"]) == (20 + 2 + 1, 3)
    assert sum(counts.values()) == 20 + 4 + 0 + 2  # every line (row) of every file, once
