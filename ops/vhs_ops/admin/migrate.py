"""`vhs migrate`: rewrite at once every item not yet in the compact layout (docs/design.md,
"Item layouts").

Nothing needs it: an item in the text layout is read as it is, and its next planned write
rewrites it whole. This is for those who want the table compact now (smaller items: cheaper
writes and storage). A parallel Scan (`index.scan.scan_pages`, as `vhs verify` reads) reads every
item; each whose entries are not all compact (`index.codec.stored_layout`) is rewritten in place by
one conditional UpdateItem (`DynamoIndex.rewrite`): the same entries, laid out compactly, only
if the item is still as read. Nothing else changes: not `v` (the change feed publishes
nothing), not the collector's condemnation. A write that lands between the read and the
rewrite wins; the item is then taken as the refusal returned it and tried again, up to
MAX_ATTEMPTS times, and otherwise counted in `conflicts` and left to its next write.
Idempotent: a second run finds every item compact and writes nothing. A damaged item (a field
in neither layout: index.codec.MalformedItem) is left as it is, counted in `unparseable` and
named in `damaged` (its id, field and what is wrong: the first MAX_DAMAGED_SHOWN), and the run
goes on.

Cost: the Scan reads every item once; each item rewritten costs one write, billed on the larger
of the item before and after (before: it only shrinks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from vhs.index.codec import (
    ID,
    MalformedItem,
    id_of,
    item_from_dynamo,
    layout_problem,
    stored_layout,
)
from vhs.index.layouts import Layout
from vhs.index.scan import scan_pages
from vhs.store import VersionedHybridStore

MAX_ATTEMPTS = 4
DEFAULT_SEGMENTS = 4
MAX_DAMAGED_SHOWN = 1000  # damaged items named in a report (every one is counted)


@dataclass
class MigrateReport:
    items: int = 0  # items read
    compact: int = 0  # already compact: nothing written
    rewritten: int = 0  # laid out anew
    unversioned: int = 0  # only garbage-collector markers: nothing to lay out
    unparseable: int = 0  # in neither layout: left as they are
    conflicts: int = 0  # kept changing while tried: left to their next write
    # The first MAX_DAMAGED_SHOWN of the unparseable: {"id", "field", "detail"} each.
    damaged: list[dict[str, str | None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.unparseable == 0 and self.conflicts == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


ProgressCallback = Callable[[MigrateReport], None]


def migrate(
    store: VersionedHybridStore,
    *,
    segments: int = DEFAULT_SEGMENTS,
    page_size: int | None = None,
    progress: ProgressCallback | None = None,
) -> MigrateReport:
    """Rewrite every item of `store`'s table that is not all compact. `progress` is called
    after every page, from the scanning threads, one call at a time."""
    if segments < 1:
        raise ValueError("segments must be at least 1")
    report, lock = MigrateReport(), threading.Lock()

    def count(name: str) -> None:
        with lock:
            setattr(report, name, getattr(report, name) + 1)

    def segment(number: int) -> None:
        index = store.index
        for page in scan_pages(
            index.dynamodb,
            index.table,
            segment=number,
            total_segments=segments,
            page_size=page_size,
        ):
            for raw in page.items:
                count("items")
                try:
                    count(_migrate_one(store, raw))
                except MalformedItem as damaged:  # left as it is; the run goes on
                    with lock:
                        report.unparseable += 1
                        if len(report.damaged) < MAX_DAMAGED_SHOWN:
                            report.damaged.append(
                                {
                                    "id": damaged.id,
                                    "field": damaged.field,
                                    "detail": damaged.reason,
                                }
                            )
            if progress is not None:
                with lock:
                    progress(report)

    with ThreadPoolExecutor(segments, thread_name_prefix="vhs-migrate") as pool:
        for done in [pool.submit(segment, n) for n in range(segments)]:
            done.result()
    return report


def _migrate_one(store: VersionedHybridStore, raw: dict[str, Any]) -> str:
    """Lay one item out compactly: the name of the count it adds to."""
    index = store.index
    if index.layout is not Layout.COMPACT:
        raise ValueError("a migration lays items out compactly: the index must write so")
    for _attempt in range(MAX_ATTEMPTS):
        item = item_from_dynamo(raw)  # MalformedItem: the caller reports it
        problem = layout_problem(raw, item)
        if problem is not None:
            raise MalformedItem(problem, id=id_of(raw))
        if item is None:
            return "unversioned"
        if stored_layout(raw) == Layout.COMPACT:  # as read, or as a writer rewrote it meanwhile
            return "compact"
        written, raw = index.rewrite(raw[ID]["S"], raw)
        if written:
            return "rewritten"
    return "conflicts"
