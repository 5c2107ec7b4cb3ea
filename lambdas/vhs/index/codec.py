"""The DynamoDB item of one record id: its one codec.

Every module that reads or writes the table (the index, the change feed, the collector,
`vhs verify`) goes through this one, so the layout is written down once. Attribute names are
short, and values compact, because every byte is billed in write units. Entries are written in
the compact layout and read in it or in the text layout every write made before (layouts.py:
`t`, `h`, `bh` and `z` take one form or the other; `stored_layout` says which an item is in):

    id   S  the record id (partition key, from resources.TABLE)
    v    N  the current version number: 1, 2, 3... with no gaps and no reuse
    c    L  [current entry]   a one-element list, so an update can move it into `p` as is
    p    L  [earlier entries] oldest first; entry i has version v - len(p) + i

    gcd  N   the garbage collector's condemnation: it deletes the bodies named in `gcs`
             before this deadline (epoch seconds). See docs/gc.md. The key of the sparse
             index resources.TABLE.condemned_index, which holds only condemned items.
    gcs  SS  the condemned bodies of this id, by the first CONDEMNED_HASH_CHARS characters of
             their sha256: at most MAX_CONDEMNED_HELD of them (MAX_CONDEMNED more with each
             condemnation, or renewal, of one collector run), so a condemnation adds at most
             CONDEMNATION_BYTES to an item however many orphans an id has.

    entry (M): t updated_at (N: microseconds since the epoch; text: the stored RFC 3339 form),
               h sha256 (B: its 32 bytes; text: hex) or "~" for a delete,
               n size, w written-at epoch seconds,
               k writer token, ct content type (absent: application/json),
               b inline body, z codec of b (absent: not compressed; "zlib", or the
               one-letter tag of another, layouts.CODEC_TAGS; text: packing.py's names),
               zd the id of the zstd dictionary b was packed with (B: 8 bytes; only with
               packing.ZSTD, dictionaries.py),
               x true on a purging delete (absent: false): retention keeps no earlier version,
               dx true on a delete whose dropped history the collector condemned (absent:
               false): what it dropped stays dropped (retention.py, docs/gc.md),
               and only on a version with parts (docs/design.md, "Parts"; h is then the
               sha256 of the version's manifest):
               bh the body's own sha256 (as h), pt the parts: a map of name to part
    part (M):  h sha256 (as an entry's), n size, ct content type (absent:
               application/octet-stream), b inline bytes, z codec of b (absent: not
               compressed; SAME ("s"; text: "same"), with no b:
               the bytes of the part with this h in the next version, deltas.py)

A body lives inline (`b`) or in S3 under `keys.body_key(prefix, id, h)` (`bh` for a version
with parts); a delete has none. A part lives inline or in S3 under `keys.body_key(prefix, id,
its h)`, exactly as a body does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import keys
from ..codec import BINARY_CONTENT_TYPE, JSON_CONTENT_TYPE
from ..errors import BadField, DamagedItem
from ..model import Entry, Item, StoredPart
from ..ordering import TOMBSTONE_HASH
from ..packing import DICTIONARY_ID_BYTES, SAME, ZSTD
from ..parts import MAX_PARTS, PART_NAME
from ..resources import TABLE
from . import fields
from .layouts import (
    Layout,
    codec_of_text,
    codec_value,
    hash_of_bytes,
    hash_value,
    layout_of_entry,
    time_value,
)

ID = TABLE.partition_key
VERSION = "v"
CURRENT = "c"
HISTORY = "p"
CONDEMNED_UNTIL = TABLE.condemned_index_key  # "gcd", the key of the sparse index
CONDEMNED_BODIES = "gcs"
# 64 bits of a sha256 name a body among one id's bodies; a collision only makes a writer wait.
CONDEMNED_HASH_CHARS = 16
# DynamoDB's limit on an item's size (item_size).
ITEM_LIMIT = 400 * 1024
# Bodies one condemnation (or renewal of one) names; a run renews an id's condemnation while
# it has orphans and time, up to MAX_CONDEMNED_HELD names in all until the condemnation expires.
MAX_CONDEMNED = 1000
MAX_CONDEMNED_HELD = 6 * MAX_CONDEMNED
# The most a condemnation takes of its item by DynamoDB's size rules: the names of `gcd` and
# `gcs`, the deadline (a number: at most 20 bytes) and the set's members (about 94 KiB).
CONDEMNATION_BYTES = (
    len(CONDEMNED_UNTIL) + 20 + len(CONDEMNED_BODIES) + MAX_CONDEMNED_HELD * CONDEMNED_HASH_CHARS
)
# An entry's attributes.
DROPPED = "dx"
# What the collector may add to an item after a write: its largest condemnation, and the
# dropped-history flag on the current entry (a map element: 1 byte, its name, a boolean).
COLLECTOR_BYTES = CONDEMNATION_BYTES + 1 + len(DROPPED) + 1
# The most a write may make an item (id, v, c and p) by DynamoDB's size rules: the rest of
# the 400 KB is the collector's. A write that would outgrow it drops the oldest history
# (fit_history); one whose current entry alone would is refused (errors.ItemTooLarge).
ITEM_BUDGET = ITEM_LIMIT - COLLECTOR_BYTES
UPDATED_AT = "t"
CONTENT_HASH = "h"
SIZE = "n"
WRITTEN_AT = "w"
WRITER = "k"  # the writer's token (see table.py)
CONTENT_TYPE = "ct"
INLINE_BODY = "b"
CODEC = "z"
DICTIONARY = "zd"
PURGE = "x"
BODY_HASH = "bh"
PARTS = "pt"

INLINE = "inline"  # the location of an inline body


# An item (or a stream image of one) that is not laid out as this module writes it: the one
# typed error its decoders raise (errors.DamagedItem), naming the field and, in an item, the id.
MalformedItem = DamagedItem


@dataclass(frozen=True)
class Condemnation:
    """The garbage collector's mark on an item: bodies it deletes before `deadline`."""

    deadline: float
    bodies: frozenset[str]  # condemned_name() of each

    def covers(self, content_hash: str) -> bool:
        return condemned_name(content_hash) in self.bodies


