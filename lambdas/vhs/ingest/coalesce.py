"""Coalescing one batch: messages for the same id are reduced to their winner before anything
is written, so a hot id costs one conditional write per batch, not one per message.

The store orders writes by their key (ordering.py), and the outcome an id ends in never
depends on arrival order. So the messages of one batch may be taken in any order, and the
order "winner first" is one of them: the winner is written, and every other message for its
id is then exactly what the store would call it against the state the winner left, without
being sent:

* lower than the winner: **stale** (the winner, or something newer, is current);
* the winner's own key (a duplicate): **unchanged**, or **stale** if the winner was stale.

A message is a loser only when another message of the batch beats it for certain: a later
`updated_at`, or the same one and a higher key that is known. A staged body's hash is known
only once it is downloaded, so such a message loses only to a later `updated_at` (and then is
never downloaded), and otherwise is written as usual. Claim checks are not looked into (their
id is inside the payload), messages with attributes take the usual path (a redriven one has a
receipt to revoke), and purges are always written (a purge drops earlier versions, which a
duplicate delete does not).

If the winner is not written (it is dead-lettered, or fails and is retried), its losers do not
share its fate: they are coalesced again among themselves, as if it had never been sent.

Nothing here reads a message: a candidate is made from the record's first reading
(contract.first_read), which the batch (vhs.ingest.batch) then writes from, so a message is
parsed and validated once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..ordering import TOMBSTONE_HASH, OrderKey, Outcome
from .contract import FirstRead, IngestMessage


@dataclass(frozen=True)
class Candidate:
    """What is known of one message before anything is written."""

    index: int  # its position in the batch
    record_id: str
    stamp: str  # updated_at in the stored form
    key: OrderKey | None  # None when its content hash is known only after a download
    purge: bool = False

    def beaten_by(self, other: Candidate) -> bool:
        """Whether `other` is certainly higher, or the same key sent earlier in the batch."""
        if other.stamp != self.stamp:
            return other.stamp > self.stamp
        if self.key is None or other.key is None:
            return False
        return other.key > self.key or (other.key == self.key and other.index < self.index)


def candidate(index: int, message: IngestMessage) -> Candidate:
    if message.kind == "deleted":
        key: OrderKey | None = OrderKey.of(message.stamp, TOMBSTONE_HASH, None)
    elif message.encoded is not None and not message.parts:
        key = OrderKey.of(message.stamp, message.encoded.sha256, message.encoded.content_type)
    else:
        key = None  # a staged body or staged parts: hashed when downloaded
    return Candidate(index, message.id, message.stamp, key, message.purge)


def read_candidate(index: int, record: Mapping[str, Any], first: FirstRead) -> Candidate | None:
    """The candidate of a Lambda SQS record, from what it read as (contract.first_read), or
    None for a message that is not coalesced: one that is invalid (the usual path
    dead-letters it), a claim check, or one with attributes."""
    if isinstance(first, IngestMessage) and not record.get("messageAttributes"):
        return candidate(index, first)
    return None


def losers(candidates: Iterable[Candidate]) -> dict[int, int]:
    """{loser's index: the index of a message that beats it and is itself written}."""
    by_id: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_id[c.record_id].append(c)
    beaten: dict[int, int] = {}
    for group in by_id.values():
        if len(group) < 2:
            continue
        writers = [c for c in group if c.purge or not any(c.beaten_by(o) for o in group)]
        for c in group:
            if c in writers:
                continue
            winner = next(w for w in writers if c.beaten_by(w))
            beaten[c.index] = winner.index
    return beaten


def outcome_after(winner: OrderKey | None, winner_outcome: str, loser: Candidate) -> Outcome:
    """What the store would call `loser`, written right after its winner."""
    if loser.key is not None and loser.key == winner and winner_outcome != Outcome.STALE:
        return Outcome.UNCHANGED
    return Outcome.STALE


def in_rounds(
    pending: Iterable[int],
    candidates: Mapping[int, Candidate],
    write: Callable[[list[int]], None],
    written: Callable[[int], str | None],
) -> Iterator[tuple[int, int, Outcome]]:
    """Coalesce and write the messages `pending` (indexes; those in `candidates` can be
    ranked, the others are always written): `write` stores a round's writers, then each
    loser is yielded with its winner and the outcome it has after it, as (loser, winner,
    outcome). `written(winner)` is the winner's outcome, or None when it was not written
    (dead-lettered, refused or to be retried): its losers do not share its fate but are
    coalesced again among themselves, in a round of their own. The ingest handler's batches
    and bulk import's chunks both go through here."""
    pending = list(pending)
    while pending:
        beaten = losers(candidates[n] for n in pending if n in candidates)
        write([n for n in pending if n not in beaten])
        pending = []
        for n, winner in sorted(beaten.items()):
            won = written(winner)
            if won is None:
                pending.append(n)
                continue
            yield n, winner, outcome_after(candidates[winner].key, won, candidates[n])
