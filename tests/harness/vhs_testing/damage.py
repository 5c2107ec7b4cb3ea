"""Damaged items, planted behind the store's back.

For each item layout, `well_formed` writes an item through the store itself that holds every
field an item can hold: a current entry with an inline zlib body and a part, an earlier
version held as a delta, one whose part is held by the next version. `damages(layout)` is every
way one field of it can be damaged, each with the field (its path in the item) a reader must
name. Each damage is a value DynamoDB itself accepts, so it can be planted with a raw
PutItem, as an operator's hand, another application or a bug of an earlier release would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vhs.codec import MAX_BODY_SIZE
from vhs.index.layouts import Layout
from vhs.ordering import TOMBSTONE_HASH
from vhs.store import VersionedHybridStore

T1, T2, T3 = "2026-11-01T09:00:00Z", "2026-11-02T09:00:00Z", "2026-11-03T09:00:00Z"
# Between versions 1 and 2 by the source's clock: what time travel answers on a sound item.
BETWEEN = "2026-11-01T12:00:00Z"
TEXT = "x" * 300  # compresses, so the bodies are inline with a codec


def well_formed(store: VersionedHybridStore, id: str, layout: Layout) -> dict[str, Any]:
    """Write `id` in `layout` (three versions: `p[0]` a delta, `p[1]` and `c[0]` with the part
    `ocr`, the earlier one held by the next as `same`) and return its raw item."""
    index = store.index
    before, index.layout = index.layout, layout
    try:
        store.put(id, {"text": TEXT, "n": 1}, updated_at=T1)
        parts = {"ocr": (TEXT.encode() * 2, "text/plain")}
        store.put(id, {"text": TEXT, "n": 2}, updated_at=T2, parts=parts)
        store.put(id, {"text": TEXT, "n": 3}, updated_at=T3, parts=parts)
    finally:
        index.layout = before
    return raw_item(store, id)


def raw_item(store: VersionedHybridStore, id: str) -> dict[str, Any]:
    return store.index.dynamodb.get_item(
        TableName=store.table_name, Key={"id": {"S": id}}, ConsistentRead=True
    )["Item"]


@dataclass(frozen=True)
class Damage:
    """One field of a well-formed item made wrong: `path` (attribute names and list indexes)
    set to `value` (or to what it makes of the value there), or removed when `value` is None.
    `field` is what a reader must name."""

    name: str
    path: tuple[str | int, ...]
    value: dict[str, Any] | Callable[[Any], Any] | None
    field: str

    @property
    def in_current(self) -> bool:
        """Whether a read of the latest version alone (id, v and c) meets it."""
        return self.field.startswith(("c", "v")) and not self.name.endswith("v-below-held")

    def applied(self, raw: dict[str, Any], id: str | None = None) -> dict[str, Any]:
        """A copy of `raw` with this damage (and, given, the id `id`)."""
        damaged = copy.deepcopy(raw)
        if id is not None:
            damaged["id"] = {"S": id}
        holder: Any = damaged
        for step in self.path[:-1]:
            holder = _inside(holder, step)
        last = self.path[-1]
        container = holder["L"] if isinstance(last, int) else holder.get("M", holder)
        if self.value is None:
            del container[last]
        elif callable(self.value):
            container[last] = self.value(container[last])
        else:
            container[last] = self.value
        return damaged


def _inside(value: Any, step: str | int) -> Any:
    """The attribute `step` (a name in a map, an index in a list) of a raw value."""
    if isinstance(step, int):
        return value["L"][step]
    if "M" in value:
        return value["M"][step]
    return value[step]


def plant(store: VersionedHybridStore, raw: dict[str, Any]) -> None:
    store.index.dynamodb.put_item(TableName=store.table_name, Item=raw)


def _entry(where: str, index: int) -> tuple[tuple[str | int, ...], str]:
    return (where, index), f"{where}[{index}]"


def damages(layout: Layout) -> list[Damage]:
    """Every damage of the item `well_formed` writes in `layout`."""
    compact = layout is Layout.COMPACT
    found: list[Damage] = []

    def add(name: str, path: tuple[str | int, ...], value: Any, field: str) -> None:
        found.append(Damage(f"{layout}-{name}", path, value, field))

    # The item.
    for name, value in [("v-string", {"S": "3"}), ("v-zero", {"N": "0"}), ("v-half", {"N": "2.5"})]:
        add(name, ("v",), value, "v")
    add("v-below-held", ("v",), {"N": "2"}, "v")
    add("v-missing", ("v",), None, "v")
    add("c-empty", ("c",), {"L": []}, "c")
    add("c-string", ("c",), {"S": "c"}, "c")
    add("p-string", ("p",), {"S": "p"}, "p")
    add("p-entry-string", ("p", 0), {"S": "entry"}, "p[0]")

    # Each field of an entry: the current one, and (time, hash, codec, part) earlier ones.
    bad_times = (
        [("t-half", {"N": "1.5"}), ("t-huge", {"N": "9" * 20})]
        if compact
        else [
            ("t-words", {"S": "not a time"}),
            ("t-no-fraction", {"S": "2026-11-01T09:00:00Z"}),
            ("t-no-such-day", {"S": "2026-02-30T09:00:00.000000Z"}),
            # strptime reads it, but it is not fixed-width: it sorts after "2026-10-...".
            ("t-one-digit-month", {"S": "2026-1-01T09:00:00.000000Z"}),
            ("t-year-999", {"S": "0999-12-31T23:59:59.999999Z"}),
        ]
    ) + [("t-binary", {"B": b"t"}), ("t-missing", None)]
    bad_hashes = (
        [
            ("h-short", {"B": bytes(31)}),
            ("h-hex-text", {"S": "f" * 64}),
        ]
        if compact
        else [
            ("h-upper", {"S": "F" * 64}),
            ("h-short", {"S": "f" * 63}),
            ("h-binary", {"B": bytes(32)}),
        ]
    ) + [("h-number", {"N": "1"}), ("h-missing", None)]
    other_codec = {"S": "zdelta"} if compact else {"S": "d"}
    for where, index in (("c", 0), ("p", 0), ("p", 1)):
        path, at = _entry(where, index)
        for name, value in bad_times:
            add(f"{where}{index}-{name}", (*path, "t"), value, f"{at}.t")
        for name, value in bad_hashes:
            add(f"{where}{index}-{name}", (*path, "h"), value, f"{at}.h")
    path, at = _entry("c", 0)
    entry_fields: list[tuple[str, str, Any, str]] = [
        ("n-negative", "n", {"N": "-1"}, "n"),
        ("n-half", "n", {"N": "1.5"}, "n"),
        ("n-over", "n", {"N": str(MAX_BODY_SIZE + 1)}, "n"),
        ("n-string", "n", {"S": "10"}, "n"),
        ("n-missing", "n", None, "n"),
        ("w-negative", "w", {"N": "-1"}, "w"),
        ("w-past-9999", "w", {"N": "1" + "0" * 15}, "w"),
        ("w-string", "w", {"S": "1"}, "w"),
        ("k-binary", "k", {"B": b"k"}, "k"),
        ("k-empty", "k", {"S": ""}, "k"),
        ("k-missing", "k", None, "k"),
        ("ct-number", "ct", {"N": "1"}, "ct"),
        ("ct-empty", "ct", {"S": ""}, "ct"),
        ("b-string", "b", {"S": "body"}, "b"),
        ("b-missing", "b", None, "z"),  # a codec with no body
        ("z-other-layout", "z", other_codec, "z"),
        ("z-unknown", "z", {"S": "lz4"}, "z"),
        ("z-number", "z", {"N": "1"}, "z"),
        # A zstd dictionary's id (`zd`): on a body that is not zstd's, or of the wrong length.
        ("zd-not-zstd", "zd", {"B": bytes(8)}, "zd"),
        ("zd-short", "zd", {"B": bytes(7)}, "zd"),
        ("zd-string", "zd", {"S": "0" * 16}, "zd"),
        ("x-string", "x", {"S": "true"}, "x"),
        ("x-on-a-put", "x", {"BOOL": True}, "x"),
        ("dx-number", "dx", {"N": "1"}, "dx"),
        ("dx-on-a-put", "dx", {"BOOL": True}, "dx"),
        ("h-tombstone-with-a-body", "h", {"S": TOMBSTONE_HASH}, "b"),
        ("bh-missing", "bh", None, "bh"),
        ("bh-bad", "bh", {"B": b"1"} if compact else {"S": "xyz"}, "bh"),
        ("pt-missing", "pt", None, "pt"),
        ("pt-empty", "pt", {"M": {}}, "pt"),
        ("pt-string", "pt", {"S": "ocr"}, "pt"),
    ]
    for name, attribute, value, field in entry_fields:
        add(f"c0-{name}", (*path, attribute), value, f"{at}.{field}")
    part_fields: list[tuple[str, str, Any]] = [
        ("h", "h", {"B": b"12"} if compact else {"S": "not hex"}),
        ("h-missing", "h", None),
        ("n", "n", {"N": "-1"}),
        ("ct", "ct", {"N": "1"}),
        ("z", "z", {"S": "lz4"}),
        ("b", "b", {"S": "bytes"}),
    ]
    for name, attribute, value in part_fields:
        add(f"c0-part-{name}", (*path, "pt", "ocr", attribute), value, f"{at}.pt.ocr.{attribute}")
    # The earlier part is held by the next version (`same`): bytes of its own are a damage.
    held, held_at = _entry("p", 1)
    add("p1-part-same-with-bytes", (*held, "pt", "ocr", "b"), {"B": b"x"}, f"{held_at}.pt.ocr.z")
    add("p0-z-unknown", (*_entry("p", 0)[0], "z"), {"S": "lz4"}, "p[0].z")
    add("c0-part-name", (*path, "pt"), _renamed, f"{at}.pt.Bad Name")
    return found


def _renamed(parts: dict[str, Any]) -> dict[str, Any]:
    """The parts map with `ocr` named as no write names a part."""
    return {"M": {"Bad Name": parts["M"]["ocr"]}}
