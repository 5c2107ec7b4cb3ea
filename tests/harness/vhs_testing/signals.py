"""Ctrl-C as a terminal delivers it, whatever the test runner's own SIGINT is.

A command started in the background by a non-interactive shell (`make test &`, CI runners,
`nohup ... &`) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler:
a test of what Ctrl-C does would see nothing happen. These give the code under test the SIGINT
of a foreground job in a terminal.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def restore_ctrl_c() -> None:
    """For subprocess's `preexec_fn`: the child starts with SIGINT's default action, so
    Python raises KeyboardInterrupt on it, as in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def terminal_ctrl_c() -> Iterator[None]:
    """In this process, for the block: SIGINT raises KeyboardInterrupt in the main thread."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
