"""Named binary parts of a record: their names, their validation, and the version's manifest.

A record may carry parts beside its body (a scan and its OCR text, a thumbnail and a master).
Each part is stored like a body: content-addressed, inline when small, in S3 otherwise, and
uploaded only when the current version does not already reference it (store.py). A version
with parts is named by the sha256 of its manifest, so that any change to the body or to any
part changes its ordering key, and two puts of the same body and parts are the same version
whatever order the parts were given in (docs/design.md, "Parts").
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..codec import Body, canonical_json, encode_record, sha256_hex
from ..errors import BodyTooLarge, InvalidPart, InvalidRecord, PartTooLarge

# Lower case, so a name means the same in a URL path, a file name and a CLI flag; no "/" and
# no leading "." so it is one safe path segment; 63 characters, a DNS label's length.
PART_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
PART_NAME_PATTERN = f"^{PART_NAME.pattern}$"
MAX_PARTS = 16
# The version of the manifest's layout, hashed with it: a later layout names other versions.
MANIFEST_FORMAT = "vhs-parts/1"


@dataclass(frozen=True)
class PartBody:
    name: str
    body: Body


def part_field(name: str) -> str:
    return f"parts.{name}"


def check_part_name(name: object, field: str = "parts") -> str:
    if not isinstance(name, str) or not PART_NAME.fullmatch(name):
        raise InvalidPart(
            f"part name {name!r} must match {PART_NAME_PATTERN} (lower-case letters, digits, "
            "'.', '_' and '-', at most 63 characters)",
            field,
        )
    return name


def check_part_names(names: Any, field: str = "parts") -> None:
    if len(names) > MAX_PARTS:
        raise InvalidPart(f"{len(names)} parts, more than the limit of {MAX_PARTS}", field)
    for name in names:
        check_part_name(name, field)


def encode_parts(
    parts: Mapping[str, Any] | None, *, max_size: int, field: str = "parts"
) -> tuple[PartBody, ...]:
    """Validate and encode a put's parts: name → bytes, a seekable binary file, or a
    (bytes or file, content type) pair. Sorted by name. Raises InvalidPart naming
    `parts.<name>` (or `parts`)."""
    if parts is None:
        return ()
    if not isinstance(parts, Mapping):
        raise InvalidPart("must be a mapping of part name to bytes or a binary file", field)
    check_part_names(parts, field)
    encoded = []
    for name in sorted(parts):
        value, content_type = parts[name], None
        if isinstance(value, tuple):
            if len(value) != 2:
                raise InvalidPart(
                    "a tuple must be (bytes or file, content type)", f"{field}.{name}"
                )
            value, content_type = value
        encoded.append(
            PartBody(name, encode_part(value, content_type, max_size, f"{field}.{name}"))
        )
    return tuple(encoded)


def encode_part(value: Any, content_type: str | None, max_size: int, field: str) -> Body:
    if not isinstance(value, bytes | bytearray | memoryview | io.IOBase) and not hasattr(
        value, "readinto"
    ):
        raise InvalidPart(
            f"must be bytes or a seekable binary file, not {type(value).__name__}", field
        )
    try:
        return encode_record(
            value,
            content_type,
            max_size=max_size,
            field=field,
            content_type_field=f"{field}.content_type",
        )
    except BodyTooLarge as error:
        raise PartTooLarge(error.size, error.limit, field) from None
    except InvalidRecord as error:
        raise InvalidPart(error.reason, error.field) from None


def manifest_hash(body_sha256: str, body_content_type: str, parts: Any) -> str:
    """The sha256 naming a version with parts: of the canonical JSON of the body's hash and
    content type and the (name, sha256, content type) of every part, sorted by name. `parts`
    are PartBody or StoredPart values."""
    listed = sorted((p.name, *_hash_and_type(p)) for p in parts)
    manifest = {
        "format": MANIFEST_FORMAT,
        "body": [body_sha256, body_content_type],
        "parts": [list(p) for p in listed],
    }
    return sha256_hex(canonical_json(manifest))


def _hash_and_type(part: Any) -> tuple[str, str]:
    if isinstance(part, PartBody):
        return part.body.sha256, part.body.content_type
    return part.content_hash, part.content_type
