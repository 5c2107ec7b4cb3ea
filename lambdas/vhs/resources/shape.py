"""What every shape shares: the check that refuses a wrong one, and the AWS limits more than
one shape is held to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

# SQS: the longest a queue keeps a message, and the largest message (raised from 256 KB in
# 2025). The ingest queues, the change feed's DLQ and the staging expiry are bound by them.
MAX_SQS_RETENTION_SECONDS = 14 * 24 * 3600
MAX_SQS_MESSAGE_BYTES = 1024 * 1024

Check = tuple[bool, str]  # (holds, what is wrong otherwise)


class Shape:
    """A frozen dataclass of settings that refuses to be built wrong: building one raises
    ValueError naming, in order, every one of its `_checks` that does not hold."""

    SHAPE: ClassVar[str]  # how the error names it: "invalid {SHAPE} shape: ..."

    def __post_init__(self) -> None:
        problems = [problem for holds, problem in self._checks() if not holds]
        if problems:
            raise ValueError(f"invalid {self.SHAPE} shape: " + "; ".join(problems))

    def _checks(self) -> Iterator[Check]:
        raise NotImplementedError


def function_checks(timeout_seconds: int, memory_mb: int | None = None) -> Iterator[Check]:
    """Lambda's bounds on a function's timeout and, when given, its memory."""
    yield 1 <= timeout_seconds <= 900, "function timeout must be 1..900 s"
    if memory_mb is not None:
        yield 128 <= memory_mb <= 10_240, "function memory must be 128..10240 MB"
