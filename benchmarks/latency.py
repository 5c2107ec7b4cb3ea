"""Per-request latency in front of the local stack, injected on the client side: a
`before-send` handler that sleeps, registered on every botocore client created in this
process (the handler's included), so a pipeline on moto pays AWS's round trips. The sleep
releases the GIL: requests sent concurrently wait concurrently, as on a network."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

# Milliseconds per request, by botocore service id: published figures, sources in
# docs/benchmarks.md ("The ingest pipeline").
DELAYS = {"sqs": 20.0, "dynamodb": 5.0, "s3": 20.0}


class InjectedLatency:
    """Sleeps DELAYS[service] before each request of that service while `on`, and counts every
    request by service, on or off. Reaches the clients created after `install()`."""

    def __init__(self) -> None:
        self.on = False
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._original: Any = None

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        service = event_name.split(".")[1] if event_name.count(".") >= 2 else ""
        with self._lock:
            self.counts[service] += 1
        if self.on and DELAYS.get(service):
            time.sleep(DELAYS[service] / 1000)

    def __enter__(self) -> InjectedLatency:
        import botocore.session

        original = self._original = botocore.session.Session.create_client
        hook = self._before_send

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(session, *args, **kwargs)
            made.meta.events.register("before-send", hook)
            return made

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import botocore.session

        botocore.session.Session.create_client = self._original  # type: ignore[method-assign]

    @contextlib.contextmanager
    def enabled(self, on: bool = True) -> Iterator[None]:
        saved, self.on = self.on, on
        try:
            yield
        finally:
            self.on = saved

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)
