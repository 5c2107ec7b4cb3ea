"""The two forms an entry's ordering key, hashes and codec names take in the item (codec.py).

DynamoDB bills a write by the started kilobyte of the item, so the bytes of every held entry
are paid again on every update of the id. The compact layout, which every write makes, stores

* `t`, the ordering timestamp, as a number: microseconds since 1970-01-01T00:00:00Z, the
  precision of the stored form the ordering key compares (vhs/timestamps.py; never coarser),
  negative before 1970;
* `h` (and `bh`, and a part's `h`), a sha256, as its 32 raw bytes; a delete's TOMBSTONE_HASH
  stays the one-character string "~", which the conditions order after every binary digest
  (conditions.StoredForm);
* `z`, a delta's codec, as one character (CODEC_TAGS); zlib, the current entry's codec, held
  once an item, keeps its name.

The text layout, which every write made before, stores the same values as text: `t` in the
stored RFC 3339 form, hashes as lowercase hex, codecs by their names. Items in it are read as
they are; a write rewrites what it writes in the compact layout (docs/design.md, "Item
layouts"). Both forms are defined here, field by field, so the one that is no longer written
cannot drift from the one that is: the text form is written only where a test or benchmark
sets `DynamoIndex.layout`.

DynamoDB orders numbers by value and binary values by their unsigned bytes, so every
comparison the ordering conditions make gives the same answer in either layout; a comparison
between two types is never made, because each branch of a condition first checks the form
the current entry is stored in (`CONDITION_FORMS`).
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import BadField
from ..ordering import TOMBSTONE_HASH, OrderKey
from ..packing import DELTA, SAME, ZLIB, ZSTD, ZSTD_DELTA
from ..timestamps import stored_form, stored_to_datetime
from .conditions import StoredForm


class Layout(enum.StrEnum):
    COMPACT = "compact"  # what every write makes
    TEXT = "text"  # what every write made before: read, and rewritten by the next write


CODEC_TAGS = {DELTA: "d", SAME: "s", ZSTD: "Z", ZSTD_DELTA: "D"}
_CODEC_NAMES = {tag: name for name, tag in CODEC_TAGS.items()}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# The stored form's range (timestamps.parse_timestamp: four-digit years).
_EARLIEST = (datetime(1000, 1, 1, tzinfo=UTC) - _EPOCH) // _MICROSECOND
_LATEST = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - _EPOCH) // _MICROSECOND

# How each layout stores the current entry's key, for the ordering conditions: a check that
# the entry is stored so (attribute_type), and the placeholders of the incoming key's
# `updated_at` and hash typed as it stores them. Their values: `key_values`.
CONDITION_FORMS = {
    Layout.COMPACT: StoredForm("attribute_type(#c[0].#t, :N)", ":t", ":h", binary=":B"),
    Layout.TEXT: StoredForm("attribute_type(#c[0].#t, :S)", ":tx", ":hx"),
}
_TYPE_NAMES = {
    Layout.COMPACT: {":N": {"S": "N"}, ":B": {"S": "B"}},
    Layout.TEXT: {":S": {"S": "S"}},
}


def time_value(stored: str, layout: Layout) -> dict[str, str]:
    """The DynamoDB value of an ordering timestamp (ordering's stored form) in `layout`."""
    if layout is Layout.TEXT:
        return {"S": stored}
    return {"N": str((stored_to_datetime(stored) - _EPOCH) // _MICROSECOND)}


def time_of_number(number: Any) -> str:
    """The stored form of a timestamp the compact layout holds (a number's text)."""
    try:
        micros = int(number)
    except (TypeError, ValueError):
        raise BadField(f"expected a whole number of microseconds, got {number!r}") from None
    if not _EARLIEST <= micros <= _LATEST:
        raise BadField(f"a time out of the stored form's range: {number!r}")
    return stored_form(_EPOCH + micros * _MICROSECOND)


# The stored form (timestamps.stored_form) exactly: fixed width, so string order is time order.
_STORED_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_DIGEST_BYTES = 32


def time_of_text(text: Any) -> str:
    """The stored form of a timestamp the text layout holds, checked: a string that sorts as
    a time must be one (a bad one would sort above, or below, every real time)."""
    if not isinstance(text, str) or not _STORED_TIME.fullmatch(text):
        raise BadField(f"not a time in the stored form 2026-11-01T09:00:00.000000Z: {text!r}")
    try:
        moment = stored_to_datetime(text)
    except ValueError:
        raise BadField(f"not a valid date and time: {text!r}") from None
    if moment.year < 1000:
        raise BadField(f"a time out of the stored form's range: {text!r}")
    return text


def hash_value(content_hash: str, layout: Layout) -> dict[str, Any]:
    """The DynamoDB value of a sha256 (hex) or TOMBSTONE_HASH in `layout`."""
    if layout is Layout.TEXT or content_hash == TOMBSTONE_HASH:
        return {"S": content_hash}
    return {"B": bytes.fromhex(content_hash)}


def hash_of_bytes(data: bytes | str, length: int = _DIGEST_BYTES, what: str = "a sha256") -> str:
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
        _HEX_DIGEST.fullmatch(text) or (tombstone and text == TOMBSTONE_HASH)
    ):
        return text
    raise BadField(f"not a sha256 in 64 lowercase hex digits: {str(text)[:80]!r}")


def codec_value(codec: str, layout: Layout) -> dict[str, str]:
    return {"S": codec if layout is Layout.TEXT else CODEC_TAGS.get(codec, codec)}


# The codecs each layout names, by where `z` is: an entry's body is zlib or a delta, a part's
# zlib or the next version's bytes (packing.py, deltas.py).
_CODECS = {
    Layout.COMPACT: {
        "entry": {ZLIB: ZLIB, "d": DELTA, "Z": ZSTD, "D": ZSTD_DELTA},
        "part": {ZLIB: ZLIB, "s": SAME},
    },
    Layout.TEXT: {
        "entry": {ZLIB: ZLIB, DELTA: DELTA, ZSTD: ZSTD, ZSTD_DELTA: ZSTD_DELTA},
        "part": {ZLIB: ZLIB, SAME: SAME},
    },
}


def codec_of_text(text: str, layout: Layout = Layout.COMPACT, holder: str = "entry") -> str:
    """The codec a `z` of an entry's (or a part's, `holder`) body names in `layout`: a tag
    (compact), or a name (text). Raises BadField for any other."""
    known = _CODECS[layout][holder]
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


def key_values(incoming: OrderKey, layouts: Iterable[Layout]) -> dict[str, dict[str, Any]]:
    """The values of the ordering conditions' placeholders for `incoming`, in each of
    `layouts` (those whose CONDITION_FORMS the condition names: DynamoDB refuses unused ones)."""
    values: dict[str, dict[str, Any]] = {":ct": {"S": incoming.content_type}}
    for layout in layouts:
        form = CONDITION_FORMS[layout]
        values[form.t] = time_value(incoming.updated_at, layout)
        values[form.h] = hash_value(incoming.content_hash, layout)
        values |= _TYPE_NAMES[layout]
    return values
