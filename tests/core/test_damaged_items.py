"""A damaged item is a finding, not a crash (docs/design.md, "The item").

Every field of both item layouts is planted damaged with a raw PutItem (vhs_testing.damage),
on in-process moto: reads raise the one typed error (errors.DamagedItem) naming the id and
the field, time travel never answers from a value that is not a time, `vhs verify` reports
each as a finding, and `vhs migrate` skips each, names it, and lays the rest out."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from vhs.errors import DamagedItem, IntegrityError
from vhs.index.codec import MalformedItem, entry_from_dynamo, item_from_dynamo
from vhs.index.layouts import Layout
from vhs_ops.admin.findings import FindingKind
from vhs_ops.admin.migrate import migrate
from vhs_ops.admin.verify import verify
from vhs_testing.backends import Backend
from vhs_testing.damage import BETWEEN, Damage, damages, plant, raw_item, well_formed

DAMAGES = [damage for layout in Layout for damage in damages(layout)]


def _layout(damage: Damage) -> Layout:
    return Layout(damage.name.split("-", 1)[0])


@pytest.fixture
def sound(inprocess: Backend) -> dict[Layout, dict]:
    """A well-formed item in each layout, written by the store (planted again under other ids)."""
    store = inprocess.store()
    return {layout: well_formed(store, f"sound-{layout}", layout) for layout in Layout}


def test_the_well_formed_items_hold_every_field_and_read_back(inprocess: Backend, sound):
    store = inprocess.stores[0]
    for layout, raw in sound.items():
        current = raw["c"]["L"][0]["M"]
        assert {"t", "h", "n", "w", "k", "b", "z", "bh", "pt"} <= set(current), layout
        assert raw["p"]["L"][1]["M"]["pt"]["M"]["ocr"]["M"]["z"]["S"] in ("s", "same")
        assert raw["p"]["L"][0]["M"]["z"]["S"] in ("d", "zdelta")
        record_id = f"sound-{layout}"
        assert [v.version for v in store.history(record_id)] == [1, 2, 3]
        assert store.get(record_id, source_as_of=BETWEEN).version == 1
        assert store.get(record_id).json() == {"text": "x" * 300, "n": 3}


def _reads(store: Any, record_id: str, latest: bool) -> dict[str, Callable[[], Any]]:
    """Every read of one item: the whole item's, and (`latest`) the latest version's alone."""
    reads: dict[str, Callable[[], Any]] = {
        "history": partial(store.history, record_id),
        "version 1": partial(store.get, record_id, version=1),
        "source_as_of": partial(store.get, record_id, source_as_of=BETWEEN),
        "as_of": partial(store.get, record_id, as_of=BETWEEN),
        "diff": partial(store.diff, record_id, 2, 3),
    }
    if latest:
        reads["latest"] = partial(store.get, record_id)
    return reads


@pytest.mark.parametrize("layout", list(Layout))
def test_a_read_of_a_damaged_item_raises_one_typed_error_naming_id_and_field(
    inprocess: Backend, sound, layout: Layout
):
    store = inprocess.stores[0]
    wrong = []
    for damage in damages(layout):
        record_id = f"damaged-{damage.name}"
        plant(store, damage.applied(sound[layout], record_id))
        for read_name, read in _reads(store, record_id, damage.in_current).items():
            try:
                read()
                wrong.append((damage.name, read_name, "read"))
            except DamagedItem as error:
                assert isinstance(error, IntegrityError) and isinstance(error, MalformedItem)
                said = str(error).startswith(f"item {record_id!r} is damaged: {damage.field}: ")
                if (error.id, error.field, said) != (record_id, damage.field, True):
                    wrong.append((damage.name, read_name, str(error)))
    assert wrong == []


def test_time_travel_never_answers_from_a_time_that_is_not_one(inprocess: Backend, sound):
    """The issue's case: a text item whose second version's `t` is not a time. Read as a
    string it sorted above every real time, and `source_as_of` answered version 1."""
    store = inprocess.stores[0]
    raw = raw_item(store, f"sound-{Layout.TEXT}")
    raw["id"] = {"S": "not-a-time"}
    raw["p"]["L"][1]["M"]["t"] = {"S": "zzzz"}
    plant(store, raw)
    with pytest.raises(DamagedItem) as raised:
        store.get("not-a-time", source_as_of=BETWEEN)
    assert (raised.value.id, raised.value.field) == ("not-a-time", "p[1].t")


def test_verify_reports_every_damaged_item_as_a_finding_naming_its_field(inprocess: Backend, sound):
    store = inprocess.stores[0]
    for damage in DAMAGES:
        plant(store, damage.applied(sound[_layout(damage)], f"damaged-{damage.name}"))
    report = verify(store, max_findings=None)
    found = {f.id: f for f in report.findings}
    assert set(found) == {f"damaged-{d.name}" for d in DAMAGES}
    for damage in DAMAGES:
        finding = found[f"damaged-{damage.name}"]
        assert finding.kind is FindingKind.UNPARSEABLE
        assert finding.detail.startswith(f"damaged: {damage.field}: "), finding
    assert report.items == len(DAMAGES) + 2 and report.layouts == {"compact": 1, "text": 1}


def test_migrate_skips_every_damaged_item_names_it_and_lays_out_the_rest(inprocess: Backend, sound):
    store = inprocess.stores[0]
    for damage in DAMAGES:
        plant(store, damage.applied(sound[_layout(damage)], f"damaged-{damage.name}"))
    report = migrate(store, segments=2)
    assert (report.rewritten, report.compact) == (1, 1)  # the sound text item, now compact
    assert report.unparseable == len(DAMAGES) and not report.ok
    named = {entry["id"]: entry["field"] for entry in report.damaged}
    assert named == {f"damaged-{d.name}": d.field for d in DAMAGES}
    assert store.get(f"sound-{Layout.TEXT}").version == 3
    assert raw_item(store, f"sound-{Layout.TEXT}")["c"]["L"][0]["M"]["t"].keys() == {"N"}


def test_a_stream_image_entry_is_checked_as_an_item_entry_is():
    """entry_from_dynamo alone (the change feed's images): the same error, the field unprefixed."""
    with pytest.raises(DamagedItem) as raised:
        entry_from_dynamo({"M": {"t": {"S": "soon"}, "h": {"S": "~"}}}, with_body=False)
    assert (raised.value.id, raised.value.field) == (None, "t")
    with pytest.raises(DamagedItem) as raised:
        item_from_dynamo({"c": {"L": []}, "v": {"N": "1"}})
    assert (raised.value.id, raised.value.field) == (None, "id")
