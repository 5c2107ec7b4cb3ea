"""The garbage collector's delete fence: a DeleteObject is refused at the moment it would be
sent (a first try or an SDK retry) once it is later than its condemnation allows (gc.py, step
3 of the protocol in docs/gc.md)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import DeleteFenced

# The fence of the delete being sent from this thread: (latest send time, clock).
_FENCE: contextvars.ContextVar[tuple[float, Callable[[], float]] | None] = contextvars.ContextVar(
    "vhs_gc_delete_fence", default=None
)


def _check_fence(**_: Any) -> None:
    fence = _FENCE.get()
    if fence is not None and fence[1]() > fence[0]:
        raise DeleteFenced(f"the delete would be sent after {fence[0]}")


@contextlib.contextmanager
def delete_fence(latest: float, clock: Callable[[], float]) -> Iterator[None]:
    """Refuse, at the moment of sending, every attempt (first try or SDK retry) of a request
    made in this block after `latest` by `clock`. Needs `install_delete_fence` on the client."""
    token = _FENCE.set((latest, clock))
    try:
        yield
    finally:
        _FENCE.reset(token)


def install_delete_fence(s3: Any) -> None:
    """Check the fence on the client's DeleteObject requests, before anything else sees them
    (in-process moto answers in a handler of the same event: the fence must come first)."""
    s3.meta.events.register_first(
        "before-send.s3.DeleteObject", _check_fence, unique_id="vhs-gc-delete-fence"
    )
