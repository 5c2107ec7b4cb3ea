"""The GC benchmark's two processes: the collector in a child process of its own, and the moto
server it collects from, in a thread of the benchmark's process.

The child runs this file (`python benchmarks/gc_process.py --child CONFIG`). Only the standard
library is imported at module level: what the child imports is part of what it measures.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REGION = "us-east-1"
# The collector's clock runs this far ahead, so every object is past any grace period.
CLOCK_AHEAD = 2 * 3600
CHILD_TIMEOUT = 1800


# --- The collector, in a child process ------------------------------------------------------


def child(config: dict[str, Any]) -> dict[str, Any]:
    """Run in the child: build the store from the environment (as the Lambda does), run the
    collector over `shards` (every shard by default) with its clock `clock_ahead` seconds
    ahead, and report its peak memory and the requests it sent, by operation. `mode` "idle"
    builds the store and stops: the fixed cost of a collector process."""
    import tracemalloc

    from vhs.local.metering import RequestMeter
    from vhs.maintenance.gc import GarbageCollector
    from vhs.store import VersionedHybridStore

    store = VersionedHybridStore.from_env()
    result: dict[str, Any] = {}
    if config["mode"] != "idle":
        ahead = config.get("clock_ahead", CLOCK_AHEAD)
        collector = GarbageCollector(
            store,
            grace=timedelta(0),
            dry_run=config["mode"] == "dry-run",
            clock=lambda: time.time() + ahead,
        )
        # Counting is a handler on botocore's request-created event: a dict increment per
        # request, next to the milliseconds moto takes to answer it.
        meter = RequestMeter(store.bodies.s3, store.index.dynamodb)
        if config["trace"]:
            tracemalloc.start()
        cpu = os.times()
        started = time.perf_counter()
        with meter.measure() as requests:
            report = collector.run(config.get("shards"))
        result["seconds"] = time.perf_counter() - started
        after = os.times()
        result["cpu_seconds"] = (after.user + after.system) - (cpu.user + cpu.system)
        if config["trace"]:
            result["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        result["report"] = report.as_dict()
        result["requests"] = dict(requests)
        # How long after its deadline a condemnation is cleared: lease + marker expiry.
        result["expiry"] = collector.lease + collector.marker_expiry
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def peak_rss_mb() -> float:
    """This process's peak resident set size. Not ru_maxrss: Linux carries that over exec
    from the forked copy of the parent, so a child of a big parent would report the parent's
    size. VmHWM belongs to the process's own memory since exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024


def child_environment(endpoint: str, table: str, bucket: str) -> dict[str, str]:
    """The child's environment: this process's, less any store settings it has, with the local
    stack's credentials, the endpoint, and a store (vhs.settings) that names only `table` and
    `bucket`, so the collector runs with the store's defaults."""
    from vhs import settings
    from vhs.local.stack import LOCAL_CREDENTIALS

    store = settings.StoreSettings(table, bucket)
    dropped = (
        settings.PREFIX,
        settings.INLINE_THRESHOLD,
        settings.RETAIN_VERSIONS,
        settings.RETAIN_DAYS,
    )
    return {
        **{name: value for name, value in os.environ.items() if name not in dropped},
        **LOCAL_CREDENTIALS,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        **store.environment(),
    }


def run_child(
    endpoint: str,
    table: str,
    bucket: str,
    *,
    mode: str,
    trace: bool,
    shards: list[str] | None = None,
    clock_ahead: float = CLOCK_AHEAD,
) -> dict[str, Any]:
    """Run the collector (`child`) in a process of its own and return what it reports, with
    the CPU this process spent serving moto meanwhile."""
    import subprocess

    env = child_environment(endpoint, table, bucket)
    config = json.dumps(
        {"mode": mode, "trace": trace, "shards": shards, "clock_ahead": clock_ahead}
    )
    before = os.times()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", config],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"the collector process failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # This process does nothing but serve moto while it waits for the child.
    result["moto_cpu_seconds"] = (after.user + after.system) - (before.user + before.system)
    return result


# --- moto, in this process ------------------------------------------------------------------


class InProcessServer:
    """The local stack's moto server (vhs.local.motoserver: moto's app with atomic DynamoDB
    requests), served from a thread of this process rather than a child process, so that the
    bulk of the objects can be put straight into moto's S3 backend: over HTTP moto spends about
    3 ms of CPU on each PutObject, which would make populating 100k objects take longer than
    the whole benchmark may. The collector still reaches it over HTTP, from its own process."""

    def __init__(self) -> None:
        from vhs.local.stack import free_port

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: Any = None

    def __enter__(self) -> InProcessServer:
        import logging
        import threading

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        from vhs.local.motoserver import AtomicDynamoDB

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        app = AtomicDynamoDB(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)

    @classmethod
    def drop_bucket(cls, name: str) -> None:
        """Drop a bucket, disposing of its objects as moto's own reset does (moto warns about
        every object garbage-collected undisposed)."""
        bucket = cls.s3_backend().buckets.pop(name)
        for key in bucket.keys.values():
            key.dispose()
        bucket.keys.clear()

    @staticmethod
    def s3_backend() -> Any:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


if __name__ == "__main__":
    # The child: make lambdas/ (for `vhs`) importable, run the collector, print its result.
    ROOT = Path(__file__).resolve().parent.parent
    for _path in (ROOT, ROOT / "lambdas"):
        if str(_path) not in sys.path:
            sys.path.insert(0, str(_path))
    if sys.argv[1:2] != ["--child"] or len(sys.argv) != 3:
        sys.exit("usage: gc_process.py --child CONFIG (run by benchmarks/gc.py)")
    print(json.dumps(child(json.loads(sys.argv[2]))))
