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

It answers owner.OWNER_PATH with the stack that started it (`--owner`), so that a port one
stack holds is refused naming it, and it exits when the process that started it has gone:
a stack killed outright (kill -9, OOM) leaves no server holding its port.

    python -m vhs_ops.local.motoserver -H 127.0.0.1 -p PORT [--owner JSON]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .owner import OWNER_PATH, OWNER_SERVICE

_DYNAMODB_TARGET = "DynamoDB_"
# How often the server looks whether the process that started it is still there.
PARENT_CHECK_SECONDS = 0.5


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


class Owner:
    """WSGI middleware: OWNER_PATH answers the owner document, and this server's pid."""

    def __init__(self, app: Callable[..., Iterable[bytes]], owner: dict[str, Any]) -> None:
        self.app = app
        self.body = json.dumps({**owner, "service": OWNER_SERVICE, "server_pid": os.getpid()})

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") != OWNER_PATH:
            return self.app(environ, start_response)
        body = self.body.encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]


def _exit_with_parent() -> None:
    """Exit once the process that started this server has gone (it is then re-parented)."""
    parent = os.getppid()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(PARENT_CHECK_SECONDS):
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="vhs-parent-watch", daemon=True).start()


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
    parser.add_argument(
        "--owner", type=json.loads, default={}, help="the owner document (JSON) to answer"
    )
    args = parser.parse_args(argv)
    _exit_with_parent()
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
        Owner(AtomicDynamoDB(app), args.owner),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
