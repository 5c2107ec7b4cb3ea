"""The DynamoDB item of one record id: its one codec.

Every module that reads or writes the table (the index, the change feed, the collector,
`vhs verify`) goes through this one, so the layout is written down once. Attribute names are
short, and values compact, because every byte is billed in write units. Entries are written in
the compact layout and read in it or in the text layout every write made before (layouts.py:
`t`, `h`, `bh` and `z` take one form or the other; `stored_layout` says which an item is in):

    id   S  the record id (partition key, from shapes.TABLE)
    v    N  the current version number: 1, 2, 3... with no gaps and no reuse
    c    L  [current entry]   a one-element list, so an update can move it into `p` as is
    p    L  [earlier entries] oldest first; entry i has version v - len(p) + i

    gcd  N   the garbage collector's condemnation: it deletes the bodies named in `gcs`
             before this deadline (epoch seconds). See docs/gc.md. The key of the sparse
             index shapes.TABLE.condemned_index, which holds only condemned items.
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
               the bytes of the part with this h in the next version, history/stored_deltas.py)

A body lives inline (`b`) or in S3 under `keys.body_key(prefix, id, h)` (`bh` for a version
with parts); a delete has none. A part lives inline or in S3 under `keys.body_key(prefix, id,
its h)`, exactly as a body does.

This module writes the item (`entry_to_dynamo`, `entries_to_dynamo`, each value in its layout,
the conditions' values); decode.py reads it, every field checked, in one pass; attributes.py
names its attributes. The codec's names are all three's: `codec.item_from_dynamo`, `codec.ID`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .. import keys
from ..bodies.packing import SAME
from ..codec import BINARY_CONTENT_TYPE, JSON_CONTENT_TYPE
from ..errors import DamagedItem
from ..model import Entry, Item, StoredPart
from ..ordering import TOMBSTONE_HASH, OrderKey
from ..timestamps import STORED_FORMAT
from .attributes import *  # the item's names are the codec's: codec.ID, codec.CURRENT...
from .conditions import CONDITION_FORMS, TYPE_NAMES
from .decode import Condemnation as Condemnation
from .decode import condemnation_of as condemnation_of
from .decode import entry_from_dynamo as entry_from_dynamo
from .decode import id_of as id_of
from .decode import item_from_dynamo as item_from_dynamo
from .decode import layout_of_entry
from .decode import version_of as version_of
from .layouts import CODEC_TAGS, EPOCH, MICROSECOND, Layout

# An item (or a stream image of one) that is not laid out as this module writes it: the one
# typed error its decoders raise (errors.DamagedItem), naming the field and, in an item, the id.
MalformedItem = DamagedItem


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


def entries_to_dynamo(entries: Iterable[Entry], layout: Layout) -> list[dict[str, Any]]:
    """`entries`, each laid out in `layout` (what one write writes: its entry and the history
    it holds)."""
    return [entry_to_dynamo(entry, layout) for entry in entries]


def _part_to_dynamo(part: StoredPart, layout: Layout) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        CONTENT_HASH: hash_value(part.content_hash, layout),
        SIZE: {"N": str(part.size)},
    }
    if part.content_type != BINARY_CONTENT_TYPE:
        attrs[CONTENT_TYPE] = {"S": part.content_type}
    if part.codec == SAME:  # the next version's bytes (history/stored_deltas.py): none of its own
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


# --- the two layouts' forms, written ---------------------------------------------------------


def time_value(stored: str, layout: Layout) -> dict[str, str]:
    """The DynamoDB value of an ordering timestamp (ordering's stored form) in `layout`."""
    if layout is Layout.TEXT:
        return {"S": stored}
    moment = datetime.strptime(stored, STORED_FORMAT).replace(tzinfo=UTC)
    return {"N": str((moment - EPOCH) // MICROSECOND)}


def hash_value(content_hash: str, layout: Layout) -> dict[str, Any]:
    """The DynamoDB value of a sha256 (hex) or TOMBSTONE_HASH in `layout`."""
    if layout is Layout.TEXT or content_hash == TOMBSTONE_HASH:
        return {"S": content_hash}
    return {"B": bytes.fromhex(content_hash)}


def codec_value(codec: str, layout: Layout) -> dict[str, str]:
    return {"S": codec if layout is Layout.TEXT else CODEC_TAGS.get(codec, codec)}


def key_values(incoming: OrderKey, layouts: Iterable[Layout]) -> dict[str, dict[str, Any]]:
    """The values of the ordering conditions' placeholders for `incoming`, in each of
    `layouts` (those whose CONDITION_FORMS the condition names: DynamoDB refuses unused ones)."""
    values: dict[str, dict[str, Any]] = {":ct": {"S": incoming.content_type}}
    for layout in layouts:
        form = CONDITION_FORMS[layout]
        values[form.t] = time_value(incoming.updated_at, layout)
        values[form.h] = hash_value(incoming.content_hash, layout)
        values |= TYPE_NAMES[layout]
    return values


# --- what is read of a raw item besides its entries -------------------------------------------


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
