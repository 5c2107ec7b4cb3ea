"""moto's DynamoDB results written as JSON directly, rather than through moto's serializer.

moto 5.2 writes every response through a generic, shape-driven serializer that visits every
possible member of every AttributeValue: about half the time of a put of a small item (its
GetItem and UpdateItem) on in-process moto, so half the time of a test or a local pipeline
that makes thousands of them. A DynamoDB result is already the dict of the JSON document, so
this writes it as the serializer would: None members left out, binary values in base64, times
in epoch seconds cut to the millisecond. tests/local/test_emulator_responses.py checks that every
kind of request the store makes parses to the same response either way.

The local stack's server installs it (motoserver.py), and the tests' in-process moto.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import datetime
import json
from collections.abc import Iterator
from typing import Any

_JSON = {"Content-Type": "application/x-amz-json-1.0"}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items() if inner is not None}
    if isinstance(value, list):
        return [_plain(inner) for inner in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return calendar.timegm(value.timetuple()) + value.microsecond // 1000 / 1000
    return value


def _direct(self: Any, context: Any) -> tuple[int, dict[str, str], str]:
    return 200, dict(_JSON), json.dumps(_plain(self.result))


def install() -> None:
    """For the rest of the process (the local stack's server)."""
    from moto.dynamodb.responses import DynamoResult

    DynamoResult.execute_result = _direct  # type: ignore[method-assign]


@contextlib.contextmanager
def direct_responses() -> Iterator[None]:
    """Inside the block only (in-process moto, whose patches end with the test)."""
    from moto.dynamodb.responses import DynamoResult

    original = DynamoResult.execute_result
    DynamoResult.execute_result = _direct  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoResult.execute_result = original  # type: ignore[method-assign]
