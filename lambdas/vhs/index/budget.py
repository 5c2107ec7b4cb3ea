"""What a store's configuration lets one item hold, checked when the store is made.

DynamoDB refuses an item over 400 KB; a write may make at most codec.ITEM_BUDGET of it (the
rest is the collector's). The most entries an item holds between trims (retention's
`max_held`, and the current one), each as large as an entry without parts can be written by
a store so configured, plus the item's own overhead at its largest (the longest id, the
highest version), must fit that budget, or the configuration is refused. Each entry's share of
the budget is what an entry with parts may take (write_path.entry_with_parts). Every write also
measures the item it makes (size.fit_written, size.fit_stored): this check is for the
configuration, so that the common case never comes near the limit.
"""

from __future__ import annotations

import dataclasses
import secrets

from .. import keys
from ..bodies.packing import CODECS, DICTIONARY_ID_BYTES, ZSTD
from ..codec import MAX_CONTENT_TYPE_LENGTH
from ..errors import ConfigurationError
from ..model import Entry
from ..retention import Retention
from ..timestamps import parse_timestamp
from .codec import ITEM_BUDGET
from .size import held_size, written_size

# The longest id by DynamoDB's count (UTF-8: up to 4 bytes a code point) and the highest
# version the check allows for: the item's own overhead at its largest.
LONGEST_ID = "\U0010ffff" * keys.MAX_ID_LENGTH
HIGHEST_VERSION = 10**20 - 1


def largest_entry(inline_threshold: int, max_body_size: int) -> Entry:
    """The largest entry without parts a store so configured writes, by DynamoDB's rules: a
    put of the longest content type, the largest inline body and size, and the larger of the
    longest codec name and a zstd body with the id of its dictionary (a delete has neither
    body nor content type, and its flags are smaller)."""
    entry = Entry(
        updated_at=parse_timestamp("9999-12-31T23:59:59.999999Z", max_future=None),
        content_hash="f" * 64,
        size=max_body_size,
        written_at=10**10 - 1,
        token=secrets.token_urlsafe(9),
        content_type="x" * MAX_CONTENT_TYPE_LENGTH,
        inline=bytes(inline_threshold),
        codec=max(CODECS, key=len),
    )
    with_dictionary = dataclasses.replace(
        entry, codec=ZSTD, dictionary="0" * 2 * DICTIONARY_ID_BYTES
    )
    return max(entry, with_dictionary, key=held_size)


def entry_budget(retention: Retention, inline_threshold: int, max_body_size: int) -> int:
    """What one held entry may take of an item. Raises ConfigurationError when the most
    entries `retention` holds, each at its largest, could outgrow ITEM_BUDGET."""
    held = retention.max_held + 1
    overhead = written_size(LONGEST_ID, HIGHEST_VERSION, held)
    largest = held_size(largest_entry(inline_threshold, max_body_size))
    if overhead + held * largest > ITEM_BUDGET:
        raise ConfigurationError(
            f"{held} versions of up to {largest} bytes each (an inline body of up to "
            f"{inline_threshold} bytes, a {MAX_CONTENT_TYPE_LENGTH}-character content type) "
            f"could outgrow the {ITEM_BUDGET} bytes a write may take of a DynamoDB item: "
            "lower retention.versions or inline_threshold"
        )
    return (ITEM_BUDGET - overhead) // held
