"""The deletion protocol for one id's orphans: condemned in its item, then deleted under a
fence, so that a delete never lands after a writer pointed at the body again. Apart from the
walk over shards and listing pages (gc.py), which decides what is an orphan.

Deleting an orphan races with a writer that is about to point at the same content-addressed
key again (a re-upload of an old body, or a crash-and-retry). The protocol (docs/gc.md):

1. **Clear** first: a condemnation whose deadline is older than the clock-skew allowance plus
   the writers' maximum write window is removed (no writer can still rely on it), before the
   id is judged, so an old condemnation never holds an id up.
2. **Condemn.** One conditional write per id and page names the orphans in the item's
   condemnation (`gcd` deadline, `gcs` the bodies; index/codec.py), on condition that the item has
   not changed since the collector read it. A new condemnation gets a deadline a lease from
   now; orphans may join a standing one under its own deadline, which never moves. An item
   holds at most `index.codec.MAX_CONDEMNED` bodies; the rest wait for a later run.
3. **Delete** a condemned object, every attempt fenced at its send time: none is sent later
   than half a lease before the deadline (`delete_fence`), so a slow, paused or retried delete
   cannot land after a writer legitimately uploaded the body again.
4. Writers that point at an S3 body require that no standing condemnation names it or that
   its deadline is older than the moment their object was created (index.py). A writer whose
   object may have been deleted waits out the deadline, uploads again and retries, so a
   pointer never outlives its body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..index.codec import (
    MAX_CONDEMNED,
    MAX_CONDEMNED_HELD,
    Condemnation,
    condemnation_of,
    condemned_name,
    version_of,
)
from ..model import Item
from ..store import VersionedHybridStore
from .fence import DeleteFenced, delete_fence, install_delete_fence
from .report import GcReport


@dataclass(frozen=True)
class ListedBody:
    """A body as its shard's listing shows it: its key, its content hash, its size."""

    key: str
    content_hash: str
    size: int


class Condemner:
    """Condemns and deletes one id's orphans at a time, for one collector (the only
    condemnations it renews are its own)."""

    def __init__(
        self,
        store: VersionedHybridStore,
        *,
        lease: float,
        clock: Callable[[], float],
        marker_expiry: float,
    ) -> None:
        self.lease = lease
        self.clock = clock
        self.marker_expiry = marker_expiry
        self.store = store
        self.index = store.index
        self.s3 = store.bodies.s3
        self.bucket = store.bucket_name
        install_delete_fence(self.s3)
        # The id and deadline of the condemnation this collector made (or renewed, or joined)
        # last: the only one it renews, a run still at work on that id (a listing holds an
        # id's keys together, so an id that spans pages is the last one condemned), never
        # another run's.
        self._made: tuple[str, float] | None = None

    def collect(
        self,
        record_id: str,
        raw: dict[str, Any],
        item: Item | None,
        orphans: list[ListedBody],
        now: float,
        report: GcReport,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        """Condemn and delete `orphans`, a round at a time, while the item lets us and
        `should_stop()` does not say time is short."""
        standing = self.standing(record_id, raw, now, report)
        # A delete whose history retention dropped: the condemnation flags it, so that no
        # later put (one that started before the drop, say) can make that history retained
        # again once its bodies are gone (retention.py).
        drop = (
            item is not None
            and not item.current.dropped
            and self.store.retention.history_dropped(item.current, now - self.store.clock_skew)
            and not item.current.purge
        )
        pending = orphans
        while pending:
            condemned, taken = self._condemn(
                record_id, version_of(raw), pending, standing, drop_history=drop
            )
            drop = False
            if condemned is None:
                # The item changed since we read it (judge it again next run), or another
                # run's condemnation leaves no time to delete.
                report.skipped += len(pending)
                return
            if not taken:  # the item names as many condemned bodies as it may
                report.deferred += len(pending)
                return
            late: list[ListedBody] = []
            for body in taken:
                if self._delete(body, condemned.deadline):
                    report.deleted += 1
                    report.bytes_reclaimed += body.size
                else:
                    late.append(body)  # its condemnation's time to delete ran out
            if len(late) == len(taken):  # not one delete in time: leave them for a later run
                report.skipped += len(pending)
                return
            standing = condemned
            done = {body.key for body in taken}
            # The late ones first: the renewal the next round makes lets them be deleted.
            pending = late + [body for body in pending if body.key not in done]
            if pending and should_stop is not None and should_stop():
                report.skipped += len(pending)
                return

    def standing(
        self, record_id: str, raw: dict[str, Any], now: float, report: GcReport
    ) -> Condemnation | None:
        """The item's condemnation, once an expired one is cleared (before judging, so that
        an id whose writes an old condemnation slows is freed whatever else happens)."""
        standing = condemnation_of(raw)
        expired = standing is not None and standing.deadline < now - self.marker_expiry
        if expired and self.index.clear_condemnation(record_id, standing.deadline):
            report.markers_cleared += 1
            return None
        return standing  # (one another collector changed stays: it is not judged under)

    def _condemn(
        self,
        record_id: str,
        seen_version: int | None,
        orphans: list[ListedBody],
        standing: Condemnation | None,
        *,
        drop_history: bool = False,
    ) -> tuple[Condemnation | None, list[ListedBody]]:
        """Condemn the next orphans (at most MAX_CONDEMNED not yet named, and only as many as
        the item may hold): under a new condemnation; joining a standing one while it leaves
        time to delete (its deadline stays: a writer may be waiting it out); or renewing one
        too near its deadline to delete under, with a later deadline that every name in it
        then answers to. The condemnation, and the orphans it lets us delete (those it names
        already and those just added), or None if the item changed."""
        now = self.clock()
        if standing is None:
            deadline = now + self.lease
        elif now < standing.deadline - self.lease / 2:
            deadline = standing.deadline
        elif self._made == (record_id, standing.deadline):
            deadline = now + self.lease  # renew one this collector made: it is still at work
        else:
            # Another run's, too near its deadline to delete under and not yet expired: a
            # writer may be waiting it out. Its bodies wait for a later run.
            return None, []
        held = standing.bodies if standing is not None else frozenset()
        named = [o for o in orphans if condemned_name(o.content_hash) in held]
        room = min(MAX_CONDEMNED, MAX_CONDEMNED_HELD - len(held))
        new = [o for o in orphans if condemned_name(o.content_hash) not in held][: max(0, room)]
        if not named and not new:
            return standing, []
        written = new or drop_history or deadline != standing.deadline  # type: ignore[union-attr]
        if written and not self.index.condemn(
            record_id,
            [o.content_hash for o in new],
            deadline,
            seen_version,
            standing=standing.deadline if standing is not None else None,
            drop_history=drop_history,
        ):
            return None, []
        names = held | {condemned_name(o.content_hash) for o in new}
        self._made = (record_id, deadline)
        return Condemnation(deadline, frozenset(names)), named + new

    def _delete(self, body: ListedBody, deadline: float) -> bool:
        """Delete a condemned body, if every attempt to send the request is made while half
        the lease is still in hand (a fence at send time: a slow or retried request that
        would go later is not sent). False if it was too late."""
        try:
            with delete_fence(deadline - self.lease / 2, self.clock):
                self.s3.delete_object(Bucket=self.bucket, Key=body.key)
        except DeleteFenced:
            return False
        return True
