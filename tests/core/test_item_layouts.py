"""The two item layouts (vhs/index/layouts.py, docs/design.md "Item layouts"): each field in either
form means the same, the compact form keeps the ordering's order, an item of the text layout
is rewritten compactly by its next write, `vhs verify` counts items by layout and `vhs
migrate` lays them all out compactly, once."""

from __future__ import annotations

import base64
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vhs.index.codec import (
    ID,
    entry_from_dynamo,
    entry_to_dynamo,
    item_from_dynamo,
    stored_layout,
    time_value,
)
from vhs.index.layouts import Layout
from vhs.index.size import entry_size
from vhs.model import Entry, StoredPart
from vhs.ordering import TOMBSTONE_HASH
from vhs.timestamps import parse_timestamp
from vhs_ops.admin.migrate import migrate
from vhs_ops.admin.verify import verify
from vhs_ops.local.metering import RequestMeter
from vhs_testing.backends import Backend
from vhs_testing.condemnation import condemn
from vhs_testing.records import at, large

H1, H2 = "ab" * 32, "0f" * 32


def raw_of(backend: Backend, store: Any, rid: str) -> dict[str, Any]:
    key = {ID: {"S": rid}}
    return backend.dynamodb.get_item(TableName=store.table_name, Key=key)["Item"]


def layouts_of(raw: dict[str, Any]) -> list[str]:
    """Each held entry's layout, current first, by the form of its time."""
    entries = [*raw["c"]["L"], *raw.get("p", {}).get("L", [])]
    return ["compact" if "N" in e["M"]["t"] else "text" for e in entries]


ENTRIES = [
    Entry(parse_timestamp("2026-11-01T10:00:00.123456Z"), H1, 10, 1700000000, "tok",
          content_type="application/json", inline=b"x", codec="zlib"),
    Entry(parse_timestamp("1066-10-14T09:00:00Z"), H2, 3, 1700000001, "tok",
          content_type="text/plain", inline=b"d", codec="zdelta"),
    Entry(parse_timestamp("2026-11-02T00:00:00Z"), TOMBSTONE_HASH, 0, 1700000002, "tok",
          purge=True, dropped=True),
    Entry(parse_timestamp("9999-12-31T23:59:59.999999Z"), H1, 5, 1, "tok",
          content_type="application/json", body_hash=H2,
          parts=(StoredPart("a", H1, 2, "image/png", inline=b"", codec="same"),
                 StoredPart("b", H2, 9, "application/octet-stream"))),
]  # fmt: skip


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("entry", ENTRIES)
def test_every_entry_reads_back_as_written_in_either_layout(entry: Entry, layout: Layout):
    assert entry_from_dynamo(entry_to_dynamo(entry, layout)) == entry


def test_the_compact_form_is_smaller_field_by_field():
    written = entry_to_dynamo(ENTRIES[0])["M"]
    assert written["t"] == {"N": "1793527200123456"}  # microseconds: the stored precision
    assert written["h"] == {"B": bytes.fromhex(H1)}
    assert written["z"] == {"S": "zlib"}
    assert entry_to_dynamo(ENTRIES[1])["M"]["z"] == {"S": "d"}
    assert entry_to_dynamo(ENTRIES[2])["M"]["h"] == {"S": TOMBSTONE_HASH}
    for entry in ENTRIES:
        assert entry_size(entry, Layout.COMPACT) < entry_size(entry, Layout.TEXT)


def test_numeric_times_order_as_the_stored_form_does():
    rng = random.Random(29)
    first, last = datetime(1000, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)
    span = (last - first) // timedelta(microseconds=1)
    stamps = [parse_timestamp(first + timedelta(microseconds=rng.randrange(span)))
              for _ in range(500)]  # fmt: skip
    stamps += [parse_timestamp("1969-12-31T23:59:59.999999Z"), parse_timestamp(first)]
    by_number = sorted(stamps, key=lambda s: int(time_value(s, Layout.COMPACT)["N"]))
    assert by_number == sorted(stamps)


