"""The DynamoDB item's attribute names, and the sizes a write and the collector may take of it
(the layout itself: codec.py's docstring; docs/design.md, "The item")."""

from __future__ import annotations

from ..shapes import TABLE

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
# (size.fit_written); one whose current entry alone would is refused (errors.ItemTooLarge).
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


def condemned_name(content_hash: str) -> str:
    """How `gcs` names a body."""
    return content_hash[:CONDEMNED_HASH_CHARS]
