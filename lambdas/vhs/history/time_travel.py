"""Reads as of a moment: the version of a record that was current at a given time.

Every version carries two clocks (index/codec.py), and a read can be asked by either:

* `as_of`, the store's clock: when the store wrote each version (the entry's `written_at`).
  The answer is what a reader of the store would have seen at that moment. A version becomes
  current when it is written, so a version's time is the latest write time among it and the
  versions before it: a writer whose clock lagged cannot make a version current before the one
  it superseded. Write times are whole seconds (floored), so a version written during second S
  is already current at any moment of S; of versions written in the same second the later
  one (the higher number) is the answer.
* `source_as_of`, the source's clock: each version's `updated_at`. The answer is the version
  the source had dated latest at or before that moment, among those the store accepted (a
  stale write never became a version). A touch (the same content again, later) moves the
  current version's `updated_at` forward in place and the earlier date is not kept, so a moment
  between the two finds the version before it.

The read is one GetItem of the whole item (history included), then the body as any `get`
reads it. The answer is never a guess: a moment before the first version, or one whose
version retention, a purge or a delete's window has dropped, or one at which the record was
deleted, raises a RecordNotFound that says which (VersionNotRetained, RecordDeleted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from .. import keys
from ..errors import InvalidInput, RecordDeleted, RecordNotFound, VersionNotRetained
from ..model import Entry, Item, StoredVersion
from ..retention import Retention
from ..timestamps import moment_text, parse_moment, stored_to_datetime

# A moment: a timezone-aware datetime or an RFC 3339 string (timestamps.parse_moment).
When = datetime | str | None
WRITTEN = "as_of"  # the store's clock (`written_at`)
SOURCE = "source_as_of"  # the source's clock (`updated_at`)


class Reader(Protocol):
    """What of a store an as-of read uses (VersionedHybridStore has it)."""

    index: Any
    retention: Retention
    clock: Callable[[], float]


def moment_of(version: int | None, as_of: When, source_as_of: When) -> tuple[str, str]:
    """(the clock asked for, the moment in the stored timestamp form), validated. Raises
    InvalidInput (InvalidTimestamp) naming the argument."""
    if as_of is not None and source_as_of is not None:
        raise InvalidInput(SOURCE, "give as_of or source_as_of, not both")
    clock, value = (WRITTEN, as_of) if as_of is not None else (SOURCE, source_as_of)
    if version is not None:
        raise InvalidInput(clock, "give a version or a time, not both")
    return clock, parse_moment(value, field=clock)  # type: ignore[arg-type]


def locate_at(
    store: Reader, id: str, version: int | None, as_of: When, source_as_of: When
) -> StoredVersion:
    """The version of `id` current at `as_of` (store clock) or `source_as_of` (source clock),
    as `locate` finds a version: one read of the item, no body. Raises InvalidInput before any
    request, RecordNotFound for an unknown id, and the errors of `version_at`."""
    id = keys.validate_id(id)
    clock, moment = moment_of(version, as_of, source_as_of)
    item = store.index.read(id)
    if item is None:
        raise RecordNotFound(id)
    return version_at(item, store.retention.retained(item, store.clock()), clock, moment)


def version_at(
    item: Item, retained: Sequence[tuple[int, Entry]], clock: str, moment: str
) -> StoredVersion:
    """The version of `item` current at `moment` (stored timestamp form) by `clock`, among the
    `retained` versions (Retention.retained). Raises RecordNotFound when no version had been
    written by then, RecordDeleted when the version current then is a delete, and
    VersionNotRetained when that version is no longer kept."""
    found = _current_at(item.versions(), clock, moment)
    shown = moment_text(moment)
    if found is None:
        first, entry = retained[0]
        if first == 1:  # nothing precedes version 1: the record did not exist yet
            raise RecordNotFound(
                item.id, why=f"no version by {shown}: the first {_time_of(entry, clock)}"
            )
        raise VersionNotRetained(item.id, why=f"the version current at {shown} {_gone(retained)}")
    number, entry = found
    if number not in dict(retained):
        raise VersionNotRetained(
            item.id, why=f"version {number}, current at {shown}, {_gone(retained)}"
        )
    if entry.deleted:
        deleted_at = stored_to_datetime(entry.updated_at).isoformat()
        raise RecordDeleted(
            item.id,
            number,
            deleted_at,
            f"at {shown} it was deleted (version {number}, deleted at {deleted_at}, "
            f"written at {_written(entry)})",
        )
    return StoredVersion(item, number, entry, requested=number)


def _current_at(
    versions: Sequence[tuple[int, Entry]], clock: str, moment: str
) -> tuple[int, Entry] | None:
    """The last version whose time (the latest of its own and its predecessors') is at or
    before `moment`; None when even the first held version is later."""
    # Ordered as times, never as the strings they are stored as: a string that is not a time
    # raises (index/codec.py refuses such an item as it is read) rather than sorting anywhere.
    limit = stored_to_datetime(moment)
    found, latest = None, None
    for number, entry in versions:
        own = (
            datetime.fromtimestamp(entry.written_at, UTC)
            if clock == WRITTEN
            else stored_to_datetime(entry.updated_at)
        )
        latest = own if latest is None else max(latest, own)
        if latest > limit:
            break
        found = (number, entry)
    return found


def _time_of(entry: Entry, clock: str) -> str:
    if clock == WRITTEN:
        return f"was written at {_written(entry)}"
    return f"is dated {stored_to_datetime(entry.updated_at).isoformat()} by its source"


def _written(entry: Entry) -> str:
    return datetime.fromtimestamp(entry.written_at, UTC).isoformat()


def _gone(retained: Sequence[tuple[int, Entry]]) -> str:
    """Why a version before the first retained one is gone."""
    first, entry = retained[0]
    if entry.deleted and entry.purge:
        return f"is not retained: the delete of version {first} purged the versions before it"
    return f"is not retained: the store keeps versions {first} to {retained[-1][0]}"
