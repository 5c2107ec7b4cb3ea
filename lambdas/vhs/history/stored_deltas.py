"""Earlier inline versions kept as deltas against the version after them.

DynamoDB bills an update on the whole item, so history held in full makes every update dearer
by every retained version (docs/design.md, "History: the arithmetic"). When a new version with
an inline body supersedes one with an inline body, the superseded body is stored as its
difference from the new body (packing.compress_against: zlib with the new body as its preset
dictionary, `DELTA`, or zstd with it as a raw dictionary, `ZSTD_DELTA`, whichever is
smaller): a catalogue edit then costs a few dozen bytes of history instead of a whole
compressed body.

A delta chain runs from an earlier version up to the first later version that is not a delta,
the current one at the latest; every version in between is inline, because a body is stored
against its successor only when that successor is inline. Trimming drops the oldest entries,
which ends no chain, and a purge drops them all. Decoding a version inflates the chain from
its top down, each step bounded by the entry's recorded size and checked against its sha256.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence

from ..bodies.packing import (
    DELTA,
    SAME,
    ZLIB,
    ZSTD,
    ZSTD_DELTA,
    Dictionary,
    compress_against,
    decompress,
)
from ..codec import sha256_hex
from ..errors import IntegrityError, UndecodableBody
from ..model import Entry, Item, StoredPart
from ..retention import Retention

# A reader's way to the dictionary an entry names (dictionaries.DictionaryStore.get).
Dictionaries = Callable[[str], Dictionary]
# A delta is kept only against a successor whose body is held inline.
DELTAS = (DELTA, ZSTD_DELTA)

logger = logging.getLogger(__name__)


def history_after(
    new: Entry,
    new_body: bytes | None,
    retention: Retention,
    clock: Callable[[], float],
    delta_history: bool = True,
    dictionaries: Dictionaries | None = None,
    zstd_deltas: bool = False,
) -> Callable[[Item], list[Entry]]:
    """The history an item holds once `new` (inline, body `new_body`) supersedes its current
    entry: the current entry appended, as a delta against `new_body` where that is smaller
    (`delta_history`), and whatever `retention` then no longer keeps at `clock()` dropped (so
    a write at steady state also trims, in the same request). For DynamoIndex.put_planned."""

    def history(item: Item) -> list[Entry]:
        old = item.current
        old_body = None
        if old.inline is not None and new_body is not None and delta_history:
            try:
                old_body = inline_body(item.versions(), item.version, dictionaries)
            except UndecodableBody as error:
                # Kept as it is: `vhs verify` reports it; the new version does not depend on it.
                logger.warning("%r version %d: %s", item.id, item.version, error)
        kept = old if new_body is None else supersede(old, old_body, new, new_body, zstd_deltas)
        kept = share_parts(kept, new)
        held = [*item.history, kept]
        after = Item(item.id, item.version + 1, new, tuple(held))
        return held[retention.expired_count(after, clock()) :]

    return history


def supersede(
    old: Entry,
    old_body: bytes | None,
    successor: Entry,
    successor_body: bytes,
    zstd_deltas: bool = False,
) -> Entry:
    """`old` as it is kept once `successor` is current: as a delta against `successor_body`
    (zstd's too with `zstd_deltas`) when both are inline and the delta is smaller than what
    `old` stores now, else as is. `old_body` is `old`'s decoded body (None: not inline)."""
    if (
        old_body is None
        or old.inline is None
        or old.codec not in (None, ZLIB, ZSTD)
        or successor.inline is None
    ):
        return old
    delta = compress_against(old_body, successor_body, with_zstd=zstd_deltas)
    if len(delta.data) >= len(old.inline):
        return old
    return dataclasses.replace(old, inline=delta.data, codec=delta.codec, dictionary=None)


def share_parts(old: Entry, successor: Entry) -> Entry:
    """`old` as it is kept once `successor` is current: each inline part that `successor`
    also holds inline (the same sha256) keeps no bytes of its own (`packing.SAME`), so a
    change to the JSON alone does not copy every small part into the history again."""
    shared = {p.content_hash for p in successor.parts if p.inline is not None}
    if not old.parts or not shared:
        return old
    parts = tuple(
        dataclasses.replace(p, inline=b"", codec=SAME)
        if p.inline is not None and p.content_hash in shared
        else p
        for p in old.parts
    )
    return dataclasses.replace(old, parts=parts)


def inline_part(versions: Sequence[tuple[int, Entry]], version: int, part: StoredPart) -> bytes:
    """The bytes of the inline `part` of `version`, following `packing.SAME` to the first later
    version that holds them, checked against the part's hash. Raises UndecodableBody."""
    holder: StoredPart | None = part
    if part.codec == SAME:
        later = [entry for number, entry in versions if number > version]
        holder = next(
            (
                p
                for entry in later
                for p in entry.parts
                if p.content_hash == part.content_hash and p.inline is not None and p.codec != SAME
            ),
            None,
        )
    if holder is None or holder.inline is None:
        raise UndecodableBody(
            f"version {version}'s part {part.name!r} is kept by a later version, which has none",
            version,
        )
    what = f"part {part.name!r}"
    return _inflated(what, version, holder.inline, holder.codec, part.size, part.content_hash)


def inline_body(
    versions: Sequence[tuple[int, Entry]], version: int, dictionaries: Dictionaries | None = None
) -> bytes:
    """The body of `version`, inline in the item whose held entries are `versions` (oldest
    first, current last, as `Item.versions()` gives them), checked against its hash. Raises
    UndecodableBody when it, or a later version its delta needs, does not decode or hash (or
    the dictionary one was packed with cannot be read)."""
    index = next((i for i, (number, _) in enumerate(versions) if number == version), None)
    if index is None:
        raise UndecodableBody(f"version {version} is not held", version)
    top = index
    # Up to the version the chain starts from: the first that is not a delta, or a delta
    # without an inline successor, which _decode refuses.
    while (
        versions[top][1].codec in DELTAS
        and top + 1 < len(versions)
        and versions[top + 1][1].inline is not None
    ):
        top += 1
    body = _decode(*versions[top], successor=None, dictionaries=dictionaries)
    for position in range(top - 1, index - 1, -1):
        body = _decode(*versions[position], successor=body, dictionaries=dictionaries)
    return body


def inline_bodies(
    versions: Sequence[tuple[int, Entry]], dictionaries: Dictionaries | None = None
) -> Iterator[tuple[int, bytes | UndecodableBody]]:
    """Every inline version's body, or why it cannot be had, newest first: one pass over the
    chains (`vhs verify`). A version whose delta needs a later version that does not decode
    fails with that version's number (the root cause is reported once)."""
    successor: bytes | UndecodableBody | None = None
    for number, entry in reversed(versions):
        if entry.inline is None:
            successor = None
            continue
        if entry.codec in DELTAS and isinstance(successor, UndecodableBody):
            failed = successor
            successor = UndecodableBody(
                f"version {number} is stored against version {failed.version}: {failed}",
                failed.version,
            )
        else:
            try:
                successor = _decode(number, entry, successor=successor, dictionaries=dictionaries)
            except UndecodableBody as error:
                successor = error
        yield number, successor


def _decode(
    number: int,
    entry: Entry,
    *,
    successor: bytes | None,
    dictionaries: Dictionaries | None = None,
) -> bytes:
    """`entry`'s inline body (version `number`), given its successor's body for a delta and
    the way to the dictionary it names, if it names one."""
    if entry.inline is None:
        raise UndecodableBody(f"version {number} has no inline body", number)
    dictionary = None
    if entry.dictionary is not None:
        if dictionaries is None:
            raise UndecodableBody(
                f"version {number} is packed with dictionary {entry.dictionary}, and this "
                "reader has no way to the store's dictionaries",
                number,
            )
        try:
            dictionary = dictionaries(entry.dictionary)
        except IntegrityError as error:  # not in the bucket, or not what its id names
            raise UndecodableBody(
                f"version {number} is packed with dictionary {entry.dictionary}: {error}", number
            ) from None
    if entry.codec in DELTAS and successor is None:
        raise UndecodableBody(
            f"version {number} is stored against the version after it, which has no inline body",
            number,
        )
    return _inflated(
        "inline body",
        number,
        entry.inline,
        entry.codec,
        entry.size,
        entry.body_sha256,
        successor=successor,
        dictionary=dictionary,
    )


def _inflated(
    what: str,
    number: int,
    stored: bytes,
    codec: str | None,
    size: int,
    expected: str,
    *,
    successor: bytes | None = None,
    dictionary: Dictionary | None = None,
) -> bytes:
    """`stored` decompressed (`codec`, against `successor` for a delta, with `dictionary`)
    and checked against the sha256 `expected`; `what` of version `number` names it in the
    error."""
    try:
        data = decompress(stored, codec, size, successor=successor, dictionary=dictionary)
    except ValueError as error:
        raise UndecodableBody(
            f"version {number}'s {what} does not decode ({codec}): {error}", number
        ) from None
    actual = sha256_hex(data)
    if actual != expected:
        raise UndecodableBody(
            f"version {number}'s {what} has sha256 {actual} ({len(data)} bytes), "
            f"the entry says {expected} ({size} bytes)",
            number,
            actual,
        )
    return data
