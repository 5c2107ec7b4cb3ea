"""RFC 6902 JSON Patch between two JSON documents, in the standard library alone (the Lambda
may import nothing else).

`make_patch(old, new)` gives `add`, `remove` and `replace` operations (never `move`, `copy` or
`test`) that turn `old` into exactly `new`: equal as JSON text, not only as Python values, so
`1`, `1.0` and `true` are three different values here, and so are `0.0` and `-0.0`. Objects are
compared key by key; arrays keep their common head and tail and change the middle in place,
so one element inserted or removed anywhere is one operation. Paths are RFC 6901 JSON
Pointers ("" is the whole document; "~" is written "~0" and "/" "~1").
"""

from __future__ import annotations

import json
from typing import Any

Operation = dict[str, Any]

# Why a diff or a change notification carries no patch where both versions claim JSON: the
# patch (or a body it is made from) is over the reader's bound, or a body is not JSON by the
# rules of a record (strict_json). The change feed also has "not_inline"
# (changes/notification_patch.py).
TOO_LARGE = "too_large"
UNREADABLE = "unreadable"


class _Operations(list[Operation]):
    """The patch being made, and its size as encode_patch writes it, kept under `limit`
    bytes: a patch is bounded as it is made, not only once it is whole (two records of a
    million one-digit numbers, all changed, make a patch of 40 MB)."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit
        self.size = 1  # "[" and "]", less the first operation's ","

    def append(self, operation: Operation) -> None:
        if self.limit is not None:
            self.size += len(encode_patch([operation])) - 1
            if self.size > self.limit:
                raise _TooLarge
        super().append(operation)


class _TooLarge(Exception):
    pass


def make_patch(old: Any, new: Any, *, limit: int | None = None) -> list[Operation] | None:
    """The operations, in the order they apply, that turn `old` into `new`; None when, as
    compact JSON (encode_patch), they would be more than `limit` bytes. Both documents within
    strict_json.MAX_DEPTH, as every stored record is: the walk recurses once a level."""
    operations = _Operations(limit)
    try:
        _diff(old, new, "", operations)
    except _TooLarge:
        return None
    return list(operations)


def patch_size(operations: list[Operation]) -> int:
    """The patch's size in UTF-8 bytes as a change notification carries it (compact JSON)."""
    return len(encode_patch(operations))


def encode_patch(operations: list[Operation]) -> bytes:
    return json.dumps(operations, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pointer(path: str, token: str | int) -> str:
    """`path` extended by one reference token, escaped as RFC 6901 says."""
    return f"{path}/{str(token).replace('~', '~0').replace('/', '~1')}"


def same(a: Any, b: Any) -> bool:
    """Equal as JSON: the same type (bool, int and float apart) and the same value."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # 0.0 and -0.0 are equal floats but not the same JSON
    return bool(a == b)


def _diff(old: Any, new: Any, path: str, out: list[Operation]) -> None:
    if same(old, new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                out.append({"op": "remove", "path": pointer(path, key)})
        for key in old:
            if key in new:
                _diff(old[key], new[key], pointer(path, key), out)
        for key in new:
            if key not in old:
                out.append({"op": "add", "path": pointer(path, key), "value": new[key]})
    elif isinstance(old, list) and isinstance(new, list):
        _diff_arrays(old, new, path, out)
    else:
        out.append({"op": "replace", "path": path, "value": new})


def _diff_arrays(old: list[Any], new: list[Any], path: str, out: list[Operation]) -> None:
    head = 0
    while head < min(len(old), len(new)) and same(old[head], new[head]):
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and same(old[-1 - tail], new[-1 - tail]):
        tail += 1
    old_middle, new_middle = len(old) - head - tail, len(new) - head - tail
    common = min(old_middle, new_middle)
    for offset in range(common):
        _diff(old[head + offset], new[head + offset], pointer(path, head + offset), out)
    # Extra old elements all sit at one index in turn; extra new ones go in before the tail.
    for _ in range(old_middle - common):
        out.append({"op": "remove", "path": pointer(path, head + common)})
    for offset in range(common, new_middle):
        index = head + offset
        out.append({"op": "add", "path": pointer(path, index), "value": new[index]})
