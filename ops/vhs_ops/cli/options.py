"""The types of the command line's options (argparse's `type=`), checked as they are parsed."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from vhs.changes.reindex import validate_page_size, validate_rate, validate_segments
from vhs.errors import InvalidInput


def number(convert: Callable[[str], Any], check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """An option's type: `convert` the text (int or float), then `check` the value, which
    returns it or raises InvalidInput. Every numeric option is checked so, before anything
    runs: a value out of range is exit 2 naming the option, never replaced by a default."""
    kind = "whole number" if convert is int else "number"

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind}: {text!r}") from None
        try:
            return check(value)
        except InvalidInput as error:
            raise argparse.ArgumentTypeError(error.reason) from None

    return parse


def between(least: int, most: int | None = None, unit: str = "") -> Callable[[int], int]:
    """A check for `number`: at least `least` and, if given, at most `most`."""

    def check(value: int) -> int:
        if value < least or (most is not None and value > most):
            allowed = f"{least} or more" if most is None else f"{least}..{most:,}{unit}"
            raise InvalidInput("", f"must be {allowed}, not {value}")
        return value

    return check


def shard(text: str) -> str:
    """One of the 256 shards of the body keys, as written in them."""
    from vhs.keys import all_shards

    if text not in all_shards():
        raise argparse.ArgumentTypeError(f"not a shard: {text!r} (two lowercase hex digits, 00-ff)")
    return text


positive = number(int, between(1))
non_negative = number(int, between(0))
# Lambda's range of timeouts.
seconds = number(int, between(1, 900, " seconds (Lambda's range)"))
# 0: a free port, chosen when the stack starts.
port = number(int, between(0, 65535))
# Scan's own bounds, as the reindex worker and the state machine check them.
segments = number(int, validate_segments)
rate = number(float, validate_rate)
page_size = number(int, validate_page_size)
