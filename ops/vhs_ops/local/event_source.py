"""What the local event sources share: the SQS one (sqs_source.py) and the DynamoDB Streams one
(stream_source.py) poll in daemon threads, invoke a real handler as Lambda does, and read its
ReportBatchItemFailures response; the local pipeline and change feed that run them start the
function in this process with its environment.

* `Background`: work in daemon threads, with start()/stop()/`with`, `running`, and `check()`
  to raise what stopped a thread (the DLQ alarm evaluator runs on it too);
* `EventSource`: one invocation as Lambda makes it (a context whose remaining time counts
  down, a handler that raises or runs past its timeout fails the whole batch), and
  `reported_failures`, the part of reading a response that both kinds of source share;
* `LocalFunction`: start()/stop()/`with` for a function run by an event source, its handler
  loaded (or given) with the function's environment set and, optionally, its output sent to a
  log file (function_logs.py).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Self, TypeVar

from vhs.settings import FunctionSpec

from .function_logs import function_output
from .invoke import CountdownContext, load_handler
from .process_environment import environment

Handler = Callable[[dict[str, Any], Any], Any]
Outcome = TypeVar("Outcome")


# --- threads ------------------------------------------------------------------------------


class Background:
    """Work in daemon threads (`_workers`: their names and targets). A thread that raises
    stops the others (`_stopping`), and `check()` raises what stopped it."""

    kind = "background work"  # in check()'s message
    stop_timeout = 120.0

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._failure: BaseException | None = None

    def _workers(self) -> list[tuple[str, Callable[[], None]]]:
        raise NotImplementedError

    def _failed(self) -> None:
        """Called in a thread that raised, once its failure is recorded."""

    def start(self) -> Self:
        if self._threads:
            raise RuntimeError("already started")
        self._stopping.clear()
        self._threads = [
            threading.Thread(target=self._guard(target), name=name, daemon=True)
            for name, target in self._workers()
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(self.stop_timeout if timeout is None else timeout)
        self._threads = []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def check(self) -> None:
        """Raise what stopped a thread, if anything did."""
        if self._failure is not None:
            raise RuntimeError(f"the {self.kind} stopped") from self._failure

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as error:  # surfaced by check()
                self._failure = error
                self._stopping.set()
                self._failed()

        return run


# --- invoking -----------------------------------------------------------------------------


def malformed(response: Any) -> str:
    return f"malformed response: {str(response)[:200]}"


def reported_failures(response: Any, identifiers: list[str]) -> list[str] | None:
    """The item identifiers a ReportBatchItemFailures response lists, as Lambda reads it:
    [] for complete success (None, an empty response, an empty or null
    `batchItemFailures`), None for a malformed response (one of another shape, or an
    identifier that is empty, null, under another key or not in the batch: the whole batch
    fails)."""
    if response is None or response == {} or response == "":
        return []
    failures = response.get("batchItemFailures") if isinstance(response, dict) else response
    if failures is None:
        return []
    if isinstance(failures, list):
        known = set(identifiers)
        listed = [f.get("itemIdentifier") if isinstance(f, dict) else None for f in failures]
        if all(isinstance(i, str) and i in known for i in listed):
            return listed  # type: ignore[return-value]  # every one a str, checked above
    return None


@dataclass(kw_only=True)
class Invoked:
    """One invocation of the function, as an event source saw it: what every source records
    (each adds what its batches are made of)."""

    request_id: str
    error: str | None  # the handler raised, timed out or answered malformed
    seconds: float


class Call(NamedTuple):
    """One invocation of the handler, settled."""

    request_id: str
    outcome: Any  # what the source's settle function made of the response
    error: str | None  # the handler raised, timed out or answered malformed
    seconds: float


class EventSource(Background):
    """An event source mapping's invocations: the handler is called with ``{"Records": ...}``
    and a context whose remaining time counts down to the function's timeout."""

    kind = "event source"
    handler: Handler
    function_name: str
    function_timeout: float
    memory_mb: int = 1024  # LambdaContext's default
    region: str

    def _call(
        self,
        records: list[dict[str, Any]],
        settle: Callable[[Any], tuple[Outcome, str | None]],
        whole_batch: Outcome,
    ) -> Call:
        """Invoke the handler on `records`: the outcome is `settle(response)`, or
        `whole_batch` when the handler raised or ran past its timeout (Lambda would have
        stopped it: the batch fails, whatever it did)."""
        request_id = str(uuid.uuid4())
        started = time.monotonic()
        context = CountdownContext(
            started + self.function_timeout,
            function_name=self.function_name,
            memory_limit_in_mb=self.memory_mb,
            timeout_seconds=int(self.function_timeout),
            aws_request_id=request_id,
            region=self.region,
            log_group_name=f"/aws/lambda/{self.function_name}",
        )
        error: str | None = None
        try:
            outcome, error = settle(self.handler({"Records": records}, context))
        except Exception as raised:
            outcome, error = whole_batch, f"{type(raised).__name__}: {raised}"
        seconds = time.monotonic() - started
        if seconds > self.function_timeout and error is None:
            outcome, error = whole_batch, f"Task timed out after {seconds:.1f} seconds"
        return Call(request_id, outcome, error, seconds)


# --- the function, run locally ------------------------------------------------------------


class LocalFunction:
    """start()/stop()/`with` for a function an event source runs locally. `_start` builds
    what runs on the ExitStack it is given; a failure closes what it had entered."""

    handler: Handler | None
    module: Any
    _exit: contextlib.ExitStack | None

    def _start(self, running: contextlib.ExitStack) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        running = contextlib.ExitStack()
        try:
            self._start(running)
        except BaseException:
            running.close()
            raise
        self._exit = running
        return self

    def stop(self) -> None:
        if self._exit is not None:
            self._exit.close()
            self._exit = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _load(
        self,
        running: contextlib.ExitStack,
        function: FunctionSpec,
        env: dict[str, str],
        function_log: Path | None = None,
    ) -> Handler:
        """Set the function's environment for as long as it runs, and load its handler unless
        one was given. The handler builds what it needs from that environment at its first
        invocation (handlers.observability.PerEnvironment), never from an earlier stack's."""
        running.enter_context(environment(env))
        if self.handler is None:
            handler = load_handler(function.module)
            self.module = importlib.import_module(handler.__module__)
            if function_log is not None:
                running.enter_context(function_output(function_log, self.module))
            self.handler = handler
        elif function_log is not None:
            running.enter_context(function_output(function_log))
        return self.handler