def test_a_stream_images_base64_hash_reads_as_the_bytes_it_encodes():
    """Lambda's stream events carry binary values as base64 text (changes/stream.py)."""
    written = entry_to_dynamo(ENTRIES[0])
    image = {"M": {**written["M"], "h": {"B": base64.b64encode(bytes.fromhex(H1)).decode()}}}
    assert entry_from_dynamo(image, with_body=False).content_hash == H1


def text_store(backend: Backend, **options: Any) -> Any:
    """A store writing the layout every write made before the compact one."""
    store = backend.store(**options)
    store.index.layout = Layout.TEXT
    return store


def test_an_item_of_the_text_layout_is_rewritten_compactly_by_its_next_write(inprocess: Backend):
    old = text_store(inprocess)
    for n in range(1, 4):
        old.put("catalogue", {"title": "Moby-Dick", "edition": n}, updated_at=at(n))
    before = raw_of(inprocess, old, "catalogue")
    assert layouts_of(before) == ["text"] * 3 and stored_layout(before) == "text"
    new = inprocess.store()
    assert new.get("catalogue").json() == {"title": "Moby-Dick", "edition": 3}
    assert new.put("catalogue", {"title": "Moby-Dick", "edition": 4}, updated_at=at(4)).version == 4
    after = raw_of(inprocess, new, "catalogue")
    assert layouts_of(after) == ["compact"] * 4 and stored_layout(after) == "compact"
    assert [new.get("catalogue", version=n).json()["edition"] for n in range(1, 5)] == [1, 2, 3, 4]
    # The same entries as before, each in the compact form.
    assert item_from_dynamo(after).history[:2] == item_from_dynamo(before).history


def test_a_blind_write_lays_out_its_own_entry_and_moves_the_one_it_supersedes_as_it_was(
    inprocess: Backend,
):
    """A large body's put or a delete is written blind (no read): the entry it moves into the
    history is moved server-side, in its layout."""
    old = text_store(inprocess)
    old.put("scan", large(1), updated_at=at(1))
    new = inprocess.store()
    assert new.delete("scan", deleted_at=at(2)).outcome == "deleted"
    raw = raw_of(inprocess, new, "scan")
    assert layouts_of(raw) == ["compact", "text"] and stored_layout(raw) == "mixed"
    assert new.put("scan", large(3), updated_at=at(3)).version == 3
    assert new.get("scan", version=1).body == large(1)


def test_verify_counts_items_by_layout_and_migrate_makes_them_compact_once(inprocess: Backend):
    old = text_store(inprocess, inline_threshold=256)
    new = inprocess.store(inline_threshold=256)
    for n in range(3):
        old.put(f"text-{n}", {"n": n}, updated_at=at(1))
        old.put(f"text-{n}", {"n": n + 1}, updated_at=at(2))
    old.put("mixed", large(4), updated_at=at(1))
    new.put("mixed", large(5), updated_at=at(2))  # blind: the text entry moved as it was
    new.put("compact", {"n": 9}, updated_at=at(1))
    condemn(inprocess, "text-0", H1, deadline=4_000_000_000.0)
    reads = {rid: [r.version for r in new.history(rid)] for rid in ("text-0", "mixed")}
    report = verify(new)
    assert report.ok and report.layouts == {"text": 3, "mixed": 1, "compact": 1}

    meter = RequestMeter(inprocess.dynamodb)
    with meter.measure() as counts:
        first = migrate(new, segments=2)
    assert (first.items, first.rewritten, first.compact, first.ok) == (5, 4, 1, True)
    assert counts["UpdateItem"] == 4
    assert verify(new).layouts == {"compact": 5}
    assert verify(new).ok
    # Nothing else changed: versions, bodies, the collector's condemnation.
    assert {rid: [r.version for r in new.history(rid)] for rid in reads} == reads
    assert new.get("text-2").json() == {"n": 3} and new.get("mixed", version=1).body == large(4)
    assert raw_of(inprocess, new, "text-0")["gcs"] == {"SS": [H1[:16]]}
    with meter.measure() as counts:
        again = migrate(new)
    assert (again.items, again.rewritten, again.compact) == (5, 0, 5)
    assert counts.get("UpdateItem", 0) == 0
