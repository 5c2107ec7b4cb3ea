"""What every shape shares: the check that refuses a wrong one, the function a feature deploys,
the AWS limits more than one shape is held to, and the deployed alarms' period."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, dataclass_transform

# SQS: the longest a queue keeps a message, and the largest message (raised from 256 KB in
# 2025). The ingest queues, the change feed's DLQ and the staging expiry are bound by them.
MAX_SQS_RETENTION_SECONDS = 14 * 24 * 3600
MAX_SQS_MESSAGE_BYTES = 1024 * 1024
# The period a deployed alarm sums or averages its metric over: the functions' errors and
# throttles, the table's throttled requests (infra/shapes.ALARMS) and the read API's error rate
# and latency.
ALARM_PERIOD_SECONDS = 300

Check = tuple[bool, str]  # (holds, what is wrong otherwise)


class Shape:
    """A frozen dataclass of settings that refuses to be built wrong: building one raises
    ValueError naming, in order, every one of its checks that does not hold."""

    SHAPE: ClassVar[str]  # how the error names it: "invalid {SHAPE} shape: ..."

    def __post_init__(self) -> None:
        problems = [problem for holds, problem in self._every_check() if not holds]
        if problems:
            raise ValueError(f"invalid {self.SHAPE} shape: " + "; ".join(problems))

    def _every_check(self) -> Iterator[Check]:
        """What every shape of this kind is held to, then the shape's own `_checks`."""
        return self._checks()

    def _checks(self) -> Iterator[Check]:
        raise NotImplementedError


@dataclass_transform(frozen_default=True)
class FunctionShape(Shape):
    """The shape of a feature that deploys one Lambda function (infra/function.py builds it
    from these two fields). A subclass is a frozen dataclass whose class line names it and
    gives the function's defaults, ahead of its own fields:
    ``class GcShape(FunctionShape, shape="GC", timeout_seconds=900, memory_mb=512)``."""

    function_timeout_seconds: int
    function_memory_mb: int

    def __init_subclass__(
        cls, *, shape: str, timeout_seconds: int, memory_mb: int, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls.SHAPE = shape
        cls.function_timeout_seconds = timeout_seconds
        cls.function_memory_mb = memory_mb
        own = inspect.get_annotations(cls)
        cls.__annotations__ = {"function_timeout_seconds": int, "function_memory_mb": int, **own}
        dataclass(frozen=True)(cls)

    def _every_check(self) -> Iterator[Check]:
        # Lambda's bounds.
        yield 1 <= self.function_timeout_seconds <= 900, "function timeout must be 1..900 s"
        yield 128 <= self.function_memory_mb <= 10_240, "function memory must be 128..10240 MB"
        yield from self._checks()
