"""One put followed through its calls, from the store's entry point (`VersionedHybridStore.put`)
to the DynamoDB write request (UpdateItem, or PutItem), enters no module of `vhs` more than
twice: each module is a collaborator entered once or twice, not a layer called back and forth.

The path is every Python call made, traced with sys.setprofile on in-process moto, as the
sequence of the modules the calls are in (by the module's `__name__`: a dataclass's generated
`__init__` is its module's), runs of calls in one module counted as one entry. Calls in modules
outside `vhs` (the standard library's, say) are passed through; an AWS request is one step of
its own, and what runs beneath it (botocore, moto, the local stack's moto patches) is not
followed. The path ends where the write request begins.
"""

from __future__ import annotations

import secrets
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from vhs_testing.backends import open_backend
from vhs_testing.records import at

MOST_ENTRIES = 2
WRITES = ("UpdateItem", "PutItem")


class Path:
    """The modules a traced call enters, in order, up to the first write request."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.request: FrameType | None = None  # the AWS request under way: not followed
        self.done = False

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.done:
            return
        if self.request is not None:
            if event == "return" and frame is self.request:
                self.request = None
            return
        if event != "call":
            return
        if frame.f_code.co_name == "_make_api_call" and "botocore" in frame.f_code.co_filename:
            operation = frame.f_locals.get("operation_name", "?")
            self._step(f"(request {operation})")
            self.request = frame
            self.done = operation in WRITES
            return
        module = frame.f_globals.get("__name__", "")
        if module == "vhs" or module.startswith("vhs."):
            self._step(module)

    def _step(self, name: str) -> None:
        if not self.steps or self.steps[-1] != name:
            self.steps.append(name)

    def entries(self) -> Counter[str]:
        return Counter(step for step in self.steps if not step.startswith("("))

    def shown(self) -> str:
        counts = ", ".join(f"{m} {n}" for m, n in self.entries().most_common())
        return f"{len(self.steps)} steps: {' > '.join(self.steps)}\nentries: {counts}"


@contextmanager
def traced() -> Iterator[Path]:
    path = Path()
    sys.setprofile(path.profile)
    try:
        yield path
    finally:
        sys.setprofile(None)


def put_path(prepare: Callable[[Any], None], record: Any, id: str = "r") -> Path:
    """The path of one `store.put(id, record, updated_at=at(2))`, after `prepare(store)`."""
    with open_backend("inprocess", None) as backend:
        store = backend.store()
        store.put("warm", {"a": 1}, updated_at=at(1))  # clients and caches made
        prepare(store)
        with traced() as path:
            store.put(id, record, updated_at=at(2))
    assert path.done, path.shown()
    return path


def assert_each_module_entered_at_most_twice(path: Path) -> None:
    over = {module: n for module, n in path.entries().items() if n > MOST_ENTRIES}
    assert over == {}, path.shown()


def test_a_changed_record_enters_no_module_more_than_twice() -> None:
    path = put_path(lambda store: store.put("r", {"a": 1}, updated_at=at(1)), {"a": 2})
    assert_each_module_entered_at_most_twice(path)


def test_a_first_put_enters_no_module_more_than_twice() -> None:
    path = put_path(lambda store: None, {"a": 1}, id="new")
    assert_each_module_entered_at_most_twice(path)


def test_a_put_with_its_body_in_s3_enters_no_module_more_than_twice() -> None:
    large = {"blob": secrets.token_hex(40_000)}  # past the inline threshold, compressed or not
    path = put_path(lambda store: store.put("r", {"a": 1}, updated_at=at(1)), large)
    assert "(request PutObject)" in path.steps, path.shown()
    assert_each_module_entered_at_most_twice(path)
