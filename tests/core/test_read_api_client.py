"""A client generated from the read API's OpenAPI document, as a consumer would generate one
(openapi-python-client, with the one setting docs/read-api.md gives), reads every kind of
answer from the local function URL: a JSON record, a binary one, a retained version, a part, a
history, a 304, a redirected body, a read as of a moment, a diff, and the problems, each typed
as the document declares."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from test_read_api import REDIRECTED, SERVED_FROM_S3, Api, api, put_every_kind

from vhs.read_api import routes
from vhs_ops.local.read_api import signed_headers

__all__ = ["api"]  # the fixture: one local stack and read API for the module

BIN = Path(sys.executable).parent
PACKAGE = "vhs_read_api_client"
# What docs/read-api.md tells a consumer to give the generator: it knows no "*/*", the media
# type of a body whose type is the record's own.
GENERATOR_CONFIG = 'content_type_overrides:\n  "*/*": application/octet-stream\npost_hooks: []\n'


class SigV4(httpx.Auth):
    """Signs each request as a consumer signs it for a function URL (service "lambda")."""

    def __init__(self, region: str) -> None:
        self.region = region

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(
            signed_headers(
                request.method, str(request.url), region=self.region, headers=dict(request.headers)
            )
        )
        yield request


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client package, generated from the document the API serves."""
    work = tmp_path_factory.mktemp("client")
    (work / "openapi.json").write_text(routes.openapi_document())
    (work / "config.yml").write_text(GENERATOR_CONFIG)
    run = subprocess.run(
        [
            BIN / "openapi-python-client",
            "generate",
            "--path",
            work / "openapi.json",
            "--config",
            work / "config.yml",
            "--meta",
            "none",
            "--output-path",
            work / PACKAGE,
        ],
        capture_output=True,
        text=True,
    )
    # The generator leaves out, with a warning, whatever it cannot type: none may be.
    assert run.returncode == 0 and "Warning" not in run.stdout + run.stderr, run.stdout
    sys.path.insert(0, str(work))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(work))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _operation(module: str) -> ModuleType:
    """An operation's module, named as the generator names it: operationId, snake-cased."""
    return importlib.import_module(f"{PACKAGE}.api.default.{module}")


def test_a_generated_client_reads_every_kind_of_answer(generated: ModuleType, api: Api) -> None:
    put_every_kind(api.store, "gen")
    models = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    latest = _operation("latest_records_id_get")
    version = _operation("version_records_id_versions_version_get")
    latest_part = _operation("latest_part_records_id_parts_name_get")
    history = _operation("history_records_id_history_get")
    diff = _operation("diff_records_id_versions_a_diff_b_get")
    client = generated.Client(base_url=api.url, httpx_args={"auth": SigV4(api.region)})
    redirecting = generated.Client(
        base_url=api.url, follow_redirects=True, httpx_args={"auth": SigV4(api.region)}
    )

    # A JSON record: its bytes, as application/json, with the version headers.
    answer = latest.sync_detailed("gen-json", client=client)
    assert answer.status_code == 200 and isinstance(answer.parsed, types.File)
    assert json.loads(answer.parsed.payload.read()) == {"title": "Moby-Dick; or, The Whale"}
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["X-Vhs-Version"] == "2"
    etag = answer.headers["ETag"]

    # The same, unchanged since: a 304 with no body.
    unchanged = latest.sync_detailed("gen-json", client=client, if_none_match=etag)
    assert unchanged.status_code == 304 and unchanged.content == b""

    # A binary record, byte for byte with its content type.
    scan = latest.sync_detailed("gen-scan", client=client)
    assert scan.parsed.payload.read() == SERVED_FROM_S3
    assert scan.headers["Content-Type"] == "image/png"

    # A body too large for a response: a 307 to S3, which the client follows if asked to.
    moved = latest.sync_detailed("gen-big", client=client)
    assert moved.status_code == 307 and moved.headers["Location"].startswith("http")
    assert latest.sync("gen-big", client=redirecting).payload.read() == REDIRECTED

    # A retained version, and a part.
    first = version.sync("gen-json", 1, client=client)
    assert json.loads(first.payload.read()) == {"title": "Moby-Dick"}
    ocr = latest_part.sync_detailed("gen-json", "ocr", client=client)
    assert ocr.parsed.payload.read() == b"Call me Ishmael."
    assert ocr.headers["Content-Type"] == "text/plain"

    # A history, typed: its versions, the parts of each, the delete.
    kept = history.sync("gen-json", client=client)
    assert isinstance(kept, models.History) and kept.id == "gen-json"
    assert [v.version for v in kept.versions] == [1, 2]
    assert kept.versions[1].parts["ocr"].size == len(b"Call me Ishmael.")
    assert kept.versions[1].parts["ocr"].path == "/records/gen-json/versions/2/parts/ocr"
    gone = history.sync("gen-gone", client=client)
    assert [(v.version, v.deleted) for v in gone.versions] == [(1, False), (2, True)]

    # The version current at a moment, by the source's clock: an aware datetime, sent RFC 3339.
    then = datetime(2026, 11, 1, 22, 0, tzinfo=timezone(timedelta(hours=1)))
    clock = importlib.import_module(f"{PACKAGE}.models.latest_records_id_get_clock")
    at = latest.sync(
        "gen-json", client=client, as_of=then, clock=clock.LatestRecordsIdGetClock.SOURCE
    )
    assert json.loads(at.payload.read()) == {"title": "Moby-Dick"}

    # A diff, typed: the JSON Patch from version 1 to 2, and the parts added.
    change = diff.sync("gen-json", 1, 2, client=client)
    assert isinstance(change, models.Diff) and change.kind == models.DiffKind.JSON
    assert [(op.op, op.path, op.value) for op in change.patch] == [
        ("replace", "/title", "Moby-Dick; or, The Whale")
    ]
    assert change.parts["ocr"].change == models.PartDiffChange.ADDED

    # Problems, typed: a deleted record's 404, and a 400 naming the field.
    missing = latest.sync("gen-gone", client=client)
    assert isinstance(missing, models.Problem) and missing.status == 404
    refused = version.sync("gen-json", 0, client=client)
    assert isinstance(refused, models.Problem) and refused.status == 400
    assert refused.field == "version"