def condemned_name(content_hash: str) -> str:
    """How `gcs` names a body."""
    return content_hash[:CONDEMNED_HASH_CHARS]


def condemnation_of(raw: Mapping[str, Any]) -> Condemnation | None:
    """The collector's condemnation in a raw item, if it has one."""
    if CONDEMNED_UNTIL not in raw:
        return None
    bodies = raw.get(CONDEMNED_BODIES, {}).get("SS", [])
    return Condemnation(float(raw[CONDEMNED_UNTIL]["N"]), frozenset(bodies))


def entry_to_dynamo(entry: Entry, layout: Layout = Layout.COMPACT) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        UPDATED_AT: time_value(entry.updated_at, layout),
        CONTENT_HASH: hash_value(entry.content_hash, layout),
        SIZE: {"N": str(entry.size)},
        WRITTEN_AT: {"N": str(entry.written_at)},
        WRITER: {"S": entry.token},
    }
    if stored_content_type(entry) is not None:
        attrs[CONTENT_TYPE] = {"S": entry.content_type}
    if entry.purge:
        attrs[PURGE] = {"BOOL": True}
    if entry.dropped:
        attrs[DROPPED] = {"BOOL": True}
    if entry.inline is not None:
        attrs[INLINE_BODY] = {"B": entry.inline}
        if entry.codec:
            attrs[CODEC] = codec_value(entry.codec, layout)
        if entry.dictionary:
            attrs[DICTIONARY] = {"B": bytes.fromhex(entry.dictionary)}
    if entry.parts:
        attrs[BODY_HASH] = hash_value(entry.body_sha256, layout)
        attrs[PARTS] = {"M": {part.name: _part_to_dynamo(part, layout) for part in entry.parts}}
    return {"M": attrs}


