"""Parts through the ingest handler (docs/design.md, "Parts"): a message's parts are claim checks
of objects in the staging location, downloaded and stored beside the body; a part that is missing
or outside the staging location dead-letters the message naming `parts.<name>.s3.key`."""

from __future__ import annotations

import random

import test_ingest_handler as handler_tests
from test_ingest_handler import (
    BUCKET,
    STAGING,
    P,
    failures,
    handler_module,
    message_event,
    run,
    stage,
)

from vhs.ingest.deadletter import ERROR_FIELD
from vhs_ops.local.metering import RequestMeter

stack = handler_tests.stack  # the handler tests' fixture: moto, the local stack's resources

SCAN = random.Random(2).randbytes(100_000)
OCR = b"recognised text " * 500


def parts_message(updated_at: str, record: dict, **parts: str) -> dict:
    return {
        "id": "scan-7",
        "updated_at": updated_at,
        "record": record,
        "parts": {
            name: {
                "s3": {"bucket": STAGING, "key": key},
                **({"content_type": "image/tiff"} if name == "scan" else {}),
            }
            for name, key in parts.items()
        },
    }


def test_staged_parts_are_stored_beside_the_record(stack):
    stage(stack, P + "scan.tiff", SCAN, "application/octet-stream")
    stage(stack, P + "ocr.txt", OCR, "text/plain")
    message = parts_message(
        "2026-01-01T00:00:00Z", {"t": 1}, scan=P + "scan.tiff", ocr=P + "ocr.txt"
    )
    assert failures(run(message_event(message))) == set()
    record = stack.store.get("scan-7")
    assert record.json() == {"t": 1} and sorted(record.parts) == ["ocr", "scan"]
    assert record.parts["scan"].content_type == "image/tiff"  # the message's, over S3's
    assert record.parts["ocr"].content_type == "text/plain"  # else the staged object's
    assert record.part("scan") == SCAN and record.part("ocr") == OCR

    # The same parts with a new record: nothing is uploaded to the body bucket again.
    meter = RequestMeter(handler_module().ingestor().store.bodies.s3)
    with meter.measure() as counts:
        update = parts_message(
            "2026-01-02T00:00:00Z", {"t": 2}, scan=P + "scan.tiff", ocr=P + "ocr.txt"
        )
        assert failures(run(message_event(update))) == set()
    assert stack.store.get("scan-7").version == 2
    assert counts["PutObject"] == 0


def test_a_part_outside_staging_or_missing_is_dead_lettered_naming_it(stack):
    outside = parts_message("2026-01-01T00:00:00Z", {"t": 1}, scan=P + "x")
    outside["parts"]["scan"]["s3"]["bucket"] = BUCKET
    missing = parts_message("2026-01-01T00:00:00Z", {"t": 1}, ocr=P + "missing")
    assert failures(run(message_event(outside, missing))) == set()
    fields = sorted(
        letter["MessageAttributes"][ERROR_FIELD]["StringValue"] for letter in stack.dead_letters()
    )
    assert fields == ["parts.ocr.s3.key", "parts.scan.s3.bucket"]


def test_parts_the_item_has_no_room_for_are_dead_lettered_at_once(stack, monkeypatch):
    """The store refuses, as it writes, parts whose names and hashes alone outgrow a version's
    share of the item (InvalidPart): that is never true on a retry, so the handler dead-letters
    the message at once, naming `parts`, instead of leaving it to SQS's redrive."""
    monkeypatch.setenv("VHS_INLINE_THRESHOLD", "1024")
    monkeypatch.setenv("VHS_RETAIN_VERSIONS", "140")
    handler_module().ingestor.cache_clear()
    names = {f"scan_page_{i:02d}": P + f"page-{i}" for i in range(16)}
    for key in names.values():
        stage(stack, key, b"x", "application/octet-stream")
    crowded = parts_message("2026-01-01T00:00:00Z", {"t": 1}, **names)
    assert failures(run(message_event(crowded))) == set()
    (letter,) = stack.dead_letters()
    assert letter["MessageAttributes"][ERROR_FIELD]["StringValue"] == "parts"
