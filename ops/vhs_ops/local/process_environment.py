"""This process's environment, set for a while: how the local stack runs a function's handler
with the function's environment (event sources, `vhs invoke`), and how the demo and the
benchmarks point a library at the local stack. A module of its own, below the stack and the
event sources that both use it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set `values` in os.environ for the block; on leaving, restore each name as it was
    (unset if it was unset)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
