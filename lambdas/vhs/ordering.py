"""The ordering rules of VHS, in one place.

Every write (a put or a delete) carries an ordering key: its source timestamp `updated_at`,
then its content hash, then its content type. The triple is a total order, so the state an id
ends in (its current entry, content type included) never depends on the order writes arrive
in, on duplicates, or on concurrent writers:

* a write whose key is lower than the current one is **stale**;
* a write whose key equals the current one is **unchanged** (a duplicate);
* a higher key with the same content (same hash and same content type) only moves
  `updated_at` forward (**unchanged**, no new version), so convergence does not depend on
  whether an earlier duplicate arrived first;
* a higher key with other content (another hash, or the same bytes under another content
  type) is **stored** as the next version.

A delete's hash is `TOMBSTONE_HASH`, which sorts above every hex digest: a delete at T wins
over a put at T, so puts that arrive late with `updated_at <= T` are stale.

The content type in the key is the one the item stores, with absence read as
`application/json` (the item's codec, vhs/index/codec.py, leaves `ct` out for JSON and for
deletes): a delete's is therefore `application/json` too, which only makes two deletes at one
time equal, as they should be.

The DynamoDB condition expressions that enforce these rules are in vhs/index/conditions.py,
which builds them from this module's key (`OrderKey`); timestamps are parsed into the stored
form the key compares in vhs/timestamps.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property

from .codec import JSON_CONTENT_TYPE

# Sorts after every lowercase hex digest ("0"-"9", "a"-"f").
TOMBSTONE_HASH = "~"
# What an absent content type means, in the item (see vhs.index.codec.stored_content_type) and
# so in the ordering key.
ABSENT_CONTENT_TYPE = JSON_CONTENT_TYPE


class Outcome(enum.StrEnum):
    STORED = "stored"
    DELETED = "deleted"
    STALE = "stale"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, order=True)
class OrderKey:
    """(updated_at in stored form, content hash or TOMBSTONE_HASH, content type).

    Compared field by field; strings compare by code point, which is the order of their UTF-8
    bytes and so DynamoDB's order too. Build it with `of`, which reads an absent content type
    (and a delete's) as ABSENT_CONTENT_TYPE, as the conditions below do."""

    updated_at: str
    content_hash: str
    content_type: str = ABSENT_CONTENT_TYPE

    @classmethod
    def of(cls, updated_at: str, content_hash: str, content_type: str | None) -> OrderKey:
        if content_hash == TOMBSTONE_HASH or not content_type:
            content_type = ABSENT_CONTENT_TYPE
        return cls(updated_at, content_hash, content_type)

    @cached_property
    def is_delete(self) -> bool:
        return self.content_hash == TOMBSTONE_HASH

    def same_content(self, other: OrderKey) -> bool:
        """The same bytes under the same content type: at most `updated_at` differs."""
        return (self.content_hash, self.content_type) == (other.content_hash, other.content_type)


def classify(current: OrderKey | None, incoming: OrderKey) -> Outcome:
    """What an incoming write means against the current state (None: no item yet)."""
    if current is None:
        return Outcome.DELETED if incoming.is_delete else Outcome.STORED
    if incoming < current:
        return Outcome.STALE
    if incoming.same_content(current):  # equal keys, or only a later updated_at
        return Outcome.UNCHANGED
    return Outcome.DELETED if incoming.is_delete else Outcome.STORED
