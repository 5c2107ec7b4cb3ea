"""Which earlier versions a store keeps readable.

Retention is a pure function of an item and the clock, evaluated the same way by readers,
writers (which trim what has expired) and the garbage collector (which collects the bodies
that no retained version references), so the three always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from .errors import ConfigurationError
from .model import Entry, Item

# How long a deleted record's earlier versions stay readable by default (docs/design.md).
DEFAULT_AFTER_DELETE = timedelta(days=30)


@dataclass(frozen=True)
class Retention:
    """Keep at most `versions` earlier versions, and none superseded more than `age` ago.

    A version is superseded when the next one is written (its successor's write time). The
    current version is always kept.

    Deletes: while the current entry is a delete, the earlier versions stay readable for
    `after_delete` from the delete's write time (`written_at`), then none is kept (None: no
    such limit; the other rules still apply). A purging delete keeps none at once. Either way
    the tombstone itself is the current entry and stays, so later puts remain stale; and what
    it dropped stays dropped when a later put makes the record live again. Whether it had
    dropped them when that put came is read off the tombstone's `dropped` flag, which the
    collector sets in the same conditional write that condemns their bodies, so a slow put
    that lands after the collection cannot bring them back (the put's `written_at`, taken
    when it started, decides only while no collector has acted on the drop).
    """

    versions: int = 5
    age: timedelta | None = None
    after_delete: timedelta | None = DEFAULT_AFTER_DELETE

    def __post_init__(self) -> None:
        if not isinstance(self.versions, int) or self.versions < 0:
            raise ConfigurationError("retention.versions must be a whole number >= 0")
        if self.age is not None and self.age < timedelta(0):
            raise ConfigurationError("retention.age must not be negative")
        if self.after_delete is not None and self.after_delete < timedelta(0):
            raise ConfigurationError("retention.after_delete must not be negative")

    @property
    def trim_batch(self) -> int:
        """How many expired entries an item may carry before a writer trims them. Trimming in
        batches makes the extra write rare (one per `trim_batch` updates)."""
        return max(1, self.versions // 2)

    @property
    def max_held(self) -> int:
        """The most earlier entries an item can hold between trims."""
        return self.versions + self.trim_batch

    def retained(self, item: Item, now: float) -> list[tuple[int, Entry]]:
        """The entries readable now, oldest first, current last."""
        numbered = item.versions()
        kept = [numbered[-1]]
        if self.history_dropped(item.current, now):
            return kept
        for index in range(len(numbered) - 2, -1, -1):
            if len(kept) - 1 >= self.versions:
                break
            successor = numbered[index + 1][1]
            if self.age is not None and successor.written_at < now - self.age.total_seconds():
                break
            kept.append(numbered[index])
            entry = numbered[index][1]
            # A delete that had dropped its history before a later put made the record live
            # again: what it dropped stays dropped (its bodies may be collected by now).
            if self.history_dropped(entry, successor.written_at):
                break
        kept.reverse()
        return kept

    def history_dropped(self, current: Entry, now: float) -> bool:
        """Whether a current delete keeps no earlier version: a purge, or past `after_delete`."""
        if not current.deleted:
            return False
        if current.purge or current.dropped:
            return True
        return (
            self.after_delete is not None
            and current.written_at <= now - self.after_delete.total_seconds()
        )

    def expired_count(self, item: Item, now: float) -> int:
        return len(item.history) + 1 - len(self.retained(item, now))
