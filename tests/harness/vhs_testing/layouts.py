"""A store whose writes alternate between the two item layouts (vhs/index/layouts.py), id by id: the
first write of each id lays it out as every write did before the compact layout (text), the
next compactly, and so on. Every kind of item a table can hold while the two meet is made:
text items, compact ones, an item of either rewritten by a write of the other (in whole by a
planned write; a blind one leaves the entries it moves into the history as they were), as a
fleet part-way through a deploy would make them. `Backend.store()` returns one when the
backend's `layouts` is MIXED (tests/core/test_store_contract.py runs the contract so)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from vhs import VersionedHybridStore
from vhs.index.layouts import Layout

COMPACT = "compact"  # every write compact: the store as it is
MIXED = "mixed"  # writes alternate between the layouts, id by id
LAYOUTS = (COMPACT, MIXED)


def alternate_layouts(store: VersionedHybridStore) -> VersionedHybridStore:
    """`store`, its index's writes made in the text layout and the compact one in turn, per id."""
    index = store.index
    writes: Counter[str] = Counter()
    lock = threading.Lock()

    def alternating(write: Any) -> Any:
        def written(id: str, *args: Any, **kwargs: Any) -> Any:
            with lock:
                turn = writes[id]
                writes[id] += 1
            index.layout = Layout.TEXT if turn % 2 == 0 else Layout.COMPACT
            return write(id, *args, **kwargs)

        return written

    for name in ("put_blind", "put_planned", "delete"):
        setattr(index, name, alternating(getattr(index, name)))
    return store