def _part_to_dynamo(part: StoredPart, layout: Layout) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        CONTENT_HASH: hash_value(part.content_hash, layout),
        SIZE: {"N": str(part.size)},
    }
    if part.content_type != BINARY_CONTENT_TYPE:
        attrs[CONTENT_TYPE] = {"S": part.content_type}
    if part.codec == SAME:  # the next version's bytes (deltas.py): none of its own
        attrs[CODEC] = codec_value(SAME, layout)
    elif part.inline is not None:
        attrs[INLINE_BODY] = {"B": part.inline}
        if part.codec:
            attrs[CODEC] = codec_value(part.codec, layout)
    return {"M": attrs}


def stored_content_type(entry: Entry) -> str | None:
    """The content type as the item stores it: absent for JSON and for deletes."""
    if entry.content_type and entry.content_type != JSON_CONTENT_TYPE and not entry.deleted:
        return entry.content_type
    return None


def entry_from_dynamo(value: Mapping[str, Any], *, with_body: bool = True) -> Entry:
    """An entry from its DynamoDB map, every field checked in the layout its `t` is in (a
    write lays an entry out in one layout: layouts.py). `with_body=False` leaves an inline
    body unread (its `inline` is then b""): stream images in a Lambda event carry it
    base64-encoded, and a consumer that only needs where the body lives need not decode it.
    Raises MalformedItem (errors.DamagedItem) naming the field: nothing is read, ordered or
    served from a value neither layout writes."""
    attrs = fields.decoded(value, "", fields.as_map)
    stamp = attrs.get(UPDATED_AT)
    layout = layout_of_entry({"M": {UPDATED_AT: stamp}}) if isinstance(stamp, Mapping) else None
    if layout is None:
        raise DamagedItem(f"expected a number (compact) or a string (text), got {stamp!r}", "t")
    content_hash = fields.decoded(attrs, CONTENT_HASH, lambda v: fields.content_hash(v, layout))
    deleted = content_hash == TOMBSTONE_HASH
    content_type = fields.optional(attrs, CONTENT_TYPE, fields.text)
    inline = fields.optional(attrs, INLINE_BODY, lambda v: fields.binary(v, with_body))
    codec = fields.optional(
        attrs, CODEC, lambda v: codec_of_text(fields.string(v), layout, "entry")
    )
    purge = fields.optional(attrs, PURGE, fields.flag) or False
    dropped = fields.optional(attrs, DROPPED, fields.flag) or False
    dictionary = fields.optional(attrs, DICTIONARY, _dictionary_id)
    body_hash = fields.optional(
        attrs, BODY_HASH, lambda v: fields.content_hash(v, layout, tombstone=False)
    )
    parts = fields.optional(attrs, PARTS, lambda v: _parts(v, layout, with_body)) or ()
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
        updated_at=fields.decoded(attrs, UPDATED_AT, lambda v: fields.time(v, layout)),
        content_hash=content_hash,
        size=fields.decoded(attrs, SIZE, fields.size),
        written_at=fields.decoded(attrs, WRITTEN_AT, fields.epoch_seconds),
        token=fields.decoded(attrs, WRITER, fields.text),
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
    return hash_of_bytes(
        fields.typed(value, "B", "binary"), DICTIONARY_ID_BYTES, "a dictionary's id"
    )


_PARTS_TOGETHER = f"a version with parts has both `{BODY_HASH}` and `{PARTS}`, one without neither"


def _parts(value: Any, layout: Layout, with_body: bool) -> tuple[StoredPart, ...]:
    parts = fields.as_map(value)
    if not parts:
        raise BadField("a version with parts has at least one")
    if len(parts) > MAX_PARTS:
        raise BadField(f"{len(parts)} parts, more than the {MAX_PARTS} a version may have")
    return tuple(
        fields.decoded(parts, name, lambda v, n=name: _part(n, v, layout, with_body))
        for name in sorted(parts)
    )


