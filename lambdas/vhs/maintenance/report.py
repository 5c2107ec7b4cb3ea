"""What a garbage-collection run did, by count: the value the scheduled function logs and
alarms on, the CLI prints and benchmarks add up. Filled both by the walk over shards (gc.py:
what was listed, young, unrecognised or failed) and by the deletion protocol (condemn.py: what
was deleted, skipped or deferred), so it is apart from both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class GcReport:
    shards: int = 0
    listed: int = 0  # objects seen
    young: int = 0  # within the grace period: not judged
    referenced: int = 0
    orphaned: int = 0  # unreferenced and past the grace period
    deleted: int = 0
    bytes_reclaimed: int = 0  # deleted bytes (in a dry run: what would be reclaimed)
    skipped: int = 0  # orphans left for a later run: the item changed, or time ran short
    # Orphans left until the id's condemnation expires: its item names MAX_CONDEMNED_HELD.
    deferred: int = 0
    markers_cleared: int = 0
    unrecognised: int = 0  # not judged: keys outside VHS's layout, or of a damaged item
    failed: int = 0  # ids whose bodies could not be judged or condemned (an AWS error)
    failed_shards: list[str] = field(default_factory=list)  # shards that could not be listed
    dry_run: bool = False

    def add(self, other: GcReport) -> None:
        for each in fields(self):
            if each.type == "int":
                setattr(self, each.name, getattr(self, each.name) + getattr(other, each.name))
        self.failed_shards += other.failed_shards

    @property
    def ok(self) -> bool:
        """Nothing failed (what was left for a later run is not a failure)."""
        return self.failed == 0 and not self.failed_shards

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
