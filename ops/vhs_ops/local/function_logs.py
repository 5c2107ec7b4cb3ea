"""A local function's output, routed as Lambda routes it: what the function's threads write
(Powertools' JSON logs and EMF metrics) goes to its log file, as Lambda sends it to
CloudWatch Logs, and the main thread's output stays on the console. The local pipeline writes
its function's log with `function_output`; `make demo` and the end-to-end test read it back
with `read_function_log`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


class RoutedOutput(io.TextIOBase):
    """sys.stdout or sys.stderr while the pipeline runs: what the main thread writes goes to
    the console, what the function's threads write (Powertools' JSON logs and EMF metrics) to
    its log file, as Lambda sends a function's output to CloudWatch Logs."""

    def __init__(self, console: TextIO, sink: TextIO, console_threads: set[int]) -> None:
        self.console = console
        self.sink = sink
        self.console_threads = console_threads

    def _target(self) -> TextIO:
        return self.console if threading.get_ident() in self.console_threads else self.sink

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        # io's finalizer flushes too, possibly after the pipeline closed the log file.
        target = self._target()
        if not target.closed:
            target.flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        return self._target().fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target(), "encoding", "utf-8")


@contextlib.contextmanager
def function_output(log_path: Path, module: Any = None) -> Iterator[TextIO]:
    """Send the function's output to `log_path` for the duration (see RoutedOutput). Loggers
    that `module` built before the routing began (they hold the stream they were given) are
    pointed at the log too."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    console_threads = {threading.main_thread().ident or 0}
    with open(log_path, "a", encoding="utf-8", buffering=1) as sink:
        saved = sys.stdout, sys.stderr
        sys.stdout = RoutedOutput(saved[0], sink, console_threads)  # type: ignore[assignment]
        sys.stderr = RoutedOutput(saved[1], sink, console_threads)  # type: ignore[assignment]
        repointed = []
        for value in vars(module).values() if module is not None else ():
            handler = getattr(value, "registered_handler", None)  # a Powertools Logger
            if handler is not None and hasattr(handler, "setStream"):
                repointed.append((handler, handler.setStream(sink)))
        try:
            yield sink
        finally:
            for handler, previous in repointed:
                handler.setStream(previous)
            sys.stdout, sys.stderr = saved


def read_function_log(log_path: Path) -> Iterator[dict[str, Any]]:
    """The JSON lines of a function log (Powertools log records and EMF blobs)."""
    if not log_path.exists():
        return
    with open(log_path, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    yield json.loads(line)
