"""The index: one DynamoDB item per record id, written with conditional updates.

The item's layout and its codec are in codec.py, the requests' expressions in updates.py. Each
kind of write has its method: `put_blind` (one UpdateItem, no read first: the condition,
conditions.py, admits it only if it is newer and different, and DynamoDB evaluates every action
against the item as it was, so it is atomic), `put_planned` (read first, the history planned
by the caller, written only if the item is still as read) and `delete` (a tombstone, written
blind). They share one settle step (`_settle`): a refused write's condition hands back the
item (ReturnValuesOnConditionCheckFailure), which says whether the write was stale, a
duplicate, only a newer timestamp, or our own earlier attempt whose response was lost (the
writer token finds it). A write that points at S3 objects also requires that the garbage
collector has not condemned them since their upload began: the writer's half of its protocol
(docs/gc.md), at no extra request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from .. import ordering
from ..aws import is_condition_failed
from ..errors import BodyCondemned, ItemTooLarge, WriteConflict
from ..model import Entry, Item
from ..ordering import Outcome
from ..shapes import TABLE
from . import updates
from .codec import CONDEMNED_UNTIL, CURRENT, HISTORY, ID, VERSION, item_from_dynamo
from .decode import Read, layout_of_entry, read
from .layouts import Layout
from .size import fit_stored
from .updates import NAMES, HistoryPlan

_MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class WriteResult:
    outcome: Outcome
    version: int
    item: Item | None  # the item after a successful write, else as the failed condition saw it
    # `item` as DynamoDB returned it (its entries in their own layouts): what a trim keeps.
    raw: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class _Plan:
    """What a planned write (DynamoIndex.put_planned) writes besides its entry: the history it
    plans, the objects it uploaded (`guards`) and those it reuses from the item as read."""

    history: HistoryPlan
    guards: Mapping[str, float]
    reuse: frozenset[str] = frozenset()
    reuse_skew: float = 0.0


def _find_own(item: Item, token: str) -> int | None:
    return next((version for version, e in item.versions() if e.token == token), None)


class DynamoIndex:
    def __init__(self, dynamodb_client: Any, table: str, *, consistent_reads: bool = True):
        self.dynamodb = dynamodb_client
        self.table = table
        self.consistent_reads = consistent_reads
        # What writes lay out: compact (layouts.py). Only tests and benchmarks set TEXT.
        self.layout = Layout.COMPACT

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
        request = updates.condemnation(
            content_hashes, deadline, seen_version, standing=standing, drop_history=drop_history
        )
        if request is None:
            return True  # nothing to add to the standing condemnation
        return self._guarded_update(id, *request)

    def condemnations_before(self, expired_before: float) -> Iterator[list[tuple[str, float]]]:
        """Pages of (id, deadline) of the condemnations whose deadline is before
        `expired_before`, from the sparse index of condemned items (shapes.TABLE): only
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
        return self._guarded_update(id, *updates.clear_condemnation(deadline))

    def _guarded_update(
        self, id: str, update: str, condition: str, names: dict[str, str], values: dict
    ) -> bool:
        """Send an UpdateItem that returns nothing: False if its condition refused it."""
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

    # --- writes: one method per kind, one settle step ---------------------------------------

    def put_blind(
        self,
        id: str,
        entry: Entry,
        *,
        keep_history: bool,
        guards: Mapping[str, float],
        fallback: HistoryPlan | None,
    ) -> WriteResult:
        """Make `entry` current if the ordering rules admit it: one request on the happy path,
        with no read first. The update moves the current entry into the history as it is
        (server-side; dropped without `keep_history`) and sets the new one. Such a blind write
        cannot measure the item before writing it, so it measures the item it gets back: past
        codec.ITEM_BUDGET, the oldest history is trimmed at once (`_within_budget`); and if
        DynamoDB refuses the append for the item's size, the write is made as `put_planned`
        makes it, with `fallback` as its history, against a strongly consistent read.

        `guards` (sha256 → epoch seconds, already less the clock-skew allowance): when the
        upload of each S3 object the entry points at anew began; the write then also requires
        that the garbage collector has not condemned it since. Raises BodyCondemned if it has.
        """
        for attempt in range(_MAX_ATTEMPTS):
            try:
                ok, raw = self._conditional_update(
                    id, *updates.new_version(entry, keep_history, guards, self.layout)
                )
            except ClientError as error:
                if not (keep_history and fallback is not None and _item_too_large(error)):
                    raise
                # The item has grown past what a blind append leaves room for: write it as
                # planned against the item as it is, dropping its oldest history.
                plan = _Plan(fallback, guards)
                left = _MAX_ATTEMPTS - attempt - 1
                return self._planned(id, entry, plan, self._read_current(id), True, left)
            if ok and keep_history:
                raw = self._within_budget(id, raw)
            result, _ = self._answered(id, entry, ok, raw, guards)
            if result is not None:
                return result
            # The item changed between our attempts: write again (the ordering condition
            # decides against its new state).
        raise WriteConflict(f"gave up writing {id!r} after {_MAX_ATTEMPTS} contended attempts")

    def delete(
        self, id: str, tombstone: Entry, *, keep_history: bool, fallback: HistoryPlan | None
    ) -> WriteResult:
        """Make `tombstone` (a delete's entry) current if ordering admits it: written blind, as
        `put_blind` writes, with nothing to guard; with `fallback`, never refused for size."""
        return self.put_blind(
            id, tombstone, keep_history=keep_history, guards={}, fallback=fallback
        )

    def put_planned(
        self,
        id: str,
        entry: Entry,
        history: HistoryPlan,
        *,
        guards: Mapping[str, float] | None = None,
        basis: dict | None = None,
        reuse: frozenset[str] = frozenset(),
        reuse_skew: float = 0.0,
        consistent_basis: bool = False,
    ) -> WriteResult:
        """Make `entry` current if the ordering rules admit it, with the history `history`
        plans from the item it replaces (the superseded current entry last; deltas and
        retention's drops: vhs/history/stored_deltas.py), less the oldest entries that do not fit
        codec.ITEM_BUDGET as DynamoDB measures it, so an id keeps taking writes whatever its
        history holds. Raises ItemTooLarge (nothing written) if the entry alone does not fit.

        The item is read first (`basis`, if the caller has it; else an eventually consistent
        read: half a read unit). A write that cannot win is not written (stale: the current
        key only ever goes up; unchanged: the same key) and is answered from a strongly
        consistent read (the version current now, which the first read may not have seen
        yet); a write that can is conditional on the item being as read. `consistent_basis`:
        the caller expects the write cannot win (it has seen a current key at or above it),
        so the first read is the strongly consistent one (one read unit, where the two reads
        would cost one and a half), or `basis` was read so. A stale read only fails that
        condition, and the item the failure returns is the next attempt's starting point, so
        correctness never rests on the read.

        `guards` as for `put_blind`. `reuse` names S3 objects the entry points at that were
        not uploaded for it, because the current entry of `basis` already references them:
        the write also requires that the collector has not condemned them since that entry
        was written (`written_at` less `reuse_skew`). Raises PartsNotHeld when the item the
        write would be made against no longer references them.
        """
        if basis is None:
            basis = self._read_for_write(id, consistent=consistent_basis)
        plan = _Plan(history, dict(guards or {}), reuse, reuse_skew)
        return self._planned(id, entry, plan, basis, consistent_basis, _MAX_ATTEMPTS)

    def _planned(
        self, id: str, entry: Entry, plan: _Plan, basis: dict, current: bool, attempts: int
    ) -> WriteResult:
        seen = read(basis)  # decoded once: the decision and the request are made from it
        for _ in range(attempts):
            settled, seen = self._settle(
                id, entry, seen, plan.guards, decided_by_read=True, current=current
            )
            if settled is not None:
                return settled
            guards = updates.with_reused(plan.guards, plan.reuse, seen, plan.reuse_skew)
            ok, raw = self._conditional_update(
                id, *updates.replace_read(id, entry, seen, plan.history, guards, self.layout)
            )
            result, seen = self._answered(id, entry, ok, raw, guards)
            if result is not None:
                return result
            # The item changed since it was read: decide again against its new state, as the
            # refused write returned it (or a strongly consistent read: current either way).
            current = True
        raise WriteConflict(f"gave up writing {id!r} after {_MAX_ATTEMPTS} contended attempts")

    def _answered(
        self, id: str, entry: Entry, ok: bool, raw: dict, guards: Mapping[str, float]
    ) -> tuple[WriteResult | None, Read]:
        """What a write's answer (`ok`, and the item it returned) says: the write's result,
        or None with the item to write against next."""
        answer = read(raw)
        if ok and answer.item is not None:  # ALL_NEW: always the item, with its new version
            return WriteResult(_stored(entry), answer.item.version, answer.item, raw), answer
        return self._settle(id, entry, answer, guards)

    def _settle(
        self,
        id: str,
        entry: Entry,
        seen: Read,
        guards: Mapping[str, float],
        *,
        decided_by_read: bool = False,
        current: bool = True,
    ) -> tuple[WriteResult | None, Read]:
        """What the item `seen` (one that refused our write, or, `decided_by_read`, as read
        before writing) says about the write: a result, or None with the item to write
        against again (ordering admits the write: the item changed, or was only read).
        `current`: `seen` was read strongly consistent (a refusal's item always is)."""
        incoming = entry.order_key
        item, raw = seen.item, seen.raw
        own = _find_own(item, entry.token) if item else None
        if own is not None:  # our earlier attempt succeeded; its response was lost
            return WriteResult(_stored(entry), own, item, raw), seen
        current_key = item.current.order_key if item else None
        verdict = ordering.classify(current_key, incoming)
        if item is None or verdict in (Outcome.STORED, Outcome.DELETED):
            # Ordering admits it, so (unless we only read) the collector's condition refused it.
            condemned = seen.condemnation
            if (
                not decided_by_read
                and condemned
                and any(
                    condemned.covers(h) and condemned.deadline >= since
                    for h, since in guards.items()
                )
            ):
                raise BodyCondemned(condemned.deadline, raw)
            return None, seen
        if not current and (verdict is Outcome.STALE or incoming == current_key):
            # The read was eventually consistent: stale or unchanged it surely is (the current
            # key only goes up), but the version it saw may be out of date. The result carries
            # the version current now, from a strongly consistent read (stale writes only).
            return self._settle(id, entry, read(self._read_current(id)), guards)
        if verdict is Outcome.STALE or incoming == current_key:
            return WriteResult(verdict, item.version, item, raw), seen
        # Same content, later timestamp: move it forward.
        stored = layout_of_entry(raw[CURRENT]["L"][0]) or self.layout
        ok, raw = self._conditional_update(id, *updates.touch(entry, stored))
        touched = read(raw)
        # A refused touch whose item already holds our key was our own touch, its
        # response lost (or an identical write's): the state is the one we asked for.
        if touched.item is not None and (ok or touched.item.current.order_key == incoming):
            return WriteResult(Outcome.UNCHANGED, touched.item.version, touched.item, raw), touched
        return None, touched

    def _within_budget(self, id: str, raw: dict) -> dict:
        """The item `raw` a blind write returned, with its oldest history trimmed (one more
        conditional UpdateItem, only then) if it outgrew codec.ITEM_BUDGET."""
        item = item_from_dynamo(raw)
        if item is None:
            return raw
        try:  # measured as stored: a blind write leaves earlier entries in their layouts
            drop = fit_stored(raw)
        except ItemTooLarge:  # written already (DynamoDB took it): all the history goes
            drop = len(item.history)
        if drop and self.trim(id, raw, drop):
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
                ExpressionAttributeNames={n: NAMES[n] for n in names} | (extra_names or {}),
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

    def rewrite(self, id: str, basis: dict) -> tuple[bool, dict]:
        """Lay the item `basis` out anew in `self.layout`, if it is still as read (`vhs
        migrate`): whether it was, and the item after (or as the refusal found it)."""
        return self._conditional_update(id, *updates.rewrite(basis, self.layout))

    def purge(self, id: str) -> Item | None:
        """Mark the current delete of `id` as a purge and drop its whole history, if its
        current entry is a delete (one UpdateItem, idempotent). The item after it, or None
        if the current entry is not a delete (a newer put made the record live again)."""
        ok, raw = self._conditional_update(id, *updates.purge())
        return item_from_dynamo(raw) if ok else None

    def trim(self, id: str, raw: Mapping[str, Any], count: int) -> bool:
        """Drop the `count` oldest history entries of the item `raw` (as a write returned it),
        if the item is still at its version with as many entries. The second condition makes
        a resent request (after a lost response) a no-op instead of dropping `count` more.
        False if the item changed; a later writer trims then."""
        held = raw.get(HISTORY, {}).get("L", [])
        if count <= 0 or not held:
            return False
        version = int(raw[VERSION]["N"])
        return self._guarded_update(id, *updates.trim(version, held, count))


def _item_too_large(error: ClientError) -> bool:
    """DynamoDB's refusal of a write that would make the item larger than 400 KB."""
    details = error.response.get("Error", {})
    return details.get("Code") == "ValidationException" and "maximum allowed size" in str(
        details.get("Message", "")
    )


def _stored(entry: Entry) -> Outcome:
    return Outcome.DELETED if entry.deleted else Outcome.STORED
