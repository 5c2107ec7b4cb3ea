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
`application/json` (item.py leaves `ct` out for JSON and for deletes): a delete's is therefore
`application/json` too, which only makes two deletes at one time equal, as they should be.

The DynamoDB condition expressions that enforce these rules are built here too, so the rules
and their enforcement cannot drift apart. The item stores a key in one of two layouts
(layouts.py): each expression takes the forms (`StoredForm`) it compares in.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .codec import JSON_CONTENT_TYPE
from .errors import InvalidTimestamp

# Sorts after every lowercase hex digest ("0"-"9", "a"-"f").
TOMBSTONE_HASH = "~"
# What an absent content type means, in the item (see item.stored_content_type) and so in the
# ordering key.
ABSENT_CONTENT_TYPE = JSON_CONTENT_TYPE

# Timestamps are stored in one fixed-width UTC form, so that string order is time order.
_STORED_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_MIN_YEAR = 1000  # four-digit years keep the stored form fixed-width
# Moments before and after every stored timestamp (the stored form sorts as time does), each
# one a time stored_to_datetime reads back.
_MIN_MOMENT = f"{_MIN_YEAR - 1:04d}-12-31T23:59:59.999999Z"
_MAX_MOMENT = "9999-12-31T23:59:59.999999Z"


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

    @property
    def is_delete(self) -> bool:
        return self.content_hash == TOMBSTONE_HASH

    def same_content(self, other: OrderKey) -> bool:
        """The same bytes under the same content type: at most `updated_at` differs."""
        return (self.content_hash, self.content_type) == (other.content_hash, other.content_type)


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
    return dt.strftime(_STORED_FORMAT)


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
    return dt.strftime(_STORED_FORMAT)


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
    return datetime.strptime(stored, _STORED_FORMAT).replace(tzinfo=UTC)


def moment_text(moment: str) -> str:
    """A moment (parse_moment's stored form) as a message shows it: RFC 3339, or for a
    moment before the year 1000 or past 9999, which parse_moment clamps to the first or last
    it can hold, what it stands for rather than the clamped time."""
    if moment == _MIN_MOMENT:
        return f"a moment before the year {_MIN_YEAR} (before anything the store holds)"
    if moment == _MAX_MOMENT:
        return "the end of the year 9999"
    return stored_to_datetime(moment).isoformat()


def classify(current: OrderKey | None, incoming: OrderKey) -> Outcome:
    """What an incoming write means against the current state (None: no item yet)."""
    if current is None:
        return Outcome.DELETED if incoming.is_delete else Outcome.STORED
    if incoming < current:
        return Outcome.STALE
    if incoming.same_content(current):  # equal keys, or only a later updated_at
        return Outcome.UNCHANGED
    return Outcome.DELETED if incoming.is_delete else Outcome.STORED


# --- Enforcement in DynamoDB ---------------------------------------------------------------
# The current entry is the single element of the list attribute `c` (see index.py). These
# expressions use the placeholders #c, #t, #h, #ct, the value :ct, and for each StoredForm
# they compare in, its own placeholders (layouts.key_values gives them all: every expression
# uses all of them, as DynamoDB requires).
#
# The stored content type is absent for ABSENT_CONTENT_TYPE, and a comparison with an absent
# attribute is false, so the content type's part of each expression is chosen here, for the
# incoming key, between the forms below: which of them absence satisfies is known before the
# request is sent. Every form names `attribute_exists`/`attribute_not_exists` explicitly
# rather than leaning on how an engine compares a missing attribute.

_CT = "#c[0].#ct"


