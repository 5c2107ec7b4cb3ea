"""moto's server, with DynamoDB requests made atomic: the local stack runs this.

moto applies a conditional write as read, check, then write, with no lock, so two concurrent
requests can both pass a condition that only one should (measured: 8 concurrent identical
puts gave up to 4 "stored" outcomes). DynamoDB itself applies each request atomically, and
the store's ordering depends on it, so this server handles DynamoDB requests one at a time.
Other services run concurrently as before: an SQS long poll must never hold up the rest.

It also answers SQS calls from indexes rather than by scanning every message held (moto_sqs.py):
moto's own cost per call grows with the queue's depth, which made a backlog quadratic. And it
writes DynamoDB's responses directly, not through moto's generic serializer (moto_dynamodb.py):
that was half the time of a small put.

    python -m vhs.local.motoserver -H 127.0.0.1 -p PORT
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

_DYNAMODB_TARGET = "DynamoDB_"


class AtomicDynamoDB:
    """WSGI middleware: one DynamoDB request at a time."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith(_DYNAMODB_TARGET):
            return self.app(environ, start_response)
        with self.lock:
            # Build the whole response inside the lock: the write happens while it is made.
            return list(self.app(environ, start_response))


def _cache_module_list() -> None:
    """moto's server names the backend of every request by testing whether its host is one of
    moto's service packages, and lists them afresh each time (a directory listing and ~150
    `isdir` calls per request, under a lock: 8 % of the server's time in a profile of the
    local pipeline). The packages do not change while it serves: list them once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def main(argv: list[str] | None = None) -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    from . import moto_dynamodb
    from .moto_sqs import PATCHED_MOTO_VERSION, install

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument(
        "--moto-sqs",
        action="store_true",
        help="moto's SQS as it is, scanning every message per call (to measure the difference)",
    )
    args = parser.parse_args(argv)
    _cache_module_list()
    moto_dynamodb.install()
    if not args.moto_sqs and not install():
        print(
            f"warning: moto_sqs reproduces moto {PATCHED_MOTO_VERSION}'s SQS, not this "
            "release: serving moto's own, which slows down as queues grow",
            file=sys.stderr,
        )
    # One log line per request is noise here, and a long-lived local stack would write
    # gigabytes of it; warnings and errors still reach stderr.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        AtomicDynamoDB(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
