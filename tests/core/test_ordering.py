"""The ordering rules' own pieces, checked directly (mutation testing found them unpinned:
docs/reliability.md, "Mutation testing")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vhs.errors import InvalidTimestamp
from vhs.index.conditions import CONDITION_FORMS, newer_and_different, newer_and_same, written
from vhs.ordering import TOMBSTONE_HASH, OrderKey, Outcome, classify
from vhs.timestamps import moment_text, parse_moment, parse_timestamp

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
T = "2026-11-25T12:00:00.000000Z"


def test_classify_names_a_delete_deleted_and_a_put_stored():
    put, delete = OrderKey.of(T, "a" * 64, None), OrderKey.of(T, TOMBSTONE_HASH, None)
    assert (classify(None, put), classify(None, delete)) == (Outcome.STORED, Outcome.DELETED)
    older = OrderKey.of("2026-01-01T00:00:00.000000Z", "b" * 64, None)
    assert (classify(older, put), classify(older, delete)) == (Outcome.STORED, Outcome.DELETED)
    assert (classify(put, older), classify(put, put)) == (Outcome.STALE, Outcome.UNCHANGED)


def test_a_timestamp_of_now_or_just_ahead_is_accepted_and_beyond_the_limit_refused():
    day = timedelta(days=1)
    for ahead in (timedelta(0), timedelta(hours=23)):
        assert parse_timestamp(NOW + ahead, now=NOW, max_future=day)
    assert parse_timestamp(NOW - 2 * day, now=NOW, max_future=day)
    with pytest.raises(InvalidTimestamp, match="more than 1 day in the future"):
        parse_timestamp(NOW + day + timedelta(seconds=1), now=NOW, max_future=day)


@pytest.mark.parametrize(
    ("limit", "words"),
    [
        (timedelta(days=2), "2 days"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(hours=36), "36 hours"),
        (timedelta(minutes=5), "5 minutes"),
        (timedelta(seconds=90), "90 seconds"),
    ],
)
def test_the_limit_is_named_in_the_reason(limit: timedelta, words: str):
    with pytest.raises(InvalidTimestamp) as raised:
        parse_timestamp(NOW + 3 * limit, now=NOW, max_future=limit)
    assert raised.value.reason.endswith(f"more than {words} in the future")


@pytest.mark.parametrize("value", [1700000000, True, None, b"2026-01-01T00:00:00Z"])
def test_a_value_of_another_type_is_refused_naming_its_type(value):
    with pytest.raises(InvalidTimestamp) as raised:
        parse_timestamp(value)  # type: ignore[arg-type]
    assert raised.value.reason.endswith(f"not {type(value).__name__}")
    assert raised.value.field == "updated_at"


@pytest.mark.parametrize(
    "moment, stored",
    [
        ("2026-11-22T10:00:00+01:00", "2026-11-22T09:00:00.000000Z"),
        # A leap second is the last moment of its minute's 59th, whatever its fraction.
        ("2026-12-31T23:59:60Z", "2026-12-31T23:59:59.999999Z"),
        ("2026-12-31T23:59:60.5+01:00", "2026-12-31T22:59:59.999999Z"),
        # Outside the stored years, once in UTC: before or after every version.
        ("1000-01-01T00:30:00+01:00", "0999-12-31T23:59:59.999999Z"),
        # The first stored year is stored, not clamped.
        ("1000-01-01T00:00:00Z", "1000-01-01T00:00:00.000000Z"),
        ("0001-01-01T00:00:00+01:00", "0999-12-31T23:59:59.999999Z"),
        ("0000-02-29T00:00:00Z", "0999-12-31T23:59:59.999999Z"),
        ("9999-12-31T23:00:00-05:00", "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_a_moment_is_any_rfc_3339_time_and_never_refused_for_its_range(
    moment: str, stored: str
) -> None:
    assert parse_moment(moment, field="as_of") == stored
    if stored.startswith(("0999", "9999")) or ":60" in moment:
        with pytest.raises(InvalidTimestamp):  # a timestamp to store is refused
            parse_timestamp(moment)


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        ("2026-11-22T10:00:00+01:00", "2026-11-22T09:00:00+00:00"),
        ("1000-01-01T00:00:00Z", "1000-01-01T00:00:00+00:00"),
        ("0999-06-01T00:00:00Z", "a moment before the year 1000 (before anything the store holds)"),
        ("9999-12-31T23:59:59.999999Z", "the end of the year 9999"),
    ],
)
def test_a_moment_is_shown_as_its_time_or_as_what_a_clamped_one_stands_for(
    moment: str, shown: str
) -> None:
    assert moment_text(parse_moment(moment, field="as_of")) == shown


@pytest.mark.parametrize("moment", ["0000-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "today"])
def test_a_moment_that_is_no_time_is_refused_naming_the_field_and_value(moment: str) -> None:
    with pytest.raises(InvalidTimestamp, match=f"as_of.*{moment}"):
        parse_moment(moment, field="as_of")


def _grouping_depth(condition: str) -> int:
    """How deep grouping parentheses nest (a function call's own do not count)."""
    depth, deepest, calls = 0, 0, []
    for index, char in enumerate(condition):
        if char == "(":
            call = index > 0 and (condition[index - 1].isalnum() or condition[index - 1] == "_")
            calls.append(call)
            depth += not call
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= not calls.pop()
    return deepest


@pytest.mark.parametrize("content_type", ["application/json", "image/png", "zzz/last"])
@pytest.mark.parametrize("content_hash", ["a" * 64, TOMBSTONE_HASH])
def test_the_ordering_conditions_nest_no_group_in_another(content_hash: str, content_type: str):
    # dynalite's parser backtracks on every nested group: one UpdateItem of the nested form of
    # these conditions took it 30 s. Written flat (an OR of ANDs), it takes milliseconds.
    incoming = OrderKey.of("2026-11-22T10:00:00.000000Z", content_hash, content_type)
    forms = list(CONDITION_FORMS.values())
    assert _grouping_depth(newer_and_different(incoming, forms)) == 1
    for form in forms:
        assert _grouping_depth(newer_and_same(incoming, form)) <= 1


def test_a_condition_is_written_as_an_or_of_parenthesised_ands_a_lone_atom_bare() -> None:
    assert written([("a = :a",), ("b = :b", "c = :c"), ("d = :d", "e = :e", "f = :f")]) == (
        "a = :a OR (b = :b AND c = :c) OR (d = :d AND e = :e AND f = :f)"
    )
