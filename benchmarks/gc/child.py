"""The collector in a child process (`collect`), moto in a thread (`InProcessServer`). Only the
standard library at module level: what the child imports is part of what it measures."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

from benchmarks.common import peak_rss_mb, run_child

CLOCK_AHEAD = 2 * 3600  # the collector's clock: past every grace period


def child(config: str) -> dict[str, Any]:
    """Build the store from the environment, as the Lambda does; run the collector per `config`."""
    import tracemalloc

    from vhs.maintenance.gc import GarbageCollector
    from vhs.store import VersionedHybridStore
    from vhs_ops.local.metering import RequestMeter

    options = json.loads(config)
    store = VersionedHybridStore.from_env()
    result: dict[str, Any] = {}
    if options["mode"] != "idle":
        ahead = options["clock_ahead"]
        collector = GarbageCollector(
            store,
            grace=timedelta(0),
            dry_run=options["mode"] == "dry-run",
            clock=lambda: time.time() + ahead,
        )
        meter = RequestMeter(store.bodies.s3, store.index.dynamodb)
        if options["trace"]:
            tracemalloc.start()
        cpu, started = os.times(), time.perf_counter()
        with meter.measure() as requests:
            report = collector.run(options["shards"])
        result["seconds"] = time.perf_counter() - started
        result["cpu_seconds"] = sum(os.times()[:2]) - sum(cpu[:2])
        if options["trace"]:
            result["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        result["report"] = report.as_dict()
        result["requests"] = dict(requests)
        result["expiry"] = collector.lease + collector.marker_expiry  # when it is cleared
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def collect(
    endpoint: str,
    name: str,
    mode: str,
    *,
    trace: bool = False,
    shards: list[str] | None = None,
    clock_ahead: float = CLOCK_AHEAD,
) -> dict[str, Any]:
    """`child` over the store `name`, with the store's defaults; and moto's CPU meanwhile."""
    from vhs import settings
    from vhs_ops.local.stack import DEFAULT_REGION, LOCAL_CREDENTIALS

    dropped = (settings.PREFIX, settings.INLINE_THRESHOLD)
    dropped += (settings.RETAIN_VERSIONS, settings.RETAIN_DAYS)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env |= {**LOCAL_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": DEFAULT_REGION}
    env |= settings.StoreSettings(name, name).environment()
    config = {"mode": mode, "trace": trace, "shards": shards, "clock_ahead": clock_ahead}
    before = os.times()
    result = run_child(__name__, json.dumps(config), env=env, timeout=1800)
    result["moto_cpu_seconds"] = sum(os.times()[:2]) - sum(before[:2])  # all moto's, meanwhile
    return result


class InProcessServer:
    """The local stack's moto (DynamoDB atomic) in a thread, so objects can be seeded into it."""

    def __enter__(self) -> InProcessServer:
        import logging

        from moto.server import ThreadedMotoServer

        from vhs_testing.backends import atomic_inprocess_dynamodb

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._atomic = atomic_inprocess_dynamodb()
        self._atomic.__enter__()
        self._server = ThreadedMotoServer("127.0.0.1", 0, verbose=False)
        self._server.start()
        self.endpoint = "http://{}:{}".format(*self._server.get_host_and_port())
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
        self._atomic.__exit__(*exc)

    @staticmethod
    def s3_backend() -> Any:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    @classmethod
    def drop_store(cls, name: str, dynamodb: Any) -> None:
        """Drop table and bucket `name`, disposing of objects as moto's reset does (or it warns)."""
        bucket = cls.s3_backend().buckets.pop(name)
        for key in bucket.keys.values():
            key.dispose()
        bucket.keys.clear()
        dynamodb.delete_table(TableName=name)
