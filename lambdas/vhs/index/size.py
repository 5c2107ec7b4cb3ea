"""DynamoDB's size of an item, by its documented rules, and how much of a history a write
leaves out to keep its item within codec.ITEM_BUDGET (docs/design.md, "The item")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..errors import ItemTooLarge
from ..model import Entry
from . import decode
from .codec import CURRENT, HISTORY, ID, ITEM_BUDGET, VERSION, entry_to_dynamo
from .layouts import Layout


def item_size(raw: Mapping[str, Mapping[str, Any]] | None) -> int:
    """The size of a low-level item (as GetItem returns it) by DynamoDB's rules, the one it
    holds against its 400 KB limit: each attribute's UTF-8 name and its value. 0 for none."""
    if not raw:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in raw.items())


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one low-level AttributeValue: strings in UTF-8, binary by its raw bytes,
    numbers 1 byte and 1 a pair of significant digits, booleans and nulls 1 byte, sets their
    members, lists and maps 3 bytes and 1 an element on top of their elements (and a map
    its names)."""
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode("utf-8"))
    if kind == "B":
        return len(data)
    if kind == "N":
        return number_size(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in data)
    if kind == "NS":
        return sum(number_size(n) for n in data)
    if kind == "BS":
        return sum(len(b) for b in data)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in data)
    if kind == "M":
        return 3 + sum(1 + len(name.encode("utf-8")) + value_size(v) for name, v in data.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def entry_size(entry: Entry, layout: Layout = Layout.COMPACT) -> int:
    """What one entry takes of its item by DynamoDB's rules, written in `layout`: its map, and
    the byte it takes as an element of `c` or `p`."""
    return 1 + value_size(entry_to_dynamo(entry, layout))


def held_size(entry: Entry) -> int:
    """The most `entry` may take of an item: its size in the larger of the layouts it can be
    held in (a blind write moves an entry into the history as it was laid out)."""
    return max(entry_size(entry, layout) for layout in Layout)


def written_size(id: str, version: int, entries: int = 0) -> int:
    """The size of an item of `id` at `version` holding no entries, as a write lays it out
    (`c` and, when `entries` > 1, `p`: names and list overheads; no condemnation). Add
    `entry_size` of each entry for the item's size."""
    raw: dict[str, Any] = {ID: {"S": id}, VERSION: {"N": str(version)}, CURRENT: {"L": []}}
    if entries > 1:
        raw[HISTORY] = {"L": []}
    return item_size(raw)


def fit_written(
    id: str, version: int, current: Mapping[str, Any], history: Sequence[Mapping[str, Any]]
) -> int:
    """How many of the oldest entries of `history` a write of `current` as `version` of `id`
    must leave out for its item to stay within ITEM_BUDGET (0: none), both laid out as the
    write writes them (codec.entries_to_dynamo). Raises ItemTooLarge when the current entry
    alone would not fit."""
    return _fit(id, version, 1 + value_size(current), [1 + value_size(e) for e in history])


def fit_stored(raw: Mapping[str, Any]) -> int:
    """`fit_written` of an item as it is stored (its entries measured in their own layouts):
    how many of its oldest history entries must go for it to fit ITEM_BUDGET."""
    held = raw.get(HISTORY, {}).get("L", [])
    current = 1 + value_size(raw[CURRENT]["L"][0])
    id, version = decode.decoded(raw, ID, decode.text), decode.decoded(raw, VERSION, decode.version)
    return _fit(id, version, current, [1 + value_size(e) for e in held])


def _fit(id: str, version: int, current: int, sizes: Sequence[int]) -> int:
    alone = written_size(id, version, 1) + current
    if alone > ITEM_BUDGET:
        raise ItemTooLarge(id, alone, ITEM_BUDGET)
    size = written_size(id, version, 1 + len(sizes)) + current + sum(sizes)
    drop = 0
    while size > ITEM_BUDGET and drop < len(sizes):
        size -= sizes[drop]
        drop += 1
    return drop


def number_size(number: Any) -> int:
    """DynamoDB stores a number as mantissa and exponent: leading and trailing zeros are not
    significant."""
    text = format(number, "f") if isinstance(number, Decimal) else str(number)
    mantissa = text.lstrip("+-").lower().split("e")[0]
    significant = max(1, len(mantissa.replace(".", "").strip("0")))
    return 1 + math.ceil(significant / 2)
