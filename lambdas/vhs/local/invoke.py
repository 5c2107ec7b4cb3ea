"""Run a VHS Lambda handler in this process, as Lambda would: the Docker-free counterpart of
`sam local invoke`. The event source emulator and `vhs invoke` both use it."""

from __future__ import annotations

import importlib
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..resources import CHANGES, GC, INGEST
from ..settings import FUNCTIONS

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
    lambdas = str(Path(__file__).resolve().parent.parent)
    if lambdas not in sys.path:  # the handlers live beside the vhs package, in the asset
        sys.path.insert(0, lambdas)
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


def configured_timeout(name: str) -> int:
    """The timeout the CDK app configures for the function `name`."""
    shapes = {"ingest": INGEST, "changes": CHANGES, "gc": GC}
    return shapes[name].function_timeout_seconds if name in shapes else 60


def invoke(
    name: str,
    event: dict[str, Any],
    context: LambdaContext | None = None,
    *,
    on_handed_on: Callable[[dict[str, Any], Any], None] | None = None,
) -> Any:
    """Run the handler on `event`, and then every invocation it hands on (each with a fresh
    context). Returns the first invocation's response, as Lambda returns it to the caller;
    `on_handed_on(event, response)` is told of the others."""
    handler = load_handler(name)
    queue: list[dict[str, Any]] = []

    def fresh() -> LambdaContext:
        return HandingOnContext(queue, configured_timeout(name), function_name=f"vhs-{name}")

    response = handler(event, context or fresh())
    while queue:
        handed_on = queue.pop(0)
        answer = handler(handed_on, fresh())
        if on_handed_on is not None:
            on_handed_on(handed_on, answer)
    return response
