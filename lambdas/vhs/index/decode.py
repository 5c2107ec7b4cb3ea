"""The DynamoDB item read: every stored value decoded and checked in the layout it is in
(layouts.py), composed into entries and the item (docs/design.md, "The item"), in one pass.

A value that neither layout writes raises errors.BadField where it is parsed, which `decoded`
turns into a DamagedItem naming the attribute (and, in an item, the id and the field's path):
nothing is read, ordered or served from a value neither layout writes. codec.py, the item's one
codec, names this module's decoders as its own; a write decodes the item it is made against
once (DynamoIndex).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from ..bodies.packing import DICTIONARY_ID_BYTES, SAME, ZSTD
from ..bodies.parts import MAX_PARTS, PART_NAME
from ..codec import BINARY_CONTENT_TYPE, JSON_CONTENT_TYPE, MAX_BODY_SIZE
from ..errors import BadField, DamagedItem
from ..model import Entry, Item, StoredPart
from ..ordering import TOMBSTONE_HASH
from ..timestamps import STORED_FORMAT
from .attributes import (
    BODY_HASH,
    CODEC,
    CONDEMNED_BODIES,
    CONDEMNED_UNTIL,
    CONTENT_HASH,
    CONTENT_TYPE,
    CURRENT,
    DICTIONARY,
    DROPPED,
    HISTORY,
    ID,
    INLINE_BODY,
    PARTS,
    PURGE,
    SIZE,
    UPDATED_AT,
    VERSION,
    WRITER,
    WRITTEN_AT,
    condemned_name,
)
from .layouts import (
    CODECS,
    DIGEST_BYTES,
    EARLIEST,
    EPOCH,
    HEX_DIGEST,
    LATEST,
    MICROSECOND,
    STORED_TIME,
    Layout,
)

_T = TypeVar("_T")
_WHOLE = re.compile(r"-?[0-9]+")
# datetime's last second: a write time past it cannot be shown as a time (history/time_travel.py).
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


def stored_hash(value: Any, layout: Layout, *, tombstone: bool = True) -> str:
    """A sha256 (hex) or, `tombstone`, TOMBSTONE_HASH, in `layout`: the compact layout holds
    a digest as its 32 bytes and the tombstone as the string "~"."""
    if layout is Layout.COMPACT and not (tombstone and value == {"S": TOMBSTONE_HASH}):
        return hash_of_bytes(typed(value, "B", "binary"))
    return hash_of_text(string(value), tombstone=tombstone)


# --- the two layouts' forms, read -----------------------------------------------------------


def time_of_number(number: Any) -> str:
    """The stored form of a timestamp the compact layout holds (a number's text)."""
    try:
        micros = int(number)
    except (TypeError, ValueError):
        raise BadField(f"expected a whole number of microseconds, got {number!r}") from None
    if not EARLIEST <= micros <= LATEST:
        raise BadField(f"a time out of the stored form's range: {number!r}")
    return (EPOCH + micros * MICROSECOND).strftime(STORED_FORMAT)


def time_of_text(text: Any) -> str:
    """The stored form of a timestamp the text layout holds, checked: a string that sorts as
    a time must be one (a bad one would sort above, or below, every real time)."""
    if not isinstance(text, str) or not STORED_TIME.fullmatch(text):
        raise BadField(f"not a time in the stored form 2026-11-01T09:00:00.000000Z: {text!r}")
    try:
        moment = datetime.strptime(text, STORED_FORMAT)
    except ValueError:
        raise BadField(f"not a valid date and time: {text!r}") from None
    if moment.year < 1000:
        raise BadField(f"a time out of the stored form's range: {text!r}")
    return text


def hash_of_bytes(data: bytes | str, length: int = DIGEST_BYTES, what: str = "a sha256") -> str:
    """The hex sha256 (or another digest of `length` bytes) the compact layout holds as bytes
    (base64 text in a Lambda event's stream image)."""
    try:
        data = base64.b64decode(data, validate=True) if isinstance(data, str) else bytes(data)
    except (binascii.Error, TypeError, ValueError):
        raise BadField(f"expected binary, got {data!r}") from None
    if len(data) != length:
        raise BadField(f"{what} is {length} bytes, this is {len(data)}")
    return data.hex()


def hash_of_text(text: Any, *, tombstone: bool = True) -> str:
    """The hex sha256 (or, `tombstone`, TOMBSTONE_HASH) the text layout holds, checked."""
    if isinstance(text, str) and (
        HEX_DIGEST.fullmatch(text) or (tombstone and text == TOMBSTONE_HASH)
    ):
        return text
    raise BadField(f"not a sha256 in 64 lowercase hex digits: {str(text)[:80]!r}")


def codec_of_text(text: str, layout: Layout = Layout.COMPACT, holder: str = "entry") -> str:
    """The codec a `z` of an entry's (or a part's, `holder`) body names in `layout`: a tag
    (compact), or a name (text). Raises BadField for any other."""
    known = CODECS[layout][holder]
    if text not in known:
        raise BadField(
            f"not a codec of {'a part' if holder == 'part' else 'an entry'} in the {layout} "
            f"layout ({', '.join(sorted(known))}): {str(text)[:80]!r}"
        )
    return known[text]


def layout_of_entry(value: Mapping[str, Any]) -> Layout | None:
    """The layout an entry's map is in, by the form of its `t` (None: neither)."""
    stamp = value.get("M", {}).get("t", {}) if isinstance(value, Mapping) else {}
    return Layout.COMPACT if "N" in stamp else Layout.TEXT if "S" in stamp else None


# --- entries and items ------------------------------------------------------------------------


@dataclass(frozen=True)
class Condemnation:
    """The garbage collector's mark on an item: bodies it deletes before `deadline`."""

    deadline: float
    bodies: frozenset[str]  # condemned_name() of each

    def covers(self, content_hash: str) -> bool:
        return condemned_name(content_hash) in self.bodies


def condemnation_of(raw: Mapping[str, Any]) -> Condemnation | None:
    """The collector's condemnation in a raw item, if it has one."""
    if CONDEMNED_UNTIL not in raw:
        return None
    bodies = raw.get(CONDEMNED_BODIES, {}).get("SS", [])
    return Condemnation(float(raw[CONDEMNED_UNTIL]["N"]), frozenset(bodies))


class Read(NamedTuple):
    """An item as a write reads it, decoded once: the raw item (what the write's condition
    compares with), the item the store wrote (None: none yet) and the collector's
    condemnation (None: none). DynamoIndex decides a write, and builds its request, from it."""

    raw: dict[str, Any]
    item: Item | None
    condemnation: Condemnation | None


def read(raw: dict[str, Any]) -> Read:
    """The item `raw` decoded for a write (`item_from_dynamo`, `condemnation_of`)."""
    return Read(raw, item_from_dynamo(raw), condemnation_of(raw))


def entry_from_dynamo(value: Mapping[str, Any], *, with_body: bool = True) -> Entry:
    """An entry from its DynamoDB map, every field checked in the layout its `t` is in (a
    write lays an entry out in one layout: layouts.py). `with_body=False` leaves an inline
    body unread (its `inline` is then b""): stream images in a Lambda event carry it
    base64-encoded, and a consumer that only needs where the body lives need not decode it.
    Raises MalformedItem (errors.DamagedItem) naming the field: nothing is read, ordered or
    served from a value neither layout writes."""
    attrs = decoded(value, "", as_map)
    stamp = attrs.get(UPDATED_AT)
    layout = layout_of_entry({"M": {UPDATED_AT: stamp}}) if isinstance(stamp, Mapping) else None
    if layout is None:
        raise DamagedItem(f"expected a number (compact) or a string (text), got {stamp!r}", "t")
    content_hash = decoded(attrs, CONTENT_HASH, lambda v: stored_hash(v, layout))
    deleted = content_hash == TOMBSTONE_HASH
    content_type = optional(attrs, CONTENT_TYPE, text)
    inline = optional(attrs, INLINE_BODY, lambda v: binary(v, with_body))
    codec = optional(attrs, CODEC, lambda v: codec_of_text(string(v), layout, "entry"))
    purge = optional(attrs, PURGE, flag) or False
    dropped = optional(attrs, DROPPED, flag) or False
    dictionary = optional(attrs, DICTIONARY, _dictionary_id)
    body_hash = optional(attrs, BODY_HASH, lambda v: stored_hash(v, layout, tombstone=False))
    parts = optional(attrs, PARTS, lambda v: _parts(v, layout, with_body)) or ()
    for damaged, field, reason in (
        (deleted and inline is not None, INLINE_BODY, "a delete with a body"),
        (deleted and bool(parts), PARTS, "a delete with parts"),
        (purge and not deleted, PURGE, "a purge flag on a put"),
        (dropped and not deleted, DROPPED, "a dropped-history flag on a put"),
        (codec is not None and inline is None, CODEC, "a codec with no inline body"),
        (dictionary is not None and codec != ZSTD, DICTIONARY, "a dictionary for no zstd body"),
        (bool(parts) != (body_hash is not None), BODY_HASH if parts else PARTS, _PARTS_TOGETHER),
    ):
        if damaged:
            raise DamagedItem(reason, field)
    if content_type is None and not deleted:
        content_type = JSON_CONTENT_TYPE
    return Entry(
        updated_at=decoded(attrs, UPDATED_AT, lambda v: time(v, layout)),
        content_hash=content_hash,
        size=decoded(attrs, SIZE, size),
        written_at=decoded(attrs, WRITTEN_AT, epoch_seconds),
        token=decoded(attrs, WRITER, text),
        content_type=content_type,
        inline=inline,
        codec=codec,
        dictionary=dictionary,
        purge=purge,
        dropped=dropped,
        body_hash=body_hash,
        parts=parts,
    )


def _dictionary_id(value: Any) -> str:
    """The id of a zstd dictionary (`zd`): DICTIONARY_ID_BYTES of binary (base64 text in a
    Lambda event's stream image), as hex."""
    return hash_of_bytes(typed(value, "B", "binary"), DICTIONARY_ID_BYTES, "a dictionary's id")


_PARTS_TOGETHER = f"a version with parts has both `{BODY_HASH}` and `{PARTS}`, one without neither"


def _parts(value: Any, layout: Layout, with_body: bool) -> tuple[StoredPart, ...]:
    parts = as_map(value)
    if not parts:
        raise BadField("a version with parts has at least one")
    if len(parts) > MAX_PARTS:
        raise BadField(f"{len(parts)} parts, more than the {MAX_PARTS} a version may have")
    return tuple(
        decoded(parts, name, lambda v, n=name: _part(n, v, layout, with_body))
        for name in sorted(parts)
    )


def _part(name: str, value: Any, layout: Layout, with_body: bool) -> StoredPart:
    if not isinstance(name, str) or not PART_NAME.fullmatch(name):
        raise BadField(f"not a part name ({PART_NAME.pattern})")
    attrs = as_map(value)
    inline = optional(attrs, INLINE_BODY, lambda v: binary(v, with_body))
    codec = optional(attrs, CODEC, lambda v: codec_of_text(string(v), layout, "part"))
    if codec == SAME:
        if inline is not None:
            raise DamagedItem("a part held by the next version has no bytes of its own", CODEC)
        inline = b""  # inline, in the version after it
    elif codec is not None and inline is None:
        raise DamagedItem("a codec with no inline bytes", CODEC)
    return StoredPart(
        name=name,
        content_hash=decoded(
            attrs, CONTENT_HASH, lambda v: stored_hash(v, layout, tombstone=False)
        ),
        size=decoded(attrs, SIZE, size),
        content_type=optional(attrs, CONTENT_TYPE, text) or BINARY_CONTENT_TYPE,
        inline=inline,
        codec=codec,
    )


def item_from_dynamo(raw: Mapping[str, Any], *, with_bodies: bool = True) -> Item | None:
    """The item the store wrote, or None when there is none (no item, or only GC markers).
    Raises MalformedItem (errors.DamagedItem, naming the id and the field) when any of its
    fields is not as either layout writes it."""
    if not raw or CURRENT not in raw:
        return None
    id = _id_or_none(raw)
    try:
        if id is None:
            decoded(raw, ID, text)  # raises: missing, or not a string
        number = decoded(raw, VERSION, version)
        current = decoded(raw, CURRENT, as_list)
        if len(current) != 1:
            raise DamagedItem(f"holds {len(current)} entries, not 1", CURRENT)
        history = optional(raw, HISTORY, as_list) or []
        if number < 1 + len(history):
            raise DamagedItem(
                f"version {number} is lower than the {len(history) + 1} entries held", VERSION
            )
        return Item(
            id=str(id),
            version=number,
            current=_entry_at(current[0], f"{CURRENT}[0]", with_bodies),
            history=tuple(
                _entry_at(e, f"{HISTORY}[{i}]", with_bodies) for i, e in enumerate(history)
            ),
        )
    except DamagedItem as error:
        raise error.within(id=id) from None


def _entry_at(value: Any, where: str, with_body: bool) -> Entry:
    try:
        return entry_from_dynamo(value, with_body=with_body)
    except DamagedItem as error:
        raise error.within(where) from None


def _id_or_none(raw: Mapping[str, Any]) -> str | None:
    value = raw.get(ID)
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        return value["S"]
    return None


def version_of(raw: Mapping[str, Any] | None) -> int | None:
    """The version number a raw item holds, or None (no item, or only GC markers)."""
    if not raw or VERSION not in raw:
        return None
    return _version_of(raw)


def _version_of(raw: Mapping[str, Any]) -> int:
    try:
        return decoded(raw, VERSION, version)
    except DamagedItem as error:
        raise error.within(id=_id_or_none(raw)) from None


def id_of(raw: Mapping[str, Any] | None) -> str | None:
    return decoded(raw, ID, text) if raw and ID in raw else None
