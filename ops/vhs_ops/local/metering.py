"""Count the AWS requests a block of code makes, per service and operation.

Counting happens at botocore's ``request-created`` event, which fires once per HTTP attempt
(retries included) whether the request goes to AWS, moto's server or moto in-process. Tests
use it to hold the request floor; benchmarks use it to price operations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RequestMeter:
    def __init__(self, *clients: Any) -> None:
        self.clients = clients
        self.counts: Counter[str] = Counter()
        self._active = False
        for client in clients:
            client.meta.events.register("request-created", self._count)

    def _count(self, request: Any = None, operation_name: str = "", **_: Any) -> None:
        if self._active:
            self.counts[operation_name] += 1

    @contextmanager
    def measure(self) -> Iterator[Counter[str]]:
        """Count only inside the block; the yielded Counter fills in as requests go out."""
        self.counts = Counter()
        self._active = True
        try:
            yield self.counts
        finally:
            self._active = False

    def close(self) -> None:
        for client in self.clients:
            client.meta.events.unregister("request-created", self._count)
