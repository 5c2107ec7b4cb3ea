"""Timestamps: what a write's `updated_at` (and a read's moment) may be, and the one stored form
they take.

A write's timestamp is an RFC 3339 string or a timezone-aware datetime, stored in one
fixed-width UTC form (`stored_form`), so that string order is time order: the form the ordering
key (ordering.py) compares and the item's layouts (vhs/index/layouts.py) write.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidTimestamp

# Timestamps are stored in one fixed-width UTC form, so that string order is time order.
STORED_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_MIN_YEAR = 1000  # four-digit years keep the stored form fixed-width
# Moments before and after every stored timestamp (the stored form sorts as time does), each
# one a time stored_to_datetime reads back.
_MIN_MOMENT = f"{_MIN_YEAR - 1:04d}-12-31T23:59:59.999999Z"
_MAX_MOMENT = "9999-12-31T23:59:59.999999Z"


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
    dt = _aware(value, field)
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
    return stored_form(dt)


def stored_form(dt: datetime) -> str:
    """A UTC datetime (years 1000-9999) in the stored, fixed-width form."""
    return dt.strftime(STORED_FORMAT)


def parse_moment(value: datetime | str, *, field: str) -> str:
    """A moment to read as of, compared with stored timestamps: any RFC 3339 time (or aware
    datetime) `parse_timestamp` reads, in the stored form. Unlike a timestamp it is never
    stored, so nothing is refused for its range: a moment before the stored years is before
    every version, one past them after every version, and a leap second is the last moment of
    its minute's 59th."""
    match = isinstance(value, str) and _RFC3339.fullmatch(value)
    if match and match["second"] == "60":
        value = f"{value[: match.start('second')]}59.999999{value[match.start('offset') :]}"
    if match and value.startswith("0000"):
        # RFC 3339's year 0 (a leap year, as 2000 is), which datetime has no room for.
        try:
            _aware(f"2000{value[4:]}", field)
        except InvalidTimestamp:
            raise InvalidTimestamp(f"not a valid date and time: {value!r}", field) from None
        return _MIN_MOMENT
    dt = _aware(value, field)
    try:
        dt = dt.astimezone(UTC)
    except OverflowError:
        return _MIN_MOMENT if dt.year < _MIN_YEAR else _MAX_MOMENT
    if dt.year < _MIN_YEAR:
        return _MIN_MOMENT
    return dt.strftime(STORED_FORMAT)


def _aware(value: datetime | str, field: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, datetime | str):
        raise InvalidTimestamp(
            f"must be a timezone-aware datetime or an RFC 3339 string, not {type(value).__name__}",
            field,
        )
    if isinstance(value, str):
        return _parse_rfc3339(value, field)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidTimestamp("naive datetime: a timezone is required", field)
    return value


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
MAX_TIMESTAMP_LENGTH = 64


def _parse_rfc3339(text: str, field: str) -> datetime:
    if len(text) > MAX_TIMESTAMP_LENGTH:
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
    return datetime.strptime(stored, STORED_FORMAT).replace(tzinfo=UTC)


def moment_text(moment: str) -> str:
    """A moment (parse_moment's stored form) as a message shows it: RFC 3339, or for a
    moment before the year 1000 or past 9999, which parse_moment clamps to the first or last
    it can hold, what it stands for rather than the clamped time."""
    if moment == _MIN_MOMENT:
        return f"a moment before the year {_MIN_YEAR} (before anything the store holds)"
    if moment == _MAX_MOMENT:
        return "the end of the year 9999"
    return stored_to_datetime(moment).isoformat()