def _part(name: str, value: Any, layout: Layout, with_body: bool) -> StoredPart:
    if not isinstance(name, str) or not PART_NAME.fullmatch(name):
        raise BadField(f"not a part name ({PART_NAME.pattern})")
    attrs = fields.as_map(value)
    inline = fields.optional(attrs, INLINE_BODY, lambda v: fields.binary(v, with_body))
    codec = fields.optional(attrs, CODEC, lambda v: codec_of_text(fields.string(v), layout, "part"))
    if codec == SAME:
        if inline is not None:
            raise DamagedItem("a part held by the next version has no bytes of its own", CODEC)
        inline = b""  # inline, in the version after it
    elif codec is not None and inline is None:
        raise DamagedItem("a codec with no inline bytes", CODEC)
    return StoredPart(
        name=name,
        content_hash=fields.decoded(
            attrs, CONTENT_HASH, lambda v: fields.content_hash(v, layout, tombstone=False)
        ),
        size=fields.decoded(attrs, SIZE, fields.size),
        content_type=fields.optional(attrs, CONTENT_TYPE, fields.text) or BINARY_CONTENT_TYPE,
        inline=inline,
        codec=codec,
    )


def version_of(raw: Mapping[str, Any] | None) -> int | None:
    """The version number a raw item holds, or None (no item, or only GC markers)."""
    if not raw or VERSION not in raw:
        return None
    return _version_of(raw)


def _version_of(raw: Mapping[str, Any]) -> int:
    try:
        return fields.decoded(raw, VERSION, fields.version)
    except DamagedItem as error:
        raise error.within(id=_id_or_none(raw)) from None


def id_of(raw: Mapping[str, Any] | None) -> str | None:
    return fields.decoded(raw, ID, fields.text) if raw and ID in raw else None


def item_from_dynamo(raw: Mapping[str, Any], *, with_bodies: bool = True) -> Item | None:
    """The item the store wrote, or None when there is none (no item, or only GC markers).
    Raises MalformedItem (errors.DamagedItem, naming the id and the field) when any of its
    fields is not as either layout writes it."""
    if not raw or CURRENT not in raw:
        return None
    id = _id_or_none(raw)
    try:
        if id is None:
            fields.decoded(raw, ID, fields.text)  # raises: missing, or not a string
        version = fields.decoded(raw, VERSION, fields.version)
        current = fields.decoded(raw, CURRENT, fields.as_list)
        if len(current) != 1:
            raise DamagedItem(f"holds {len(current)} entries, not 1", CURRENT)
        history = fields.optional(raw, HISTORY, fields.as_list) or []
        if version < 1 + len(history):
            raise DamagedItem(
                f"version {version} is lower than the {len(history) + 1} entries held", VERSION
            )
        return Item(
            id=str(id),
            version=version,
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


MIXED = "mixed"  # an item holding entries of both layouts (a blind write's: docs/design.md)


def raw_entries(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The low-level entries (AttributeValue maps) an item holds: the current one, then the
    retained ones."""
    return [*raw.get(CURRENT, {}).get("L", []), *raw.get(HISTORY, {}).get("L", [])]


def stored_layout(raw: Mapping[str, Any]) -> str | None:
    """The layout an item's entries are stored in: a Layout, MIXED, or None (no entries)."""
    found = {layout_of_entry(entry) for entry in raw_entries(raw)}
    if not found:
        return None
    return str(found.pop()) if len(found) == 1 and None not in found else MIXED


def layout_problem(raw: Mapping[str, Any], item: Item | None) -> str | None:
    """Why a raw item that `item_from_dynamo` read as no item (`item` None) is not one the
    store wrote: attributes besides the collector's with no current entry. (Every field of an
    item with entries is checked as it is decoded: MalformedItem.)"""
    if item is None:
        stray = sorted(name for name in raw if name not in (ID, CONDEMNED_UNTIL, CONDEMNED_BODIES))
        return f"no current entry, but has {', '.join(stray)}" if stray else None
    return None


def body_location(entry: Entry, id: str, *, bucket: str, prefix: str) -> str | None:
    """Where an entry's body lives: "inline", s3://bucket/key, or None for a delete."""
    if entry.deleted:
        return None
    if entry.inline is not None:
        return INLINE
    return f"s3://{bucket}/{keys.body_key(prefix, id, entry.body_sha256)}"


def part_location(part: StoredPart, id: str, *, bucket: str, prefix: str) -> str:
    """Where a part lives: "inline" or s3://bucket/key."""
    if part.inline is not None:
        return INLINE
    return f"s3://{bucket}/{keys.body_key(prefix, id, part.content_hash)}"