@dataclass(frozen=True)
class StoredForm:
    """How one item layout stores the current entry's key: `guard`, a condition that holds
    only for an entry stored so, and the placeholders of the incoming `updated_at` and hash
    typed as it stores them. Each order comparison is made only between values of one type
    (moto raises on two, where DynamoDB reads false; = and <> are defined on any two).

    `binary`: the layout stores a put's hash as bytes and a delete's TOMBSTONE_HASH as a
    string, and this placeholder's value is the type name "B". A tombstone sorts after every
    digest in either form, so "the stored hash is lower" is, for an incoming delete, "the
    stored hash is binary" (a put's), and for an incoming put, a binary one lower than it."""

    guard: str
    t: str
    h: str
    binary: str | None = None

    def hash_is_lower(self, incoming: OrderKey) -> Dnf:
        if self.binary is None:
            return [(f"#c[0].#h < {self.h}",)]
        if incoming.is_delete:
            return [(f"attribute_type(#c[0].#h, {self.binary})",)]
        return [(f"attribute_type(#c[0].#h, {self.binary})", f"#c[0].#h < {self.h}")]


# A condition in disjunctive normal form: OR of ANDs of comparisons. Written out so, with one
# level of parentheses: dynalite's expression parser backtracks on every nested level (one
# UpdateItem of the nested form took it 30 s); DynamoDB reads either alike.
Dnf = list[tuple[str, ...]]


def _all(*parts: Dnf) -> Dnf:
    """The conjunction of `parts`, multiplied out."""
    return [tuple(a for term in terms for a in term) for terms in itertools.product(*parts)]


def _one(atom: str) -> Dnf:
    return [(atom,)]


def written(condition: Dnf) -> str:
    return " OR ".join(
        term[0] if len(term) == 1 else f"({' AND '.join(term)})" for term in condition
    )


def _stored_type_is_lower(incoming: OrderKey) -> Dnf:
    """The stored content type (absent: ABSENT_CONTENT_TYPE) sorts below the incoming one."""
    if incoming.content_type > ABSENT_CONTENT_TYPE:
        return [(f"attribute_not_exists({_CT})",), (f"{_CT} < :ct",)]
    return [(f"attribute_exists({_CT})", f"{_CT} < :ct")]


def _stored_type_is_same(incoming: OrderKey) -> Dnf:
    if incoming.content_type == ABSENT_CONTENT_TYPE:
        return [(f"attribute_not_exists({_CT})",), (f"{_CT} = :ct",)]
    return [(f"attribute_exists({_CT})", f"{_CT} = :ct")]


def _stored_type_differs(incoming: OrderKey) -> Dnf:
    if incoming.content_type == ABSENT_CONTENT_TYPE:
        return [(f"attribute_exists({_CT})", f"{_CT} <> :ct")]
    return [(f"attribute_not_exists({_CT})",), (f"{_CT} <> :ct",)]


def newer_and_different(incoming: OrderKey, forms: Sequence[StoredForm]) -> str:
    """A new version may be written: nothing is current, or the incoming key is higher and the
    content differs. The three ways: a later timestamp with another hash or content type; the
    same timestamp and a higher hash; the same timestamp and hash and a higher content type.
    The current entry may be stored in any of `forms`."""
    condition = _one("attribute_not_exists(#c)")
    for form in forms:
        t, h = form.t, form.h
        later = _all(
            _one(f"#c[0].#t < {t}"), _one(f"#c[0].#h <> {h}") + _stored_type_differs(incoming)
        )
        same_time = _all(
            _one(f"#c[0].#t = {t}"),
            form.hash_is_lower(incoming)
            + _all(_one(f"#c[0].#h = {h}"), _stored_type_is_lower(incoming)),
        )
        condition += _all(_one(form.guard), later + same_time)
    return written(condition)


def newer_and_same(incoming: OrderKey, form: StoredForm) -> str:
    """Only `updated_at` may move forward: the same content, a later timestamp, the current
    entry stored in `form`."""
    return written(
        _all(
            _one(form.guard),
            _one(f"#c[0].#t < {form.t}"),
            _one(f"#c[0].#h = {form.h}"),
            _stored_type_is_same(incoming),
        )
    )
