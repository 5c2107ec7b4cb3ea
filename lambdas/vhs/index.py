"""The index: one DynamoDB item per record id, written with conditional updates.

The item's layout and its codec are in item.py.

A new version is one UpdateItem, with no read first: the condition (ordering.py) admits it
only if it is newer and different, the update moves `c` into `p`, sets the new `c` and adds 1
to `v`. DynamoDB evaluates every action against the item as it was before the update, so this
is atomic. When the condition fails, ReturnValuesOnConditionCheckFailure hands back the item,
which says whether the write was stale, a duplicate, only a newer timestamp, or our own earlier
attempt whose response was lost (the writer token finds it).

A write that points at an S3 body also requires that the garbage collector has not condemned
that body since the upload began: `gc:<sha256>` absent, or a deadline before the upload. This
is the writer's half of the collector's protocol (docs/gc.md); it costs no extra request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from . import ordering
from .aws import is_condition_failed
from .errors import ItemTooLarge, WriteConflict
from .item import (
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
    condemnation_of,
    condemned_name,
    entry_to_dynamo,
    fit_history,
    item_from_dynamo,
)
from .model import Entry, Item
from .ordering import Outcome
from .resources import TABLE

_NAMES = {
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
_MAX_ATTEMPTS = 8

# The writer's half of the garbage collector's protocol (docs/gc.md).
NOT_CONDEMNED_SINCE_UPLOAD = (
    "(attribute_not_exists(#gd) OR #gd < :uploaded OR NOT contains(#gs, :gh))"
)


class PartsNotHeld(Exception):
    """The item changed since the writer decided which parts it need not upload: its current
    entry no longer references `missing` in S3. The writer uploads them and writes against
    `basis` (the item as the refusal returned it)."""

    def __init__(self, basis: dict, missing: frozenset[str]) -> None:
        self.basis = basis
        self.missing = missing
        super().__init__(f"{len(missing)} objects are no longer referenced by the current entry")


class BodyCondemned(Exception):
    """The garbage collector condemned the body this write points at, after the upload began:
    it may delete the object until `deadline` (epoch seconds). The writer waits until then,
    uploads the body again, and retries."""

    def __init__(self, deadline: float, basis: dict | None = None) -> None:
        self.deadline = deadline
        self.basis = basis  # the item as the refusal returned it
        super().__init__(f"body condemned by the garbage collector until {deadline}")


@dataclass(frozen=True)
class WriteResult:
    outcome: Outcome
    version: int
    item: Item | None  # the item after a successful write, else as the failed condition saw it


# Given the item a write replaces, the history it holds after the write (DynamoIndex.write).
HistoryPlan = Callable[[Item], Sequence[Entry]]


def _find_own(item: Item, token: str) -> int | None:
    for version, entry in item.versions():
        if entry.token == token:
            return version
    return None


@dataclass(frozen=True)
class ScanPage:
    """One page of a (parallel) Scan of the table: raw items, and the key to start the next
    page after (None: the segment is done)."""

    items: list[dict[str, Any]]
    last_key: dict[str, Any] | None


def scan_pages(
    dynamodb: Any,
    table: str,
    *,
    segment: int = 0,
    total_segments: int = 1,
    consistent_reads: bool = False,
    page_size: int | None = None,
    start_key: Mapping[str, Any] | None = None,
) -> Iterator[ScanPage]:
    """The raw items of one segment of a parallel Scan, page by page, from after `start_key`.
    The one whole-table read in VHS (`vhs verify`, `vhs reindex`): eventually consistent
    unless `consistent_reads`, at most `page_size` items a page."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "Segment": segment,
        "TotalSegments": total_segments,
        "ConsistentRead": consistent_reads,
    }
    if page_size:
        kwargs["Limit"] = page_size
    if start_key:
        kwargs["ExclusiveStartKey"] = dict(start_key)
    while True:
        response = dynamodb.scan(**kwargs)
        last = response.get("LastEvaluatedKey")
        yield ScanPage(response.get("Items", []), last)
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last


