"""The DynamoDB condition expressions that enforce the ordering rule (vhs/ordering.py).

The rule and its enforcement are built from the one key (`OrderKey`), so they cannot drift
apart. The item stores a key in one of two layouts (layouts.py): each expression takes the
forms (`StoredForm`) it compares in.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ..ordering import ABSENT_CONTENT_TYPE, OrderKey
from .layouts import Layout

# The current entry is the single element of the list attribute `c` (see codec.py). These
# expressions use the placeholders #c, #t, #h, #ct, the value :ct, and for each StoredForm
# they compare in, its own placeholders (codec.key_values gives them all: every expression
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


# How each layout stores the current entry's key, for the ordering conditions: a check that
# the entry is stored so (attribute_type), and the placeholders of the incoming key's
# `updated_at` and hash typed as it stores them. Their values: codec.key_values.
CONDITION_FORMS = {
    Layout.COMPACT: StoredForm("attribute_type(#c[0].#t, :N)", ":t", ":h", binary=":B"),
    Layout.TEXT: StoredForm("attribute_type(#c[0].#t, :S)", ":tx", ":hx"),
}
TYPE_NAMES = {
    Layout.COMPACT: {":N": {"S": "N"}, ":B": {"S": "B"}},
    Layout.TEXT: {":S": {"S": "S"}},
}

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
