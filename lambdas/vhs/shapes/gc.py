"""Garbage collection: a scheduled Lambda (docs/gc.md)."""

from __future__ import annotations

from collections.abc import Iterator

from .shape import Check, FunctionShape


# The Maintenance stack (infra/gc.py) runs handlers.gc on an EventBridge schedule. The handler
# stops taking shards with 120 s left and hands the rest on to a fresh invocation of itself, so
# the timeout bounds one invocation, not a collection.
def _is_duration(text: str) -> bool:
    """What handlers.gc (vhs.maintenance.gc.parse_duration) reads from VHS_GC_GRACE: seconds, or
    90s / 30m / 1h / 2d; not negative."""
    number = text[:-1] if text[-1:] in ("s", "m", "h", "d") else text
    digits = number.replace(".", "", 1)
    return digits.isascii() and digits.isdigit()


class GcShape(FunctionShape, shape="GC", timeout_seconds=900, memory_mb=512):
    # EventBridge schedule expression of the collection run.
    schedule_expression: str = "rate(1 day)"
    # The scheduled event is {"parallel": N}: the 256 shards are split over N invocations.
    parallel: int = 8
    # VHS_GC_GRACE: objects younger than this are not judged (docs/gc.md).
    grace: str = "1h"

    def _checks(self) -> Iterator[Check]:
        yield (
            self.schedule_expression.startswith(("rate(", "cron("))
            and self.schedule_expression.endswith(")"),
            "schedule must be an EventBridge rate(...) or cron(...) expression",
        )
        yield 1 <= self.parallel <= 256, "parallel must be 1..256 (there are 256 shards)"
        yield _is_duration(self.grace), "grace must be a duration such as 90s, 30m, 1h or 2d"


GC = GcShape()