class DynamoIndex:
    def __init__(self, dynamodb_client: Any, table: str, *, consistent_reads: bool = True):
        self.dynamodb = dynamodb_client
        self.table = table
        self.consistent_reads = consistent_reads

    def _key(self, id: str) -> dict[str, Any]:
        return {ID: {"S": id}}

    def read(self, id: str, *, current_only: bool = False) -> Item | None:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Key": self._key(id),
            "ConsistentRead": self.consistent_reads,
        }
        if current_only:
            kwargs["ProjectionExpression"] = "#id, #v, #c"
            kwargs["ExpressionAttributeNames"] = {
                "#id": ID,
                "#v": VERSION,
                "#c": CURRENT,
            }
        response = self.dynamodb.get_item(**kwargs)
        return item_from_dynamo(response.get("Item", {}))

    def read_raw_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The raw items of `ids`, markers and all, retrying unprocessed keys."""
        found: dict[str, dict[str, Any]] = {}
        pending = list(dict.fromkeys(ids))
        while pending:
            page, pending = pending[:100], pending[100:]
            request = {
                self.table: {
                    "Keys": [self._key(i) for i in page],
                    "ConsistentRead": self.consistent_reads,
                }
            }
            while request:
                response = self.dynamodb.batch_get_item(RequestItems=request)
                for raw in response.get("Responses", {}).get(self.table, []):
                    found[raw[ID]["S"]] = raw
                request = response.get("UnprocessedKeys") or {}
        return found

    # --- the garbage collector's half of its protocol (docs/gc.md) ----------------------------

    def condemn(
        self,
        id: str,
        content_hashes: Iterable[str],
        deadline: float,
        seen_version: int | None,
        *,
        standing: float | None = None,
        drop_history: bool = False,
    ) -> bool:
        """Condemn bodies of `id`: the collector deletes them before `deadline`. Only if the
        item has not changed since the collector read it (`seen_version`; None: it had no
        version), and its condemnation is still the one the collector saw: none (`standing`
        None: a new one, at `deadline`), or the one at `standing`, which the bodies join
        (`deadline == standing`: it never moves) or renew (`deadline` later: the bodies it
        named stay named, under the later deadline). `drop_history`: the collector found the
        current delete's earlier versions dropped (retention.py); the same write flags it, so
        that they stay dropped whatever is written next. False if the item changed."""
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
            return True  # nothing to add to the standing condemnation
        return self._guarded_update(id, update.strip(), f"{unchanged} AND {seen}", names, values)

    def condemnations_before(self, expired_before: float) -> Iterator[list[tuple[str, float]]]:
        """Pages of (id, deadline) of the condemnations whose deadline is before
        `expired_before`, from the sparse index of condemned items (resources.TABLE): only
        condemned items are read, so this costs nothing on a table without condemnations.
        The index is eventually consistent: clear each with `clear_condemnation`, whose
        condition rereads the item."""
        pages = self.dynamodb.get_paginator("scan").paginate(
            TableName=self.table,
            IndexName=TABLE.condemned_index,
            FilterExpression="#gd < :before",
            ExpressionAttributeNames={"#gd": CONDEMNED_UNTIL},
            ExpressionAttributeValues={":before": {"N": repr(expired_before)}},
        )
        for page in pages:
            yield [(raw[ID]["S"], float(raw[CONDEMNED_UNTIL]["N"])) for raw in page["Items"]]

    def clear_condemnation(self, id: str, deadline: float) -> bool:
        """Remove a condemnation, if it is still the one the collector saw."""
        return self._guarded_update(
            id,
            "REMOVE #gd, #gs",
            # A retry finds it gone: still cleared. attribute_exists: never create an item.
            "attribute_exists(#id) AND (attribute_not_exists(#gd) OR #gd = :gd)",
            {"#id": ID, "#gd": CONDEMNED_UNTIL, "#gs": CONDEMNED_BODIES},
            {":gd": {"N": repr(deadline)}},
        )

    def _guarded_update(
        self, id: str, update: str, condition: str, names: dict[str, str], values: dict
    ) -> bool:
        try:
            self.dynamodb.update_item(
                TableName=self.table,
                Key=self._key(id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            return True
        except ClientError as error:
            if is_condition_failed(error):
                return False
            raise

    def write(
        self,
        id: str,
        entry: Entry,
        *,
        keep_history: bool = True,
        uploaded_after: float | None = None,
        history: HistoryPlan | None = None,
        guards: Mapping[str, float] | None = None,
        basis: dict | None = None,
        reuse: frozenset[str] = frozenset(),
        reuse_skew: float = 0.0,
        consistent_basis: bool = False,
        fallback: HistoryPlan | None = None,
    ) -> WriteResult:
        """Make `entry` current if the ordering rules admit it.

        Without `history`, one request on the happy path: the update moves the current entry
        into the history as it is (server-side) and sets the new one. Such a blind write
        cannot measure the item before writing it, so it measures the item it gets back: past
        item.ITEM_BUDGET, the oldest history is trimmed at once (`_within_budget`); and if
        DynamoDB refuses the append for the item's size, the write is made as planned, with
        `fallback` as its history, against a strongly consistent read.

        Every planned write (with `history`) measures the item as it would be written by
        DynamoDB's size rules and leaves out the oldest history entries that do not fit
        item.ITEM_BUDGET (item.fit_history), so an id keeps taking writes whatever its
        history holds; raises ItemTooLarge (nothing written) if the new entry alone does not.

        With `history`, the caller decides what the history holds after the write (earlier
        inline bodies as deltas, expired entries dropped: vhs/deltas.py): given the item the
        write replaces, it returns the entries to keep, the superseded current entry last.
        The item is read first (eventually consistent: half a read unit), a write that cannot
        win is not written (stale: the current key only ever goes up; unchanged: the same
        key) and is answered from a strongly consistent read (the version current now, which
        the first read may not have seen yet), and the write is conditional on the item being
        as read. `consistent_basis`: the caller expects the write cannot win (it has seen a
        current key at or above it), so the first read is the strongly consistent one (one
        read unit, where the two reads would cost one and a half), or `basis` was read so.
        A stale read only fails that condition, and the item the failure returns is the next
        attempt's starting point, so correctness never rests on the read.

        `uploaded_after` (epoch seconds, already less the clock-skew allowance) is when the
        upload of an S3 body began; the write then also requires that the garbage collector
        has not condemned the body since. Raises BodyCondemned if it has. `guards` does the
        same for several objects (a version with parts): sha256 → when its upload began.

        `reuse` (with `history` and the item as read, `basis`) names S3 objects the entry
        points at that were not uploaded for it, because the current entry of `basis` already
        references them. The write then also requires the item to be as read (which `history`
        writes do anyway), and that the collector has not condemned them since that entry was
        written (`written_at` less `reuse_skew`). Raises PartsNotHeld when the item the write
        would be made against no longer references them.
        """
        guards = dict(guards or {})
        if uploaded_after is not None:
            guards[entry.body_sha256] = uploaded_after
        if basis is None and history is not None:
            basis = self._read_for_write(id, consistent=consistent_basis)
        for _ in range(_MAX_ATTEMPTS):
            write_guards = guards
            if basis is not None:
                settled, raw = self._settle(
                    id, entry, basis, guards, decided_by_read=True, current=consistent_basis
                )
                if settled is not None:
                    return settled
                write_guards = _with_reused(guards, reuse, raw, reuse_skew)
                ok, raw = self._replace(id, entry, raw, history, write_guards)  # type: ignore[arg-type]
            else:
                try:
                    ok, raw = self._new_version(id, entry, keep_history, guards)
                except ClientError as error:
                    if not (keep_history and fallback is not None and _item_too_large(error)):
                        raise
                    # The item has grown past what a blind append leaves room for: write it
                    # as planned against the item as it is, dropping its oldest history.
                    history, basis, consistent_basis = fallback, self._read_current(id), True
                    continue
                if ok and keep_history:
                    raw = self._within_budget(id, raw)
            item = item_from_dynamo(raw)
            if ok and item is not None:  # ALL_NEW: always the item, with its new version
                return WriteResult(_stored(entry), item.version, item)
            settled, raw = self._settle(id, entry, raw, write_guards)
            if settled is not None:
                return settled
            # The item changed between our attempts: decide again against its new state (as a
            # refused write returns it, or a strongly consistent read: current either way).
            basis = raw if history is not None else None
            consistent_basis = True
        raise WriteConflict(f"gave up writing {id!r} after {_MAX_ATTEMPTS} contended attempts")

    def _settle(
        self,
        id: str,
        entry: Entry,
        raw: dict,
        guards: Mapping[str, float],
        *,
        decided_by_read: bool = False,
        current: bool = True,
    ) -> tuple[WriteResult | None, dict]:
        """What the item `raw` (one that refused our write, or, `decided_by_read`, as read
        before writing) says about the write: a result, or None with the item to write
        against again (ordering admits the write: the item changed, or was only read).
        `current`: `raw` was read strongly consistent (a refusal's item always is)."""
        incoming = entry.order_key
        item = item_from_dynamo(raw)
        own = _find_own(item, entry.token) if item else None
        if own is not None:  # our earlier attempt succeeded; its response was lost
            return WriteResult(_stored(entry), own, item), raw
        verdict = ordering.classify(item.current.order_key if item else None, incoming)
        if item is None or verdict in (Outcome.STORED, Outcome.DELETED):
            # Ordering admits it, so (unless we only read) the collector's condition refused it.
            condemned = condemnation_of(raw)
            if (
                not decided_by_read
                and condemned
                and any(
                    condemned.covers(h) and condemned.deadline >= since
                    for h, since in guards.items()
                )
            ):
                raise BodyCondemned(condemned.deadline, raw)
            return None, raw
        current_key = item.current.order_key
        if not current and (verdict is Outcome.STALE or incoming == current_key):
            # The read was eventually consistent: stale or unchanged it surely is (the current
            # key only goes up), but the version it saw may be out of date. The result carries
            # the version current now, from a strongly consistent read (stale writes only).
            return self._settle(id, entry, self._read_current(id), guards)
        if verdict is Outcome.STALE or incoming == current_key:
            return WriteResult(verdict, item.version, item), raw
        # Same content, later timestamp: move it forward.
        ok, raw = self._touch(id, entry)
        touched = item_from_dynamo(raw)
        # A refused touch whose item already holds our key was our own touch, its
        # response lost (or an identical write's): the state is the one we asked for.
        if touched is not None and (ok or touched.current.order_key == incoming):
            return WriteResult(Outcome.UNCHANGED, touched.version, touched), raw
        return None, raw

    def _within_budget(self, id: str, raw: dict) -> dict:
        """The item `raw` a blind write returned, with its oldest history trimmed (one more
        conditional UpdateItem, only then) if it outgrew item.ITEM_BUDGET."""
        item = item_from_dynamo(raw)
        if item is None:
            return raw
        try:
            drop = fit_history(id, item.version, item.current, item.history)
        except ItemTooLarge:  # written already (DynamoDB took it): all the history goes
            drop = len(item.history)
        if drop and self.trim(id, item.version, len(item.history), drop):
            return {**raw, HISTORY: {"L": raw[HISTORY]["L"][drop:]}}
        return raw  # or a later writer trims: the item changed since

    def read_for_write(self, id: str, *, consistent: bool = False) -> dict:
        """The raw item, eventually consistent (half a read unit) unless `consistent`: a
        write's basis."""
        return self._read_for_write(id, consistent=consistent)

    def _read_current(self, id: str) -> dict:
        return self._read_for_write(id, consistent=True)

    def _read_for_write(self, id: str, *, consistent: bool = False) -> dict:
        response = self.dynamodb.get_item(
            TableName=self.table, Key=self._key(id), ConsistentRead=consistent
        )
        return response.get("Item", {})

    def _replace(
        self,
        id: str,
        entry: Entry,
        basis: dict,
        history: HistoryPlan,
        guards: Mapping[str, float],
    ) -> tuple[bool, dict]:
        """Write `entry` as the next version of the item `basis`, with the history `history`
        gives for it, only if the item is still as `basis` holds it."""
        seen = item_from_dynamo(basis)
        values: dict[str, Any] = {
            ":c": {"L": [entry_to_dynamo(entry)]},
            ":one": {"N": "1"},
            **ordering.condition_values(entry.order_key),
        }
        names = {"#c", "#p", "#v", "#t", "#h", "#ct"}
        if seen is None:
            fit_history(id, 1, entry, ())  # raises ItemTooLarge if the entry alone is too big
            update, unchanged = "SET #c = :c ADD #v :one", "attribute_not_exists(#c)"
            names.discard("#p")
        else:
            planned = history(seen)
            # Within the item budget, measured as written: the oldest history goes first (its
            # bodies become orphans for the collector, as retention's drops do).
            planned = planned[fit_history(id, seen.version + 1, entry, planned) :]
            held = [entry_to_dynamo(e) for e in planned]
            if held:
                update = "SET #c = :c, #p = :p ADD #v :one"
                values[":p"] = {"L": held}
            else:
                update = "SET #c = :c REMOVE #p ADD #v :one"
            # As read: the same version (writes), the same current updated_at (touches), the
            # same number of earlier entries (trims, purges) and purge flag (purges).
            unchanged = "#v = :seen_v AND #c[0].#t = :seen_t"
            values[":seen_v"] = {"N": str(seen.version)}
            values[":seen_t"] = {"S": seen.current.updated_at}
            if HISTORY in basis:
                # A purge may have removed `p` since the read, leaving `v` as it was: say what
                # a missing `p` means rather than leave size() of it to the engine (moto
                # raises a ValueError, dynalite reads false).
                unchanged += " AND attribute_exists(#p) AND size(#p) = :seen_held"
                values[":seen_held"] = {"N": str(len(basis[HISTORY]["L"]))}
            else:
                unchanged += " AND attribute_not_exists(#p)"
            if seen.current.purge:
                names.add("#x")
                unchanged += " AND #c[0].#x = :true"
                values[":true"] = {"BOOL": True}
            elif seen.current.deleted:
                names.add("#x")
                unchanged += " AND attribute_not_exists(#c[0].#x)"
            if seen.current.deleted:
                # The collector flags a delete whose history it collected without changing
                # `v`: a history planned from an unflagged read must not drop the flag.
                names.add("#dx")
                if seen.current.dropped:
                    unchanged += " AND #c[0].#dx = :true"
                    values[":true"] = {"BOOL": True}
                else:
                    unchanged += " AND attribute_not_exists(#c[0].#dx)"
        condition = f"({ordering.newer_and_different(entry.order_key)}) AND {unchanged}"
        condition, extra_names = _guarded(condition, values, guards)
        return self._conditional_update(id, update, condition, values, names, extra_names)

    def _new_version(
        self, id: str, entry: Entry, keep_history: bool, guards: Mapping[str, float]
    ) -> tuple[bool, dict]:
        if keep_history:
            update = (
                "SET #p = list_append(if_not_exists(#p, :empty), if_not_exists(#c, :empty)), "
                "#c = :c ADD #v :one"
            )
        else:
            update = "SET #c = :c REMOVE #p ADD #v :one"
        values: dict[str, Any] = {
            ":c": {"L": [entry_to_dynamo(entry)]},
            ":one": {"N": "1"},
            **ordering.condition_values(entry.order_key),
        }
        names = {"#c", "#p", "#v", "#t", "#h", "#ct"}
        if keep_history:
            values[":empty"] = {"L": []}
        condition = f"({ordering.newer_and_different(entry.order_key)})"
        condition, extra_names = _guarded(condition, values, guards)
        return self._conditional_update(id, update, condition, values, names, extra_names)

    def _touch(self, id: str, entry: Entry) -> tuple[bool, dict]:
        """Move the current entry's `updated_at` forward, and nothing else. Its content is
        ours already (the condition requires the same hash and content type), and its writer
        token stays that version's writer's, so that writer still recognises its own write if
        its response was lost and it retries after the touch."""
        incoming = entry.order_key
        return self._conditional_update(
            id,
            "SET #c[0].#t = :t",
            ordering.newer_and_same(incoming),
            ordering.condition_values(incoming),
            {"#c", "#t", "#h", "#ct"},
        )

    def _conditional_update(
        self,
        id: str,
        update: str,
        condition: str,
        values: dict,
        names: set[str],
        extra_names: dict[str, str] | None = None,
    ) -> tuple[bool, dict]:
        try:
            response = self.dynamodb.update_item(
                TableName=self.table,
                Key=self._key(id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={n: _NAMES[n] for n in names} | (extra_names or {}),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True, response["Attributes"]
        except ClientError as error:
            if not is_condition_failed(error):
                raise
            if "Item" in error.response:
                return False, error.response["Item"]
        # DynamoDB returns the item with every failed condition here (each can fail only on an
        # item that exists). Emulators without ReturnValuesOnConditionCheckFailure (dynalite)
        # return none: read it, strongly consistent, to learn what refused the write.
        return False, self._read_current(id)

    def purge(self, id: str) -> Item | None:
        """Mark the current delete of `id` as a purge and drop its whole history, if its
        current entry is a delete (one UpdateItem, idempotent). The item after it, or None
        if the current entry is not a delete (a newer put made the record live again)."""
        ok, raw = self._conditional_update(
            id,
            "SET #c[0].#x = :true REMOVE #p",
            "#c[0].#h = :tomb",
            {":true": {"BOOL": True}, ":tomb": {"S": ordering.TOMBSTONE_HASH}},
            {"#c", "#p", "#h", "#x"},
        )
        return item_from_dynamo(raw) if ok else None

    def trim(self, id: str, version: int, held: int, count: int) -> bool:
        """Drop the `count` oldest of the `held` history entries, if the item is still at
        `version` with `held` entries. The second condition makes a resent request (after a
        lost response) a no-op instead of dropping `count` more. False if the item changed;
        a later writer trims then."""
        if count <= 0:
            return False
        return self._guarded_update(
            id,
            # Highest index first: DynamoDB resolves every path against the item before the
            # update, but dynalite removes one at a time, shifting the rest, so ascending
            # paths there drop every other entry. Descending paths mean the same on both.
            "REMOVE " + ", ".join(f"#p[{i}]" for i in reversed(range(count))),
            # attribute_exists first: a purge of a deleted id removes `p` and leaves `v`, and
            # moto raises on size() of a missing attribute rather than refusing the write.
            "#v = :v AND attribute_exists(#p) AND size(#p) = :held",
            {"#p": HISTORY, "#v": VERSION},
            {":v": {"N": str(version)}, ":held": {"N": str(held)}},
        )


def _guarded(
    condition: str, values: dict[str, Any], guards: Mapping[str, float]
) -> tuple[str, dict[str, str]]:
    """`condition`, and, for each S3 object the write points at anew (sha256 → when its
    upload began), the collector's half of its protocol; adds the values it needs and returns
    the names. One object (a body) keeps the placeholders it always had."""
    if not guards:
        return condition, {}
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
    return (
        " AND ".join([condition, *clauses]),
        {"#gd": CONDEMNED_UNTIL, "#gs": CONDEMNED_BODIES},
    )


def _with_reused(
    guards: Mapping[str, float], reuse: frozenset[str], basis: dict, skew: float
) -> Mapping[str, float]:
    """`guards`, plus the objects a write reuses from the current entry of `basis` (the item
    it is made against), guarded since that entry was written. Raises PartsNotHeld when that
    entry does not reference them all: they must be uploaded."""
    if not reuse:
        return guards
    item = item_from_dynamo(basis)
    held = item.current.s3_objects() if item is not None else {}
    missing = frozenset(h for h in reuse if h not in held)
    if missing:
        raise PartsNotHeld(basis, missing)
    since = item.current.written_at - skew  # type: ignore[union-attr]
    return {**{h: since for h in reuse}, **guards}


def _item_too_large(error: ClientError) -> bool:
    """DynamoDB's refusal of a write that would make the item larger than 400 KB."""
    details = error.response.get("Error", {})
    return details.get("Code") == "ValidationException" and "maximum allowed size" in str(
        details.get("Message", "")
    )


def _stored(entry: Entry) -> Outcome:
    return Outcome.DELETED if entry.deleted else Outcome.STORED
