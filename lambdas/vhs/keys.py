"""Record ids and where their bodies live in S3.

Body keys have the form ``{prefix}/{shard}/{encoded id}/{sha256}``:

* ``shard`` is the first two hex digits of sha256(id): 256 evenly filled prefixes, so keys
  spread over S3 partitions and garbage collection can work one shard at a time;
* ``encoded id`` keeps letters, digits, ``-`` and ``_`` (and printable non-ASCII letters) as
  they are, and percent-encodes every other character as UTF-8 bytes. ``/``, ``.`` and ``%``
  are always encoded, so no id can make a path segment like ``..`` or collide with another id;
* an encoding longer than `MAX_ENCODED_ID_BYTES` is cut and followed by ``~`` and a digest of
  the whole id. ``~`` is always percent-encoded in the readable form, so a cut form can never
  equal another id's readable form;
* ``sha256`` is the hex digest of the body: the key names its content, so an object is never
  overwritten with other content.

`parse_body_key` reads a key back, and recognises exactly the keys `body_key` makes for a
prefix: the garbage collector judges nothing else (other stores in the bucket, other data).

Valid ids are 1 to `MAX_ID_LENGTH` Unicode code points, not only whitespace, with no control
characters and no unpaired surrogates.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote, unquote

from .errors import InvalidId, InvalidInput

MAX_ID_LENGTH = 256
# S3 keys may be 1,024 bytes. 512 leaves room for a prefix of up to 400 bytes, the shard and
# the 64-character digest.
MAX_ENCODED_ID_BYTES = 512
MAX_PREFIX_BYTES = 400
SHARD_COUNT = 256
# The characters no id may hold, as inclusive code point ranges: control characters (Unicode
# category Cc, a fixed set) and unpaired surrogates (Cs).
_SURROGATES = (0xD800, 0xDFFF)
_FORBIDDEN_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), _SURROGATES)
# Text that ends here: no character follows. Unlike "$", which Python's re also lets match
# before a final newline; the same in ECMA 262, Python and Rust regexes.
END = r"(?![\s\S])"


def _char_class(ranges: list[tuple[int, int]]) -> str:
    """A regex character class of `ranges` in one spelling that ECMA 262 (with the u flag),
    Python and Rust (jsonschema-rs) regexes read alike: \\uXXXX in the BMP, the character
    itself above it (ECMA has no \\U, Python no \\u{...})."""

    def char(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)

    return "[" + "".join(f"{char(first)}-{char(last)}" for first, last in ranges) + "]"


ID_FORBIDDEN = re.compile(_char_class(list(_FORBIDDEN_RANGES)))

_ASCII_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# Non-ASCII characters of these categories are kept as they are (S3 keys are UTF-8). Others
# (format, private use, unassigned, separators) are percent-encoded so keys stay printable.
_KEPT_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No"})


def validate_id(id: object, field: str = "id") -> str:
    if not isinstance(id, str):
        raise InvalidId(f"must be a string, not {type(id).__name__}", field)
    if not id:
        raise InvalidId("must not be empty", field)
    if len(id) > MAX_ID_LENGTH:
        raise InvalidId(f"is {len(id)} characters long, over the maximum of {MAX_ID_LENGTH}", field)
    if id.isspace():
        raise InvalidId("must not be only whitespace", field)
    forbidden = ID_FORBIDDEN.search(id)
    if forbidden:
        char, position = forbidden.group(), forbidden.start()
        if unicodedata.category(char) == "Cs":
            raise InvalidId(f"contains an unpaired surrogate at {position}", field)
        raise InvalidId(f"contains control character U+{ord(char):04X} at {position}", field)
    return id


def id_pattern() -> str:
    """`validate_id`'s rules on the characters as one regex (ECMA 262 with the u flag, Python
    and Rust alike, for JSON Schema): not only whitespace (str.isspace's characters, spelled
    out, since the dialects' \\s differ), and none of the forbidden characters. The surrogates
    are not named: Rust's regexes refuse a pattern that names one, and no id that names them
    can be sent, since a URL carries an id as UTF-8, which has no encoding for a surrogate.
    The class is negated: a fuzzer builds a class of the allowed million code points one by
    one (hypothesis takes 20 s a strategy), the forbidden few in no time. Lengths are
    MAX_ID_LENGTH's."""
    spaces = "".join(f"\\u{c:04x}" for c in range(0x10000) if chr(c).isspace())
    forbidden = _char_class([r for r in _FORBIDDEN_RANGES if r != _SURROGATES])
    return rf"^(?![{spaces}]*{END})[^{forbidden[1:-1]}]*{END}"


def validate_version(version: object, field: str = "version") -> int:
    """A version number: a whole number >= 1 (not a bool)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput(field, "must be a whole number >= 1")
    return version


def _keep(char: str) -> bool:
    if char in _ASCII_SAFE:
        return True
    return ord(char) > 0x7F and unicodedata.category(char) in _KEPT_CATEGORIES


def encode_id(id: str) -> str:
    """The S3 path segment for an id: readable, reversible when short, always unambiguous."""
    readable = "".join(char if _keep(char) else quote(char, safe="") for char in id)
    # quote() leaves "." and "~" alone; encode them so that ".." and the "~" marker never occur.
    readable = readable.replace(".", "%2E").replace("~", "%7E")
    if len(readable.encode()) <= MAX_ENCODED_ID_BYTES:
        return readable
    digest = hashlib.sha256(id.encode()).hexdigest()[:32]
    budget = MAX_ENCODED_ID_BYTES - len(digest) - 1
    cut = readable.encode()[:budget].decode("utf-8", errors="ignore")
    # Never leave half a %XX escape at the cut.
    tail = cut.rfind("%")
    if tail != -1 and tail > len(cut) - 3:
        cut = cut[:tail]
    return f"{cut}~{digest}"


def decode_id(segment: str) -> str | None:
    """The id of a readable segment, or None when the segment is a cut, digest form."""
    if "~" in segment:
        return None
    return unquote(segment)


def shard_of(id: str) -> str:
    return hashlib.sha256(id.encode()).hexdigest()[:2]


def all_shards() -> list[str]:
    return [f"{n:02x}" for n in range(SHARD_COUNT)]


def validate_prefix(prefix: str) -> str:
    cleaned = prefix.strip("/")
    if len(cleaned.encode()) > MAX_PREFIX_BYTES:
        raise InvalidId(f"longer than {MAX_PREFIX_BYTES} bytes", "prefix")
    if any(unicodedata.category(c) == "Cc" for c in cleaned):
        raise InvalidId("contains a control character", "prefix")
    return cleaned


def body_key(prefix: str, id: str, content_hash: str) -> str:
    parts = [prefix] if prefix else []
    parts += [shard_of(id), encode_id(id), content_hash]
    return "/".join(parts)


def shard_prefix(prefix: str, shard: str) -> str:
    return f"{prefix}/{shard}/" if prefix else f"{shard}/"


# --- reading a key back ---------------------------------------------------------------------
_SHARD = re.compile(r"[0-9a-f]{2}")
# A sha256 hex digest: what a content hash (and the read API's ETag) is.
CONTENT_HASH = re.compile(r"[0-9a-f]{64}")
# The tail of a cut segment: "~" and 32 hex digits of sha256(id). The cut part never holds "~".
_CUT_TAIL = re.compile(r"~[0-9a-f]{32}")


class BodyKey(NamedTuple):
    """A key `parse_body_key` recognised as the body key of one of a store's records."""

    shard: str
    segment: str  # the encoded id, exactly as in the key
    id: str | None  # None when the segment is cut: the id is in the object's `vhs-id` metadata
    content_hash: str

    def with_cut_id(self, id: str) -> BodyKey | None:
        """For a cut segment: this key with the id its object's metadata names, or None when
        that id would not have been stored under this key (a different or invalid id)."""
        if self.id is not None or not _names(id, self.shard, self.segment):
            return None
        return self._replace(id=id)


def _names(id: str, shard: str, segment: str) -> bool:
    try:
        validate_id(id)
    except InvalidId:
        return False
    return encode_id(id) == segment and shard_of(id) == shard


def parse_body_key(prefix: str, key: str) -> BodyKey | None:
    """The parts of `key` if it is a body key `body_key(prefix, ...)` may have made, else None.

    The key must be exactly `prefix` and "/" (nothing when the prefix is ""), then a shard
    (two lowercase hex digits), the encoded id and the content hash (64 lowercase hex digits):
    three segments, no more. A readable segment must be the canonical encoding of a valid id
    (`encode_id(decode_id(segment)) == segment`) whose shard is the key's, so that a
    recognised key is always `body_key(prefix, id, content_hash)`. A cut segment (it holds
    "~") must end in "~" and 32 hex digits; its id is not in the key (`id` is None) and must be
    confirmed from the object's metadata with `BodyKey.with_cut_id`.

    Keys of another store in the same bucket (another prefix, "de" beside "" say), or of
    anything else, are None.
    """
    if prefix:
        if not key.startswith(prefix + "/"):
            return None
        key = key[len(prefix) + 1 :]
    parts = key.split("/")
    if len(parts) != 3:
        return None
    shard, segment, content_hash = parts
    if not (_SHARD.fullmatch(shard) and CONTENT_HASH.fullmatch(content_hash)):
        return None
    if "~" in segment:
        cut = len(segment.encode()) <= MAX_ENCODED_ID_BYTES and segment.count("~") == 1
        if not (cut and _CUT_TAIL.fullmatch(segment[-33:])):
            return None
        return BodyKey(shard, segment, None, content_hash)
    id = decode_id(segment)
    if id is None or not _names(id, shard, segment):
        return None
    return BodyKey(shard, segment, id, content_hash)


# --- the metadata of a body object --------------------------------------------------------
# A body object names its record in S3 metadata, so that an id cut in its key (encode_id) can
# be recovered by the collector and `vhs verify`. S3 metadata is ASCII and at most 2 KB:
# base64url holds any id of up to 256 characters.
ID_METADATA = "vhs-id"
UPDATED_AT_METADATA = "vhs-updated-at"


def body_metadata(id: str, updated_at: str) -> dict[str, str]:
    encoded = base64.urlsafe_b64encode(id.encode()).decode()
    return {ID_METADATA: encoded, UPDATED_AT_METADATA: updated_at}


def id_in_metadata(metadata: Mapping[str, str] | None) -> str | None:
    """The raw `vhs-id` value of an object's metadata, or None when it has none."""
    return (metadata or {}).get(ID_METADATA)


def decode_metadata_id(encoded: str) -> str | None:
    """The id a `vhs-id` value names, or None when it is not base64url of UTF-8."""
    try:
        return base64.urlsafe_b64decode(encoded.encode()).decode()
    except (binascii.Error, ValueError):
        return None
