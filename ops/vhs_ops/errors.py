"""The errors the operator side raises that its callers catch: one module, as the library's
are vhs.errors. `describe_error` is how the local stack and the CLI name an error on one line."""

from __future__ import annotations

from typing import Any

from vhs.errors import VhsError


class UsageError(VhsError):
    """A command line argparse refuses: an unknown flag, a bad value, a missing argument."""

    def __init__(self, prog: str, message: str) -> None:
        self.prog = prog
        # argparse's own words: "argument --shard: not a shard: 'zz'".
        named, colon, _ = message.removeprefix("argument ").partition(": ")
        self.field = named if colon and message.startswith("argument ") else None
        super().__init__(f"{message} (see {prog} --help)")


class WrongEvent(ValueError):
    """The event is not the kind the function takes."""


class LocalStackError(RuntimeError):
    """The local stack, or a server of it, could not start, answer or stop."""


class HandOnFailed(Exception):
    """An invocation that a handler handed on (`invoke_async`) failed."""

    def __init__(self, event: dict[str, Any], error: BaseException) -> None:
        super().__init__(f"the invocation handed on with {event} failed: {describe_error(error)}")
        self.event = event
        self.error = error


def describe_error(error: BaseException) -> str:
    """`error` on one line: its type and message. A Powertools batch error (every record of
    a batch failed) is named with its first record's error rather than with the tracebacks
    its message holds."""
    children = getattr(error, "child_exceptions", None)
    if children:
        first = next((e for _, e, _ in children if e is not None), None)
        text = f"all {len(children)} records of the batch failed"
        if first is not None:
            text += f"; the first: {type(first).__name__}: {_flat(str(first))}"
    else:
        text = _flat(str(error))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _flat(text: str) -> str:
    return " ".join(text.split())
