"""The ordering rules of VHS, in one place.

Every write (a put or a delete) carries an ordering key: its source timestamp `updated_at`,
then its content hash. The pair is a total order, so the state an id ends in never depends on
the order writes arrive in, on duplicates, or on concurrent writers:

* a write whose key is lower than the current one is **stale**;
* a write whose key equals the current one is **unchanged** (a duplicate);
* a higher key with the same content only moves `updated_at` forward (**unchanged**, no new
  version), so convergence does not depend on whether an earlier duplicate arrived first;
* a higher key with other content is **stored** as the next version.

A delete's hash is `TOMBSTONE_HASH`, which sorts above every hex digest: a delete at T wins
over a put at T, so puts that arrive late with `updated_at <= T` are stale.

The DynamoDB condition expressions that enforce these rules are built here too, so the rules
and their enforcement cannot drift apart.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .errors import InvalidTimestamp

# Sorts after every lowercase hex digest ("0"-"9", "a"-"f").
TOMBSTONE_HASH = "~"

# Timestamps are stored in one fixed-width UTC form, so that string order is time order.
_STORED_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_MIN_YEAR = 1000  # four-digit years keep the stored form fixed-width


class Outcome(enum.StrEnum):
    STORED = "stored"
    DELETED = "deleted"
    STALE = "stale"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, order=True)
class OrderKey:
    """(updated_at in stored form, content hash or TOMBSTONE_HASH)."""

    updated_at: str
    content_hash: str

    @property
    def is_delete(self) -> bool:
        return self.content_hash == TOMBSTONE_HASH


def parse_timestamp(
    value: datetime | str,
    *,
    field: str = "updated_at",
    now: datetime | None = None,
    max_future: timedelta | None = None,
) -> str:
    """Validate `value` and return it in the stored, fixed-width UTC form.

    Accepts a timezone-aware datetime or an RFC 3339 string. Naive datetimes, strings without
    an offset, other ISO 8601 forms, numbers and timestamps more than `max_future` ahead of now
    are refused: one far future timestamp would make every real update of that id stale for
    ever.
    """
    if isinstance(value, bool) or not isinstance(value, datetime | str):
        raise InvalidTimestamp(
            f"must be a timezone-aware datetime or an RFC 3339 string, not {type(value).__name__}",
            field,
        )
    if isinstance(value, str):
        dt = _parse_rfc3339(value, field)
    else:
        dt = value
        if dt.tzinfo is None or dt.utcoffset() is None:
            raise InvalidTimestamp("naive datetime: a timezone is required", field)
    try:
        dt = dt.astimezone(UTC)
    except OverflowError:
        # 9999-12-31T23:00:00-05:00 is after datetime.max once in UTC.
        raise InvalidTimestamp("is out of range once converted to UTC", field) from None
    if dt.year < _MIN_YEAR:
        raise InvalidTimestamp(f"year {dt.year} is before {_MIN_YEAR}", field)
    if max_future is not None:
        now = now or datetime.now(UTC)
        if dt > now + max_future:
            raise InvalidTimestamp(
                f"{dt.isoformat()} is more than {_describe(max_future)} in the future", field
            )
    return dt.strftime(_STORED_FORMAT)


# RFC 3339 section 5.6's date-time, and nothing else of ISO 8601 (no basic format, week or
# ordinal dates, missing seconds or hour-only offsets), which the shipped JSON Schema's
# "date-time" format refuses too. "T" and "Z" may be lower case (section 5.6), and a space may
# separate date and time (the note there; str(datetime) writes one). [0-9], not \d: \d would
# take other scripts' digits.
_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]"
    r"(?P<time>[0-9]{2}:[0-9]{2}:(?P<second>[0-9]{2}))(?P<fraction>\.[0-9]+)?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_DATE_ONLY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_NO_OFFSET = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9:.]+")
_MAX_TIMESTAMP_LENGTH = 64


def _parse_rfc3339(text: str, field: str) -> datetime:
    if len(text) > _MAX_TIMESTAMP_LENGTH:
        raise InvalidTimestamp(f"not an RFC 3339 timestamp: {len(text)} characters long", field)
    shown = repr(text)
    match = _RFC3339.fullmatch(text)
    if match is None:
        if _DATE_ONLY.fullmatch(text):
            raise InvalidTimestamp(f"a date without a time is not a timestamp: {shown}", field)
        if _NO_OFFSET.fullmatch(text):
            raise InvalidTimestamp(f"no UTC offset in {shown}: a timezone is required", field)
        raise InvalidTimestamp(
            f"not an RFC 3339 timestamp like 2026-11-22T10:00:00Z: {shown}", field
        )
    if match["second"] == "60":
        raise InvalidTimestamp(f"leap seconds are not supported: {shown}", field)
    # datetime takes at most microseconds; finer digits (Java's Instant writes nanoseconds)
    # are dropped, not rounded, so a time never moves into the next second.
    fraction = (match["fraction"] or "")[:7]
    offset = match["offset"].upper().replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(f"{match['date']}T{match['time']}{fraction}{offset}")
    except ValueError:
        raise InvalidTimestamp(f"not a valid date and time: {shown}", field) from None


def _describe(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{span.total_seconds():g} seconds"


def stored_to_datetime(stored: str) -> datetime:
    return datetime.strptime(stored, _STORED_FORMAT).replace(tzinfo=UTC)


def classify(current: OrderKey | None, incoming: OrderKey) -> Outcome:
    """What an incoming write means against the current state (None: no item yet)."""
    if current is None:
        return Outcome.DELETED if incoming.is_delete else Outcome.STORED
    if incoming < current:
        return Outcome.STALE
    if incoming == current or incoming.content_hash == current.content_hash:
        return Outcome.UNCHANGED
    return Outcome.DELETED if incoming.is_delete else Outcome.STORED


# --- Enforcement in DynamoDB ---------------------------------------------------------------
# The current entry is the single element of the list attribute `c` (see index.py). These
# expressions use the placeholders #c, #t, #h and the values :t, :h.

NEWER_AND_DIFFERENT = (
    "attribute_not_exists(#c) OR "
    "((#c[0].#t < :t OR (#c[0].#t = :t AND #c[0].#h < :h)) AND #c[0].#h <> :h)"
)
"""A new version may be written: nothing is current, or the incoming key is higher and the
content differs."""

NEWER_AND_SAME = "#c[0].#t < :t AND #c[0].#h = :h"
"""Only `updated_at` may move forward: same content, later timestamp."""
