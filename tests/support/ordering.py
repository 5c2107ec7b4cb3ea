"""The order the suite runs in (tests/conftest.py applies it at collection)."""

from __future__ import annotations

import pytest


def slow_modules_first(items: list[pytest.Item]) -> None:
    """Modules holding a test marked `slow` run first, each kept whole (its module fixtures
    are set up once). pytest-xdist hands each worker a contiguous share and a worker that runs
    out takes from the end of the other's: a long test that starts near the end leaves the
    other core idle while it runs. Mark a test `slow` when it takes more than a few seconds."""

    def module(item: pytest.Item) -> object:
        return getattr(item, "module", None)

    slow = {module(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: module(item) not in slow)  # stable: each module's order stays
