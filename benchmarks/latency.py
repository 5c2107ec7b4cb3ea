"""Per-request latency in front of the local stack, injected on the client side.

moto answers on 127.0.0.1 in a fraction of a millisecond of network time, so a pipeline on it
measures moto's CPU, not the round trips that bound a pipeline on AWS. `InjectedLatency` adds
a fixed delay to every HTTP request botocore sends (each attempt, retries included), by
service, before it leaves the client: a `before-send` handler that sleeps, registered on every
client created in this process once it is installed (boto3's clients, the benchmark's, and
the handler's botocore clients, vhs.aws.aws_client, alike). The sleep releases the GIL, so
requests sent concurrently wait concurrently, as they do on a network.

The delays are published figures, one per service (DELAYS), each with its source.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Delay:
    service: str  # botocore's service id, as in the event name: before-send.<service>.<op>
    ms: float
    figure: str  # what the source says
    source: str  # its title
    url: str


DELAYS = (
    Delay(
        "sqs",
        20.0,
        "“if the latency from an Amazon EC2-based client to Amazon SQS in the same region "
        "averages 20 ms, the maximum throughput from a single thread over a single connection "
        "averages 50 TPS”",
        "Amazon SQS Developer Guide, Increasing throughput using horizontal scaling and "
        "action batching",
        "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
        "sqs-throughput-horizontal-scaling-and-batching.html",
    ),
    Delay(
        "dynamodb",
        5.0,
        "“for most atomic operations, such as GetItem and PutItem, you can expect an average "
        "latency in single-digit milliseconds” (5 ms: the middle of that range)",
        "AWS Knowledge Center, Why is my DynamoDB request latency high?",
        "https://repost.aws/knowledge-center/dynamodb-high-latency",
    ),
    Delay(
        "s3",
        20.0,
        "“smaller requests (for example, less than 512 KB), where median latencies are often "
        "in the tens of milliseconds range” (20 ms: the low end of that range)",
        "Best Practices Design Patterns: Optimizing Amazon S3 Performance (AWS whitepaper), "
        "Timeouts and Retries for Latency-Sensitive Applications",
        "https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/"
        "timeouts-and-retries-for-latency-sensitive-applications.html",
    ),
)


def delays_ms() -> dict[str, float]:
    return {d.service: d.ms for d in DELAYS}


class InjectedLatency:
    """Sleeps `delays[service]` ms before each request of that service while `on` (other
    services: no delay), and counts every request by service, on or off.

    install() wraps botocore's `Session.create_client`, so it reaches every client created
    afterwards, whichever session builds it; uninstall() (or leaving the `with`) restores it.
    Clients created before install() are not delayed."""

    def __init__(self, delays: Mapping[str, float] | None = None) -> None:
        self.delays = {k: v / 1000 for k, v in (delays or delays_ms()).items()}
        self.on = False
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._original: Any = None

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        service = event_name.split(".")[1] if event_name.count(".") >= 2 else ""
        with self._lock:
            self.counts[service] += 1
        if self.on:
            delay = self.delays.get(service, 0.0)
            if delay:
                time.sleep(delay)

    def install(self) -> InjectedLatency:
        import botocore.session

        if self._original is not None:
            return self
        original = botocore.session.Session.create_client
        hook = self._before_send

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(session, *args, **kwargs)
            made.meta.events.register("before-send", hook)
            return made

        self._original = original
        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        import botocore.session

        if self._original is not None:
            botocore.session.Session.create_client = self._original  # type: ignore[method-assign]
            self._original = None

    def __enter__(self) -> InjectedLatency:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

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
