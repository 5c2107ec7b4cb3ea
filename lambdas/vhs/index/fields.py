"""The values of a stored item, each decoded and checked: a bad one raises DamagedItem naming
its field (codec.py composes them into entries and items; docs/design.md, "The item").

Each takes a low-level AttributeValue (as GetItem returns it) and gives the Python value, or
raises errors.BadField, which `decoded` turns into a DamagedItem naming the attribute.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..codec import MAX_BODY_SIZE
from ..errors import BadField, DamagedItem
from ..ordering import TOMBSTONE_HASH
from .layouts import Layout, hash_of_bytes, hash_of_text, time_of_number, time_of_text

_T = TypeVar("_T")
_WHOLE = re.compile(r"-?[0-9]+")
# datetime's last second: a write time past it cannot be shown as a time (timetravel.py).
_LATEST_EPOCH = int(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp())


def decoded(attrs: Any, name: str, decode: Callable[[Any], _T]) -> _T:
    """`decode` of attribute `name` of `attrs`; a missing or bad one raises DamagedItem naming
    it (a damage found inside it, under it)."""
    if not isinstance(attrs, Mapping):
        raise DamagedItem(f"expected a map, got {shown(attrs)}", name)
    if name and name not in attrs:
        raise DamagedItem("missing", name)
    try:
        return decode(attrs[name] if name else attrs)
    except BadField as error:
        raise DamagedItem(str(error), name) from None
    except DamagedItem as error:
        raise error.within(name or None) from None


def optional(attrs: Mapping[str, Any], name: str, decode: Callable[[Any], _T]) -> _T | None:
    return decoded(attrs, name, decode) if name in attrs else None


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def typed(value: Any, kind: str, what: str) -> Any:
    if not isinstance(value, Mapping) or set(value) != {kind}:
        raise BadField(f"expected {what}, got {shown(value)}")
    return value[kind]


def as_map(value: Any) -> Mapping[str, Any]:
    data = typed(value, "M", "a map")
    if not isinstance(data, Mapping):
        raise BadField(f"expected a map, got {shown(value)}")
    return data


def as_list(value: Any) -> list[Any]:
    data = typed(value, "L", "a list")
    if not isinstance(data, list):
        raise BadField(f"expected a list, got {shown(value)}")
    return data


def string(value: Any) -> str:
    text = typed(value, "S", "a string")
    if not isinstance(text, str):
        raise BadField(f"expected a string, got {shown(value)}")
    return text


def text(value: Any) -> str:
    """A non-empty string (an id, a writer token, a content type)."""
    text = string(value)
    if not text:
        raise BadField("an empty string")
    return text


def whole(value: Any, low: int, high: int | None = None) -> int:
    text = typed(value, "N", "a number")
    if not isinstance(text, str) or not _WHOLE.fullmatch(text):
        raise BadField(f"expected a whole number, got {shown(value)}")
    number = int(text)
    if number < low or (high is not None and number > high):
        span = f"{low} to {high}" if high is not None else f"at least {low}"
        raise BadField(f"{number} is out of range ({span})")
    return number


def version(value: Any) -> int:
    return whole(value, 1)


def size(value: Any) -> int:
    return whole(value, 0, MAX_BODY_SIZE)


def epoch_seconds(value: Any) -> int:
    return whole(value, 0, _LATEST_EPOCH)


def flag(value: Any) -> bool:
    flag = typed(value, "BOOL", "a boolean")
    if not isinstance(flag, bool):
        raise BadField(f"expected a boolean, got {shown(value)}")
    return flag


def binary(value: Any, with_body: bool) -> bytes:
    data = typed(value, "B", "binary")
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise BadField(f"expected binary, got {shown(value)}")
    if not with_body:
        return b""
    if isinstance(data, str):  # a Lambda event's stream image: base64
        raise BadField("expected binary, got base64 text (read it with_body=False)")
    return bytes(data)


def time(value: Any, layout: Layout) -> str:
    """An ordering timestamp in `layout`, in ordering's stored form."""
    if layout is Layout.COMPACT:
        return time_of_number(typed(value, "N", "a number"))
    return time_of_text(string(value))


def content_hash(value: Any, layout: Layout, *, tombstone: bool = True) -> str:
    """A sha256 (hex) or, `tombstone`, TOMBSTONE_HASH, in `layout`: the compact layout holds
    a digest as its 32 bytes and the tombstone as the string "~"."""
    if layout is Layout.COMPACT and not (tombstone and value == {"S": TOMBSTONE_HASH}):
        return hash_of_bytes(typed(value, "B", "binary"))
    return hash_of_text(string(value), tombstone=tombstone)
