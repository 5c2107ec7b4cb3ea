"""Turning records into stored bodies and back.

A JSON record is serialised canonically (sorted keys, no spaces, UTF-8), so the same record
always has the same bytes and the same content hash, whichever producer sent it. Opaque bodies
(bytes, or a seekable binary file for bodies too large to hold in memory) are stored as given.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from .errors import BodyTooLarge, InvalidRecord
from .strict_json import MAX_DEPTH, nests_deeper, parse_document, too_deep_reason

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"
MAX_CONTENT_TYPE_LENGTH = 255
# A media type as RFC 9110 writes it (8.3.1): type "/" subtype *( OWS ";" OWS [ name "=" value ] ),
# names and types tokens (5.6.2), a value a token or a quoted string (5.6.4), ASCII only (no
# obs-text): a value that can be sent as a Content-Type header as it is.
# 1*tchar: an RFC 9110 token (named by its characters: bandit reads a "token" name as a secret).
_TCHARS = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED_STRING = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
# The shipped JSON Schema (schemas/ingest-message.schema.json) carries it as
# ^(?:MEDIA_TYPE_PATTERN)$, which a test checks.
MEDIA_TYPE_PATTERN = (
    rf"{_TCHARS}/{_TCHARS}(?:[ \t]*;[ \t]*(?:{_TCHARS}=(?:{_TCHARS}|{_QUOTED_STRING}))?)*"
)
_MEDIA_TYPE = re.compile(MEDIA_TYPE_PATTERN)
MAX_BODY_SIZE = 5 * 1024**3  # S3's largest object
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class Body:
    """A body ready to store: its size, sha256, content type, and either bytes or a file."""

    size: int
    sha256: str
    content_type: str
    data: bytes | None = None
    file: BinaryIO | None = None

    def chunks(self, chunk_size: int = _CHUNK) -> Iterator[bytes]:
        if self.data is not None:
            view = memoryview(self.data)
            for start in range(0, len(view), chunk_size):
                yield bytes(view[start : start + chunk_size])
            return
        if self.file is None:
            raise ValueError("a Body holds either data or a file")
        self.file.seek(0)
        while chunk := self.file.read(chunk_size):
            yield chunk

    def read_all(self) -> bytes:
        return self.data if self.data is not None else b"".join(self.chunks())


def encode_record(
    record: Any,
    content_type: str | None,
    *,
    max_size: int,
    field: str = "record",
    content_type_field: str = "content_type",
) -> Body:
    """Validate and encode a record. Raises InvalidRecord (naming `field`, or
    `content_type_field`) on bad input."""
    if content_type is not None:
        check_content_type(content_type, content_type_field)
    if isinstance(record, bytes | bytearray | memoryview):
        data = bytes(record)
        _check_size(len(data), max_size, field)
        if content_type == JSON_CONTENT_TYPE:
            # Bytes that claim to be JSON are held to the rules of a record, as they stand:
            # every reader (diffs, patches, the read API) can then read them.
            parse_document(data, field)
        return Body(len(data), sha256_hex(data), content_type or BINARY_CONTENT_TYPE, data=data)
    if isinstance(record, io.IOBase) or hasattr(record, "readinto"):
        return _encode_file(record, content_type, max_size, field)
    data = canonical_json(record, field)
    _check_size(len(data), max_size, field)
    return Body(len(data), sha256_hex(data), content_type or JSON_CONTENT_TYPE, data=data)


def canonical_json(record: Any, field: str = "record") -> bytes:
    """`record` as canonical JSON. Raises InvalidRecord naming `field` for a value JSON
    cannot hold, and for a record nested deeper than strict_json.MAX_DEPTH, which the
    serialised text tells on every Python (the interpreter's own limit differs by version)."""
    try:
        text = json.dumps(
            record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        data = text.encode("utf-8")
    except RecursionError:
        raise InvalidRecord(too_deep_reason(), field) from None
    except (TypeError, ValueError) as error:  # UnicodeEncodeError: an unpaired surrogate
        raise InvalidRecord(f"cannot be serialised as JSON: {error}", field) from None
    if nests_deeper(text, MAX_DEPTH):
        raise InvalidRecord(too_deep_reason(), field)
    return data


def _encode_file(file: Any, content_type: str | None, max_size: int, field: str) -> Body:
    if not (hasattr(file, "seek") and file.seekable()):
        raise InvalidRecord("a file body must be a seekable binary file", field)
    digest = hashlib.sha256()
    size = 0
    file.seek(0)
    while chunk := file.read(_CHUNK):
        if not isinstance(chunk, bytes):
            raise InvalidRecord("a file body must be opened in binary mode", field)
        size += len(chunk)
        _check_size(size, max_size, field)
        digest.update(chunk)
    return Body(size, digest.hexdigest(), content_type or BINARY_CONTENT_TYPE, file=file)


def _check_size(size: int, max_size: int, field: str) -> None:
    if size > max_size:
        raise BodyTooLarge(size, max_size, field)


def is_media_type(value: object) -> bool:
    """Whether `value` is a content type VHS stores and serves: an ASCII media type by RFC
    9110's syntax, at most MAX_CONTENT_TYPE_LENGTH characters."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_CONTENT_TYPE_LENGTH
        and _MEDIA_TYPE.fullmatch(value) is not None
    )


def check_content_type(content_type: object, field: str = "content_type") -> str:
    """`content_type` if it is a media type (is_media_type); else InvalidRecord naming
    `field`."""
    if not isinstance(content_type, str) or not content_type.strip():
        raise InvalidRecord("must be a non-empty string", field)
    if not is_media_type(content_type):
        raise InvalidRecord(
            "must be an ASCII media type as RFC 9110 writes it (type/subtype, then ';'"
            " name=value parameters, a value a token or a quoted string), at most "
            f"{MAX_CONTENT_TYPE_LENGTH} characters: {content_type[:80]!r}",
            field,
        )
    return content_type


def served_content_type(content_type: str | None) -> str:
    """The Content-Type a stored body or part is served with: its own, when it is a media
    type (is_media_type), else application/octet-stream (a content type stored before they
    were checked, which a header must not carry)."""
    return content_type if is_media_type(content_type) else BINARY_CONTENT_TYPE


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
