"""The UpdateItem requests of the index's writes (table.py sends them and settles their answers):
each a pure function of the entry to write and what the writer knows, with no I/O.

* `new_version`: a blind write. The update moves `c` into `p` (server-side) and sets the new
  `c`, admitted only if it is newer and different (conditions.py).
* `replace`: a write planned from the item as read. The history is the caller's (deltas,
  retention's drops), measured to fit codec.ITEM_BUDGET, and the condition also requires the
  item to be still as read.
* `touch`: the same content with a later timestamp moves `updated_at` forward, nothing else.

A write that points at S3 objects also carries, for each, the writer's half of the garbage
collector's protocol (docs/gc.md): the object's `gc:<sha256>` absent, or condemned only
before its upload began (`guarded`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .. import ordering
from ..errors import PartsNotHeld
from ..model import Entry, Item
from ..ordering import OrderKey
from . import conditions
from .codec import (
    CONDEMNED_BODIES,
    CONDEMNED_UNTIL,
    CONTENT_HASH,
    CONTENT_TYPE,
    CURRENT,
    DROPPED,
    HISTORY,
    ID,
    PURGE,
    UPDATED_AT,
    VERSION,
    WRITER,
    condemned_name,
    entries_to_dynamo,
    entry_to_dynamo,
    item_from_dynamo,
    key_values,
)
from .conditions import CONDITION_FORMS
from .decode import Read, read
from .layouts import Layout
from .size import fit_written

# The attribute names the requests use, by placeholder.
NAMES = {
    "#c": CURRENT,
    "#p": HISTORY,
    "#v": VERSION,
    "#t": UPDATED_AT,
    "#h": CONTENT_HASH,
    "#ct": CONTENT_TYPE,
    "#k": WRITER,
    "#x": PURGE,
    "#dx": DROPPED,
}

# A write's condition reads the current entry in whichever layout it is stored (layouts.py).
_FORMS = [CONDITION_FORMS[layout] for layout in Layout]

# The writer's half of the garbage collector's protocol (docs/gc.md).
NOT_CONDEMNED_SINCE_UPLOAD = (
    "(attribute_not_exists(#gd) OR #gd < :uploaded OR NOT contains(#gs, :gh))"
)

# Given the item a write replaces, the history it holds after the write (DynamoIndex.put_planned).
HistoryPlan = Callable[[Item], Sequence[Entry]]


class Update(NamedTuple):
    """One conditional UpdateItem: its expressions, values, the placeholders of NAMES it
    uses, and any other names (the collector's attributes)."""

    update: str
    condition: str
    values: dict[str, Any]
    names: set[str]
    extra_names: dict[str, str]


def new_version(
    entry: Entry, keep_history: bool, guards: Mapping[str, float], layout: Layout
) -> Update:
    """Make `entry` current (written in `layout`), the current entry appended to the history
    as it is, in its own layout (dropped with it, without `keep_history`), if ordering admits
    it."""
    if keep_history:
        update = (
            "SET #p = list_append(if_not_exists(#p, :empty), if_not_exists(#c, :empty)), "
            "#c = :c ADD #v :one"
        )
    else:
        update = "SET #c = :c REMOVE #p ADD #v :one"
    key = entry.order_key
    (current,) = entries_to_dynamo([entry], layout)
    values, names = _entry_values(current, key)
    if keep_history:
        values[":empty"] = {"L": []}
    condition = f"({conditions.newer_and_different(key, _FORMS)})"
    return _guarded(update, condition, values, names, guards)


def replace(
    id: str,
    entry: Entry,
    basis: dict,
    history: HistoryPlan,
    guards: Mapping[str, float],
    layout: Layout,
) -> Update:
    """Write `entry` as the next version of the item `basis`, with the history `history`
    gives for it, the whole item in `layout`, only if the item is still as `basis` holds it.
    Raises ItemTooLarge when the entry alone does not fit the item budget."""
    return replace_read(id, entry, read(basis), history, guards, layout)


def replace_read(
    id: str,
    entry: Entry,
    basis: Read,
    history: HistoryPlan,
    guards: Mapping[str, float],
    layout: Layout,
) -> Update:
    """`replace`, against the item as the writer read it, decoded once (decode.Read). The
    entry and the history it plans are laid out once, measured as laid out (the oldest history
    goes first while the item would outgrow its budget: its bodies become orphans for the
    collector, as retention's drops do), and written as laid out."""
    seen = basis.item
    key = entry.order_key
    planned = history(seen) if seen is not None else ()
    current, *held = entries_to_dynamo([entry, *planned], layout)
    version = seen.version + 1 if seen is not None else 1
    # Raises ItemTooLarge if the entry alone is too big.
    held = held[fit_written(id, version, current, held) :]
    values, names = _entry_values(current, key)
    if seen is None:
        update, unchanged = "SET #c = :c ADD #v :one", "attribute_not_exists(#c)"
        names.discard("#p")
    else:
        if held:
            update = "SET #c = :c, #p = :p ADD #v :one"
            values[":p"] = {"L": held}
        else:
            update = "SET #c = :c REMOVE #p ADD #v :one"
        unchanged = _as_read(basis.raw, seen, values, names)
    condition = f"({conditions.newer_and_different(key, _FORMS)}) AND {unchanged}"
    return _guarded(update, condition, values, names, guards)


def rewrite(basis: dict, layout: Layout) -> Update:
    """The item `basis` as it is, its entries laid out anew in `layout` (`vhs migrate`), only
    if it is still as read: nothing else changes, not even `v`, so the change feed sees no
    new version."""
    seen = item_from_dynamo(basis)
    if seen is None:
        raise ValueError("only an item with entries can be laid out anew")
    values: dict[str, Any] = {":c": {"L": [entry_to_dynamo(seen.current, layout)]}}
    names = {"#c", "#p", "#v", "#t"}
    held = [entry_to_dynamo(e, layout) for e in seen.history]
    update = "SET #c = :c, #p = :p" if held else "SET #c = :c"
    if held:
        values[":p"] = {"L": held}
    return Update(update, _as_read(basis, seen, values, names), values, names, {})


def _as_read(basis: dict, seen: Item, values: dict[str, Any], names: set[str]) -> str:
    """A condition that the item is still as `basis` (`seen`, parsed) holds it, with the
    values and names it adds: what a write planned from a read of it requires."""
    # As read: the same version (writes), the same current updated_at (touches), the
    # same number of earlier entries (trims, purges) and purge flag (purges).
    unchanged = "#v = :seen_v AND #c[0].#t = :seen_t"
    values[":seen_v"] = {"N": str(seen.version)}
    values[":seen_t"] = basis[CURRENT]["L"][0]["M"][UPDATED_AT]  # as stored, either layout
    if HISTORY in basis:
        # A purge may have removed `p` since the read, leaving `v` as it was: say what
        # a missing `p` means rather than leave size() of it to the engine (moto
        # raises a ValueError, dynalite reads false).
        unchanged += " AND attribute_exists(#p) AND size(#p) = :seen_held"
        values[":seen_held"] = {"N": str(len(basis[HISTORY]["L"]))}
    else:
        unchanged += " AND attribute_not_exists(#p)"
    deleted = seen.current.deleted
    if seen.current.purge:
        names.add("#x")
        unchanged += " AND #c[0].#x = :true"
        values[":true"] = {"BOOL": True}
    elif deleted:
        names.add("#x")
        unchanged += " AND attribute_not_exists(#c[0].#x)"
    if deleted:
        # The collector flags a delete whose history it collected without changing
        # `v`: a history planned from an unflagged read must not drop the flag.
        names.add("#dx")
        if seen.current.dropped:
            unchanged += " AND #c[0].#dx = :true"
            values[":true"] = {"BOOL": True}
        else:
            unchanged += " AND attribute_not_exists(#c[0].#dx)"
    return unchanged


def touch(entry: Entry, stored: Layout) -> Update:
    """Move the current entry's `updated_at` forward to `entry`'s, and nothing else. Its
    content is `entry`'s already (the condition requires the same hash and content type), and
    its writer token stays that version's writer's, so that writer still recognises its own
    write if its response was lost and it retries after the touch. The entry stays in the
    layout it is `stored` in (the condition requires that too), its time written so."""
    incoming, form = entry.order_key, CONDITION_FORMS[stored]
    values = key_values(incoming, [stored])
    values.pop(form.binary or "", None)  # only an order comparison of hashes names it
    return Update(
        f"SET #c[0].#t = {form.t}",
        conditions.newer_and_same(incoming, form),
        values,
        {"#c", "#t", "#h", "#ct"},
        {},
    )


def purge() -> Update:
    """Mark the current delete as a purge and drop the whole history, if the current entry
    is a delete (idempotent)."""
    return Update(
        "SET #c[0].#x = :true REMOVE #p",
        "#c[0].#h = :tomb",
        {":true": {"BOOL": True}, ":tomb": {"S": ordering.TOMBSTONE_HASH}},
        {"#c", "#p", "#h", "#x"},
        {},
    )


def with_reused(
    guards: Mapping[str, float], reuse: frozenset[str], basis: Read, skew: float
) -> Mapping[str, float]:
    """`guards`, plus the objects a write reuses from the current entry of `basis` (the item
    it is made against), guarded since that entry was written (less `skew`). Raises
    PartsNotHeld when that entry does not reference them all: they must be uploaded."""
    if not reuse:
        return guards
    item = basis.item
    held = item.current.s3_objects() if item is not None else {}
    missing = frozenset(h for h in reuse if h not in held)
    if missing:
        raise PartsNotHeld(basis.raw, missing)
    since = item.current.written_at - skew  # type: ignore[union-attr]
    return {**{h: since for h in reuse}, **guards}


class Guarded(NamedTuple):
    """One conditional UpdateItem that returns nothing (DynamoIndex._guarded_update)."""

    update: str
    condition: str
    names: dict[str, str]
    values: dict[str, Any]


def condemnation(
    content_hashes: Iterable[str],
    deadline: float,
    seen_version: int | None,
    *,
    standing: float | None,
    drop_history: bool,
) -> Guarded | None:
    """The collector's condemnation of `content_hashes` until `deadline` (DynamoIndex.condemn
    says when it is admitted), or None when there is nothing to add to the standing one."""
    names = {"#gd": CONDEMNED_UNTIL}
    values: dict[str, Any] = {":gd": {"N": repr(deadline)}}
    condemned = sorted({condemned_name(h) for h in content_hashes})
    if seen_version is None:
        unchanged = "attribute_not_exists(#v)"
    else:
        unchanged, values[":v"] = "#v = :v", {"N": str(seen_version)}
    names["#v"] = VERSION
    # Every form is idempotent, so an SDK retry after a lost response succeeds as the
    # first attempt did: the deadline is set only where it was the one seen, or is this one.
    if standing is None:
        update, seen = "SET #gd = :gd", "(attribute_not_exists(#gd) OR #gd = :gd)"
    elif standing == deadline:
        update, seen = "", "#gd = :gd"
    else:
        if deadline < standing:
            raise ValueError("a condemnation's deadline never moves earlier")
        update, seen = "SET #gd = :gd", "(#gd = :standing OR #gd = :gd)"
        values[":standing"] = {"N": repr(standing)}
    if drop_history and seen_version is not None:
        update += ", #c[0].#dx = :true" if update else "SET #c[0].#dx = :true"
        names.update({"#c": CURRENT, "#dx": DROPPED})
        values[":true"] = {"BOOL": True}
    if condemned:
        update += " ADD #gs :gs"
        values[":gs"] = {"SS": condemned}
        names["#gs"] = CONDEMNED_BODIES
    if not update:
        return None
    return Guarded(update.strip(), f"{unchanged} AND {seen}", names, values)


def clear_condemnation(deadline: float) -> Guarded:
    """Remove the condemnation at `deadline`, if it is still the one the collector saw."""
    return Guarded(
        "REMOVE #gd, #gs",
        # A retry finds it gone: still cleared. attribute_exists: never create an item.
        "attribute_exists(#id) AND (attribute_not_exists(#gd) OR #gd = :gd)",
        {"#id": ID, "#gd": CONDEMNED_UNTIL, "#gs": CONDEMNED_BODIES},
        {":gd": {"N": repr(deadline)}},
    )


def trim(version: int, held: Sequence[Mapping[str, Any]], count: int) -> Guarded:
    """Drop the `count` oldest of the history entries `held` (as the item holds them), if the
    item is still at `version` with as many entries (so that a resent request is a no-op).

    The history left is written whole (`SET #p = :p`), not removed path by path: one
    `REMOVE #p[i]` a dropped entry made the expression grow with retention, past DynamoDB's
    4 KB at a few hundred entries (measured in tests/harness/vhs_testing/expression_limits.py);
    the list's entries are values, which do not count. The write costs the same (DynamoDB
    bills the item's size either way). The entries are written as read, each in its own
    layout; the condition holds only while no write, trim or purge has changed the history's
    length or the version."""
    kept = list(held[count:])
    return Guarded(
        "SET #p = :p" if kept else "REMOVE #p",
        # attribute_exists first: a purge of a deleted id removes `p` and leaves `v`, and
        # moto raises on size() of a missing attribute rather than refusing the write.
        "#v = :v AND attribute_exists(#p) AND size(#p) = :held",
        {"#p": HISTORY, "#v": VERSION},
        {":v": {"N": str(version)}, ":held": {"N": str(len(held))}}
        | ({":p": {"L": kept}} if kept else {}),
    )


def _entry_values(current: dict[str, Any], key: OrderKey) -> tuple[dict[str, Any], set[str]]:
    """The values and names every write of a new current entry uses: the entry (`current`, as
    laid out), the version increment and the ordering condition's values (for its `key`)."""
    values: dict[str, Any] = {
        ":c": {"L": [current]},
        ":one": {"N": "1"},
        **key_values(key, Layout),
    }
    return values, {"#c", "#p", "#v", "#t", "#h", "#ct"}


def _guarded(
    update: str,
    condition: str,
    values: dict[str, Any],
    names: set[str],
    guards: Mapping[str, float],
) -> Update:
    """The update with `condition` and, for each S3 object the write points at anew (sha256 →
    when its upload began), the collector's half of its protocol, with the values it needs.
    One object (a body) keeps the placeholders it always had."""
    if not guards:
        return Update(update, condition, values, names, {})
    clauses = []
    for number, (content_hash, since) in enumerate(sorted(guards.items())):
        suffix = "" if number == 0 else str(number)
        values[f":uploaded{suffix}"] = {"N": repr(since)}
        values[f":gh{suffix}"] = {"S": condemned_name(content_hash)}
        clauses.append(
            NOT_CONDEMNED_SINCE_UPLOAD.replace(":uploaded", f":uploaded{suffix}").replace(
                ":gh", f":gh{suffix}"
            )
        )
    return Update(
        update,
        " AND ".join([condition, *clauses]),
        values,
        names,
        {"#gd": CONDEMNED_UNTIL, "#gs": CONDEMNED_BODIES},
    )
