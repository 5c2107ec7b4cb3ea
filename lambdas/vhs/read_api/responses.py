"""How the read API sends a version's (or a part's) bytes: the headers that name the version,
the budget of a response, and the body encoded as a function URL's response carries it.

A Lambda response carries at most 6 MB, and binary bodies travel base64 (4/3 larger):
`response_limit()` is the budget of the encoded body, so a body is redirected when its base64
form would exceed it. Text bodies travel as JSON strings when that is no larger than the
budget (escaping may exceed 4/3), else base64.
"""

from __future__ import annotations

import base64
import json

from aws_lambda_powertools.event_handler import Response

from .. import settings
from ..model import Record, StoredVersion
from ..shapes import LAMBDA_RESPONSE_PAYLOAD_BYTES, READ_API

# A Lambda function URL's response payload may be 6 MB (6,291,456 bytes) of JSON: the body
# plus the status, headers and JSON framing. 64 KiB of that is left to the rest, so a body's
# encoded form may take the remainder; base64 makes 3 bytes 4, so binary bodies up to
# 4,669,440 bytes come back in the response and larger ones are redirected.
DEFAULT_RESPONSE_LIMIT = LAMBDA_RESPONSE_PAYLOAD_BYTES - 64 * 1024
# Text content types travel as JSON strings in the response; everything else as base64.
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")
_TEXT_SUFFIXES = ("+json", "+xml")


def presign_seconds() -> int:
    return settings.whole_number(settings.READ_API_PRESIGN_SECONDS, READ_API.presign_seconds)


def response_limit() -> int:
    return settings.whole_number(settings.READ_API_RESPONSE_LIMIT, DEFAULT_RESPONSE_LIMIT)


def base64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


def version_headers(number: int, content_hash: str, what: StoredVersion | Record) -> dict[str, str]:
    return {
        "ETag": f'"{content_hash}"',
        "X-Vhs-Version": str(number),
        "X-Vhs-Updated-At": what.updated_at.isoformat(),
        # Revalidate every time (a 304 costs one item read and no body): the latest changes,
        # and a retained version may stop being retained.
        "Cache-Control": "private, no-cache",
    }


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether an If-None-Match header names `etag` (RFC 9110: weak comparison, a list, or
    *)."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


def body_response(body: bytes, content_type: str, limit: int, headers: dict[str, str]) -> Response:
    """A 200 carrying `body` as the function URL's response carries it: a text body as a
    string when its JSON form (how Lambda serialises the response, non-ASCII escaped) fits
    `limit`, otherwise base64. Encoded here, whatever the content type: Powertools would
    serialise or decode a body with a JSON content type that is not a string."""
    if is_text(content_type):
        try:
            text = body.decode()
        except UnicodeDecodeError:
            text = None
        if text is not None and len(json.dumps(text)) <= limit:
            return Response(200, content_type, text, headers)
    response = Response(200, content_type, base64.b64encode(body).decode(), headers)
    response.base64_encoded = True
    return response


def is_text(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.startswith(_TEXT_TYPES) or media.endswith(_TEXT_SUFFIXES)
