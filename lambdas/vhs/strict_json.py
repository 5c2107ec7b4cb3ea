"""Strict JSON: I-JSON (RFC 7493) and one nesting limit, with the place of every refusal.

Python's json module accepts what another consumer would read differently (duplicate keys,
NaN and Infinity, numbers beyond a double, unpaired surrogates, a byte order mark, UTF-16),
and how deep it nests depends on the interpreter. So every JSON the store takes is parsed
here instead: a message body or claim-check payload (`parse_json_body`, refusals naming the
top-level field they occur in), and a JSON record given as text or bytes (`parse_document`:
`body_base64` with application/json, `vhs put`, `store.put`). Every reader of a stored JSON
body parses it here too (diffs, the change feed's patches), so that what a door would refuse
is read as "not JSON", with the reason, never as an error of its own.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import InvalidMessage, InvalidRecord

MAX_S3_KEY_BYTES = 1024
# Python's own limit on converting digits to an int (sys.int_info.default_max_str_digits).
MAX_INTEGER_DIGITS = 4300
# The deepest a JSON record may nest, counting each array and object one level (`[]` is 1,
# `{"a": [1]}` is 2). Every door refuses a record nested deeper, with the same reason on every
# Python, and every reader handles anything within it. It is the store's own number because
# the interpreter's is none: Python 3.11's json gives up near 1,000 levels (its recursion
# limit), 3.14's near 64,000 (the real stack). 64 leaves a notification or a diff that carries
# a whole record at its deepest (3 levels more) within the defaults of common parsers (Ruby's
# 100, Rust's serde_json 128), and Python's recursion limit far above what a reader uses.
MAX_DEPTH = 64


def json_type(value: Any) -> str:
    """A value's type in JSON's words, for reasons a producer in any language can read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def field_label(name: str) -> str:
    """A field name as it can appear in vhs-error-field: as is when short and printable,
    otherwise JSON-escaped and cut, so that a hostile name (NUL, an unpaired surrogate,
    100 KB) still fits a message attribute SQS accepts."""
    if 0 < len(name) <= 64 and name.isprintable():
        return name
    escaped = json.dumps(name)
    return escaped if len(escaped) <= 64 else escaped[:61] + "..."


def document_field(field_prefix: str) -> str:
    """The name of a whole document: "body" for a message, "payload" for a claim check's."""
    return field_prefix.rstrip(".") or "body"


class _Refused:
    """Put in the parsed tree in place of a value the contract refuses, so that the error
    can say where it is (json's hooks are told the value, not its place)."""

    __slots__ = ("duplicate", "reason")

    def __init__(self, reason: str, duplicate: str | None = None) -> None:
        self.reason = reason
        self.duplicate = duplicate


# A lone \uD800-\uDFFF escape (one not part of a pair), or a surrogate code point in a str
# given by a Python caller. It only decides whether to look for the place; the walk decides.
_LONE_SURROGATE_HINT = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    "|[\ud800-\udfff]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NONZERO_DIGIT = re.compile(r"[1-9]")
_BOM = "\ufeff"


def too_deep_reason() -> str:
    return f"nests deeper than {MAX_DEPTH} levels, the most a JSON record may"


# A JSON string (its escapes whole), a bracket, and whether a string is an object's key.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"[\[{][\]}]")
_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")(\s*:)?|[\[\]{}]', re.S)


def nests_deeper(text: str, levels: int) -> bool:
    """Whether JSON text nests arrays and objects more than `levels` deep, read from the text
    before any parser recurses into it. (Text that is not JSON may answer either way; the
    parser refuses it.)"""
    if text.count("[") + text.count("{") <= levels:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    # Each round takes away the innermost pairs, so it takes as many rounds as levels.
    for _ in range(levels):
        if not brackets:
            return False
        brackets = _INNERMOST.sub("", brackets)
    return bool(brackets)


def _too_deep_key(text: str, levels: int) -> str | None:
    """The top-level key whose value nests past `levels` (an object's levels count from the
    document), or None when it is not under one."""
    depth, key = 0, None
    for match in _TOKEN.finditer(text):
        if match.group(1) is not None:
            if depth == 1 and match.group(2):
                key = match.group(1)
            continue
        if match.group() in "[{":
            depth += 1
            if depth > levels:
                return json.loads(key) if key is not None else None
        else:
            depth -= 1
    return None


def parse_document(data: str | bytes, field: str = "record") -> Any:
    """A JSON record given as text or bytes (a body that claims application/json), read by
    the rules of the ingest contract: I-JSON, at most MAX_DEPTH levels. Raises InvalidRecord
    naming `field`, its reason saying where in the document."""
    try:
        return _parse(data, field, levels=MAX_DEPTH, whole=field)
    except InvalidMessage as error:
        raise InvalidRecord(error.reason, field) from None


def parse_json_body(text: str | bytes, field_prefix: str = "") -> Any:
    """Parse a message body (str, as SQS delivers it) or a claim-check payload (bytes from
    S3) as I-JSON, its record at most MAX_DEPTH levels deep. Raises InvalidMessage naming the
    top-level field at fault, or the whole document ("body", or "payload" with field_prefix
    "payload.")."""
    # The message is an object around its record: one level more.
    return _parse(text, field_prefix, levels=MAX_DEPTH + 1)


