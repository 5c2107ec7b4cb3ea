"""Run a VHS Lambda handler in this process, as Lambda would: the Docker-free counterpart of
`sam local invoke`. The event source emulator and `vhs invoke` both use it."""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from vhs.settings import FUNCTIONS
from vhs.shapes import BULK_IMPORT, CHANGES, GC, INGEST, READ_API, REINDEX

from ..errors import HandOnFailed

# The handler modules, by the names the CDK app gives the functions.
HANDLERS = {name: function.module for name, function in FUNCTIONS.items()}


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that Powertools and our handlers read."""

    function_name: str = "vhs-local"
    memory_limit_in_mb: int = 1024
    timeout_seconds: int = 60
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    region: str = "us-east-1"
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/vhs-local"
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_seconds * 1000


class CountdownContext(LambdaContext):
    """Lambda's context object, with the time left counting down to `deadline`
    (time.monotonic()), as an event source's invocation sees it."""

    def __init__(self, deadline: float, **kw: Any) -> None:
        super().__init__(**kw)
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def load_handler(name: str) -> Any:
    """The `handler` function of a VHS Lambda ("ingest", or a module path)."""
    # The handlers are importable: vhs_ops.local puts the asset's folder on the path.
    module = importlib.import_module(HANDLERS.get(name, name))
    return module.handler


class HandingOnContext(CountdownContext):
    """The context of `invoke`: the time left counts down from the function's configured
    timeout, and an event the handler hands on to a fresh invocation of itself
    (`invoke_async`, the garbage collector's continuation) is queued to run in this process
    once the invocation returns, as Lambda would run it."""

    def __init__(self, queue: list[dict[str, Any]], timeout_seconds: int, **kw: Any) -> None:
        super().__init__(time.monotonic() + timeout_seconds, timeout_seconds=timeout_seconds, **kw)
        self._queue = queue

    def invoke_async(self, event: dict[str, Any]) -> None:
        self._queue.append(event)


def _shape(name: str) -> Any:
    shapes = {"ingest": INGEST, "changes": CHANGES, "gc": GC, "read-api": READ_API}
    return {**shapes, "reindex": REINDEX, "import": BULK_IMPORT}.get(name)


def configured_timeout(name: str) -> int:
    """The timeout the CDK app configures for the function `name` (vhs.shapes' shapes,
    which infra/function.py deploys); 60 s for a module path."""
    shape = _shape(name)
    return shape.function_timeout_seconds if shape is not None else 60


def configured_memory(name: str) -> int:
    """The memory the CDK app configures for the function `name`; 1024 MB for a module path."""
    shape = _shape(name)
    return shape.function_memory_mb if shape is not None else LambdaContext.memory_limit_in_mb


def invoke(
    name: str,
    event: Any,
    context: LambdaContext | None = None,
    *,
    timeout_seconds: int | None = None,
    on_handed_on: Callable[[dict[str, Any], Any], None] | None = None,
    on_handed_on_error: Callable[[dict[str, Any], BaseException], None] | None = None,
) -> Any:
    """Run the handler on `event`, and then every invocation it hands on (each with a fresh
    context whose time counts down from `timeout_seconds`, by default the function's
    configured timeout). Returns the first invocation's response, as Lambda returns it to
    the caller; `on_handed_on(event, response)` is told of the others. A handed-on
    invocation that raises is reported to `on_handed_on_error(event, error)` and the rest
    still run (Lambda runs each asynchronous invocation on its own); without that callback
    it raises HandOnFailed once they have all run."""
    handler = load_handler(name)
    queue: list[dict[str, Any]] = []
    timeout = configured_timeout(name) if timeout_seconds is None else timeout_seconds
    if timeout <= 0:
        raise ValueError(f"a timeout must be a positive number of seconds, not {timeout}")

    def fresh() -> LambdaContext:
        return HandingOnContext(
            queue,
            timeout,
            function_name=f"vhs-{name}",
            memory_limit_in_mb=configured_memory(name),
            log_group_name=f"/aws/lambda/vhs-{name}",
        )

    response = handler(event, context or fresh())
    failed: HandOnFailed | None = None
    while queue:
        handed_on = queue.pop(0)
        try:
            answer = handler(handed_on, fresh())
        except Exception as error:
            if on_handed_on_error is None:
                failed = failed or HandOnFailed(handed_on, error)
            else:
                on_handed_on_error(handed_on, error)
            continue
        if on_handed_on is not None:
            on_handed_on(handed_on, answer)
    if failed is not None:
        raise failed
    return response


@contextlib.contextmanager
def output_to(stream: TextIO) -> Iterator[TextIO]:
    """Send what a handler writes to `stream` for the duration, as Lambda sends a function's
    output to its log, not to the caller: print(), Powertools' EMF metrics (printed when
    flushed) and every logger that writes to standard output (Powertools' Logger holds the
    stream it was built with). Yields the standard output it replaced, where the response
    goes."""
    saved = sys.stdout
    originals = {id(saved), id(sys.__stdout__)}
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    repointed = []
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and id(handler.stream) in originals:
                repointed.append((handler, handler.setStream(stream)))
    sys.stdout = stream
    try:
        yield saved
    finally:
        sys.stdout = saved
        for handler, previous in repointed:
            if previous is not None:
                handler.setStream(previous)
