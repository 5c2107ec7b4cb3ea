"""One put followed through its calls, from the store's entry point (`VersionedHybridStore.put`)
to the DynamoDB write request (UpdateItem, or PutItem), enters no module of `vhs` more than
twice: each module is a collaborator entered once or twice, not a layer called back and forth.

The path is every Python call made, traced with sys.setprofile on in-process moto. A module is
the file a function's code is written in (so a dataclass's generated `__init__` or `__eq__`,
which dataclasses writes, is nobody's), and it is entered when one of its functions is called
from code outside it (calls in modules outside `vhs`, the standard library's say, are passed
through to their caller): the calls it then makes inside itself are the same entry. An AWS
request is one step of its own, and what runs beneath it (botocore, moto, the local stack's
moto patches) is not followed. The path ends where the write request begins.

The values every collaborator reads (`model`: an entry's ordering key, whether it is a delete,
an item's versions; `ordering`: a key's rule; `packing`, `keys`) are held to the counts they
have, not to two: their accessors are called by each module that holds a value.
"""

from __future__ import annotations

import secrets
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from vhs_testing.backends import open_backend
from vhs_testing.records import at

MOST_ENTRIES = 2
# The values' modules, and the most entries a path of the tests below makes of each.
VALUES = {"vhs.model": 9, "vhs.ordering": 3, "vhs.bodies.packing": 3, "vhs.keys": 3}
WRITES = ("UpdateItem", "PutItem")
VHS = Path(__file__).resolve().parents[2] / "lambdas" / "vhs"


def module_of(code: CodeType) -> str | None:
    """The module of `vhs` whose file `code` is written in (None: outside `vhs`)."""
    file = Path(code.co_filename)
    if not file.is_relative_to(VHS):
        return None
    parts = file.relative_to(VHS).with_suffix("").parts
    return ".".join(("vhs", *parts[: -1 if parts[-1] == "__init__" else None]))


class Trace:
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
        module = module_of(frame.f_code)
        if module is not None and module != caller_module(frame):
            self._step(module)

    def _step(self, name: str) -> None:
        self.steps.append(name)

    def entries(self) -> Counter[str]:
        return Counter(step for step in self.steps if not step.startswith("("))

    def shown(self) -> str:
        counts = ", ".join(f"{m} {n}" for m, n in self.entries().most_common())
        return f"{len(self.steps)} steps: {' > '.join(self.steps)}\nentries: {counts}"


def caller_module(frame: FrameType) -> str | None:
    """The module of `vhs` that called `frame`'s function, past any outside `vhs` between."""
    caller = frame.f_back
    while caller is not None and module_of(caller.f_code) is None:
        if caller.f_code.co_filename == __file__:
            return None  # the test: the path's entry point
        caller = caller.f_back
    return module_of(caller.f_code) if caller is not None else None


@contextmanager
def traced() -> Iterator[Trace]:
    path = Trace()
    sys.setprofile(path.profile)
    try:
        yield path
    finally:
        sys.setprofile(None)


def put_path(prepare: Callable[[Any], None], record: Any, id: str = "r") -> Trace:
    """The path of one `store.put(id, record, updated_at=at(2))`, after `prepare(store)`."""
    with open_backend("inprocess", None) as backend:
        store = backend.store()
        store.put("warm", {"a": 1}, updated_at=at(1))  # clients and caches made
        prepare(store)
        with traced() as path:
            store.put(id, record, updated_at=at(2))
    assert path.done, path.shown()
    return path


def assert_each_module_entered_at_most_twice(path: Trace) -> None:
    entries = path.entries()
    over = {m: n for m, n in entries.items() if n > VALUES.get(m, MOST_ENTRIES)}
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
