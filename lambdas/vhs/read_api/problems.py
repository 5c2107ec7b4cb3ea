"""The read API's errors as RFC 9457 problem details (application/problem+json): the problem
types it answers with (documented in docs/read-api.md) and the response that carries one."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from .document import PROBLEM_JSON

# Problem types (RFC 9457 `type`), documented in docs/read-api.md.
INVALID = "urn:vhs:problem:invalid-input"
NOT_FOUND = "urn:vhs:problem:not-found"
NOT_ALLOWED = "urn:vhs:problem:method-not-allowed"
INTERNAL = "urn:vhs:problem:internal"
DAMAGED = "urn:vhs:problem:damaged-item"
# A damaged item is the store's answer failing its checks, not a fault of this function nor of
# the request: 502, the status of an invalid answer from the server behind this one (RFC 9110,
# 15.6.3), distinct from a 500 and, unlike a 4xx, not the client's to fix.
DAMAGED_STATUS = 502


def problem(status: int, type: str, title: str, detail: str, **extra: Any) -> Response:
    body = {"type": type, "title": title, "status": status, "detail": detail, **extra}
    return Response(status, PROBLEM_JSON, json.dumps(body))