def _parse(text: str | bytes, field_prefix: str, *, levels: int, whole: str | None = None) -> Any:
    """`text` as I-JSON within `levels`. Errors name the top-level field at fault, prefixed
    with `field_prefix`; or, with `whole`, always the field `whole`, saying where inside."""
    document = whole or document_field(field_prefix)
    text = _readable(text, document, field_prefix, levels=levels, whole=whole)
    hooks = _Hooks()
    try:
        parsed = _loads(text, document, hooks.of_values())
    except _IntegerTooLong:
        # Rare, so only now parse again with a hook on every integer (it halves the speed),
        # to find where the integer is.
        parsed = _loads(text, document, {**hooks.of_values(), "parse_int": hooks.integer})
    if hooks.refused or _LONE_SURROGATE_HINT.search(text):
        problem = _first_problem(parsed, field_prefix, whole)
        if problem is not None:
            raise problem
    return parsed


def _readable(
    text: str | bytes, document: str, field_prefix: str, *, levels: int, whole: str | None
) -> str:
    """`text` as a str, once it is known to be UTF-8, without a byte order mark, and no
    deeper than `levels` (errors named as `_parse` names them)."""
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            # Strict UTF-8: json.loads(bytes) would also take UTF-16 and UTF-32, skip a BOM
            # and decode encoded surrogates ("surrogatepass").
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            bad = error.object[error.start]
            raise InvalidMessage(
                document, f"not UTF-8: byte 0x{bad:02x} at offset {error.start}"
            ) from None
    if text.startswith(_BOM):
        raise InvalidMessage(document, "starts with a byte order mark (U+FEFF): send none")
    if nests_deeper(text, levels):
        key = None if whole else _too_deep_key(text, levels)
        field = document if key is None else field_prefix + field_label(key)
        raise InvalidMessage(field, too_deep_reason())
    return text


class _Hooks:
    """json.loads's hooks for what I-JSON refuses and json takes: each puts a `_Refused` in
    the tree in the value's place, and notes that it did, so that the walk for the place
    runs only when there is one to find."""

    def __init__(self) -> None:
        self.refused = False

    def of_values(self) -> dict[str, Any]:
        """The hooks of every parse (`integer` only when an integer is too long for int)."""
        return {
            "parse_constant": self.constant,
            "parse_float": self.number,
            "object_pairs_hook": self.unique,
        }

    def refuse(self, reason: str, duplicate: str | None = None) -> _Refused:
        self.refused = True
        return _Refused(reason, duplicate)

    def constant(self, name: str) -> _Refused:
        return self.refuse(f"{name} is not valid JSON")

    def number(self, literal: str) -> float | _Refused:
        value = float(literal)
        shown = literal if len(literal) <= 32 else literal[:29] + "..."
        if math.isinf(value):
            return self.refuse(f"{shown} is out of range of a double")
        if value == 0 and _NONZERO_DIGIT.search(literal.lower().partition("e")[0]):
            return self.refuse(f"{shown} is too small for a double (it would read as 0)")
        return value

    def unique(self, pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Refused:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                return self.refuse(f"duplicate key {field_label(key)!r}", key)
            seen.add(key)
        raise AssertionError("unreachable: dict() dropped a pair without a duplicate key")

    def integer(self, literal: str) -> int | _Refused:
        digits = len(literal.lstrip("-"))
        if digits > MAX_INTEGER_DIGITS:
            return self.refuse(f"an integer of {digits} digits is too large")
        return int(literal)


class _IntegerTooLong(Exception):
    pass


def _loads(text: str, document: str, hooks: dict[str, Any]) -> Any:
    try:
        return json.loads(text, **hooks)
    except RecursionError:
        # Not reached within MAX_DEPTH (nests_deeper comes first); kept so that no stack
        # shallower than Python's own can make a parse fail any other way.
        raise InvalidMessage(document, too_deep_reason()) from None
    except json.JSONDecodeError as error:
        raise InvalidMessage(
            document, f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except ValueError:
        # int() refuses more than MAX_INTEGER_DIGITS digits (CVE-2020-10735's limit).
        raise _IntegerTooLong from None


def _first_problem(
    document: Any, field_prefix: str, whole: str | None = None
) -> InvalidMessage | None:
    """The first refused value or unpaired surrogate in document order, as an error."""

    def error_at(path: tuple[str | int, ...], reason: str, duplicate: str | None = None):
        if whole is not None:
            place = path if duplicate is None else (*path, duplicate)
            where = f", at {_render_path(place)}" if place else ""
            return InvalidMessage(whole, reason + where)
        return _error_at(path, reason, field_prefix, duplicate)

    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Refused):
            return error_at(path, value.reason, value.duplicate)
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return error_at(path, "contains an unpaired surrogate")
        elif isinstance(value, dict):
            for key in value:
                if _SURROGATE.search(key):
                    return error_at((*path, key), "is a key with an unpaired surrogate")
            stack.extend((item, (*path, key)) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, (*path, n)) for n, item in reversed(list(enumerate(value))))
    return None


def _error_at(
    path: tuple[str | int, ...], reason: str, field_prefix: str, duplicate: str | None = None
) -> InvalidMessage:
    if not path:
        # A duplicate key of the message itself: name that field.
        if duplicate is not None:
            return InvalidMessage(field_prefix + field_label(duplicate), reason)
        return InvalidMessage(document_field(field_prefix), reason)
    head = path[0]
    if isinstance(head, str) and len(path) == 1:
        return InvalidMessage(field_prefix + field_label(head), reason)
    field = (
        field_prefix + field_label(head) if isinstance(head, str) else document_field(field_prefix)
    )
    return InvalidMessage(field, f"{reason}, at {_render_path(path)}")


def _render_path(path: tuple[str | int, ...]) -> str:
    parts = []
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif _IDENTIFIER.fullmatch(step):
            parts.append(f".{step}" if parts else step)
        else:
            parts.append(f"[{field_label(step)}]")
    rendered = "".join(parts)
    return rendered if len(rendered) <= 200 else rendered[:197] + "..."
