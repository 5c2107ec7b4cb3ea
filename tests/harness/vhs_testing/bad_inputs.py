"""The bad-input corpus: what a hostile or sloppy producer sends, and what VHS must do with it.

Each case is an SQS message body as a producer sends it (with attributes, and any objects it
needs staged in S3 first), in one of four categories (id, timestamp, body, message), and the
handling it must get:

* `Rejected`: dead-lettered once, with `vhs-error-field` naming the field and a reason that
  contains the fragment; through the library, a typed `InvalidInput` naming the field, and
  nothing written;
* `Accepted`: hostile-looking but valid (ids are opaque, so `../../etc/passwd` is an id like
  any other): stored, read back identically, and its body's S3 key stays in the
  `{shard}/{encoded id}/{sha256}` layout.

`STORE_CALLS` gives the same bad values as a library caller passes them to
`VersionedHybridStore.put`. Objects and bodies name the staging bucket and the store's own
bucket with the tokens STAGING and BODIES, replaced by a run's names (`Case.resolve`).
tests/system/test_bad_input.py runs every case through the library and the real ingest handler;
`python -m vhs_testing.bad_input_pipeline` prints the handling of each as a markdown table.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vhs import keys
from vhs.errors import InvalidId
from vhs.ingest.staging import CLAIM_CHECK_ATTRIBUTES
from vhs.strict_json import MAX_DEPTH

STAGING = "STAGING-BUCKET-TOKEN"
BODIES = "BODIES-BUCKET-TOKEN"
# The test stack's staging prefix (deployed stacks use incoming/), so that escaping it can be tried.
STAGING_PREFIX = "staging/"
# Small limits, configured for these runs, so that "over the maximum size" is cheap to send.
MAX_BODY_BYTES = 64 * 1024  # the store's max_body_size
MAX_PAYLOAD_BYTES = 128 * 1024  # VHS_MAX_PAYLOAD_BYTES: a claim check's payload
T = "2026-11-01T09:00:00Z"
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
CATEGORIES = ("id", "timestamp", "body", "message")
# Over the default inline threshold (8 KiB) and incompressible: such a body goes to S3.
S3_SIZED = 12 * 1024


@dataclass(frozen=True)
class Rejected:
    field: str  # vhs-error-field, and InvalidInput.field
    reason: str  # a fragment of vhs-error-message
    error_type: str = "InvalidMessage"

    def describe(self) -> str:
        return f"rejected: `{self.field}`"


@dataclass(frozen=True)
class Accepted:
    id: str
    body: Any  # bytes: the stored body, byte for byte; otherwise the JSON value read back

    def describe(self) -> str:
        return "accepted safely"


@dataclass(frozen=True)
class Case:
    name: str
    category: str
    body: str  # the SQS message body, as sent
    expected: Rejected | Accepted
    shows: str  # the input, short, for the report
    note: str  # why this handling
    attributes: dict[str, Any] = field(default_factory=dict)  # SendMessage MessageAttributes
    staged: dict[str, bytes] = field(default_factory=dict)  # staging key -> object

    def resolve(self, staging_bucket: str, body_bucket: str) -> tuple[str, dict[str, bytes]]:
        """The message body and staged objects, naming a run's buckets."""

        def names(text: str) -> str:
            return text.replace(STAGING, staging_bucket).replace(BODIES, body_bucket)

        staged = {
            key: data.replace(STAGING.encode(), staging_bucket.encode()).replace(
                BODIES.encode(), body_bucket.encode()
            )
            for key, data in self.staged.items()
        }
        return names(self.body), staged


@dataclass(frozen=True)
class StoreCall:
    """One bad (or hostile but valid) value as a library caller passes it to
    `VersionedHybridStore.put(id, record, updated_at=...)`; the rest is valid."""

    id: Any
    record: Any
    updated_at: Any = T


# --- building cases -----------------------------------------------------------------------


def message(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)


def opaque(name: str, size: int = S3_SIZED) -> bytes:
    """Incompressible bytes, the same for a name every time."""
    return random.Random(name).randbytes(size)


def pointer(key: str, bucket: str = STAGING) -> str:
    return json.dumps([POINTER_CLASS, {"s3BucketName": bucket, "s3Key": key}])


def flagged(size: int) -> dict[str, Any]:
    """The Extended Client's claim-check attribute."""
    return {CLAIM_CHECK_ATTRIBUTES[0]: {"DataType": "Number", "StringValue": str(size)}}


def shown(value: Any, limit: int = 48) -> str:
    """A value for the report: printable text as is, anything else JSON-escaped."""
    readable = isinstance(value, str) and value.isprintable()
    text = json.dumps(value, ensure_ascii=not readable)
    return text if len(text) <= limit else text[: limit - 3] + "..."


CASES: list[Case] = []
STORE_CALLS: dict[str, StoreCall] = {}


def add(case: Case, store_call: StoreCall | None = None) -> None:
    CASES.append(case)
    if store_call is not None:
        STORE_CALLS[case.name] = store_call


def id_case(name: str, value: Any, expected: Rejected | None, note: str) -> None:
    """A bad id is rejected; a hostile valid one is stored with an S3-sized body, so that its
    key is built from the id."""
    if expected is None:
        body = opaque(name)
        encoded = base64.b64encode(body).decode()
        add(
            Case(
                name,
                "id",
                message(id=value, updated_at=T, body_base64=encoded),
                Accepted(value, body),
                f"id {shown(value)}",
                note,
            ),
            StoreCall(value, body),
        )
        return
    add(
        Case(
            name,
            "id",
            message(id=value, updated_at=T, record={"title": name}),
            expected,
            f"id {shown(value)}",
            note,
        ),
        StoreCall(value, {"title": name}),
    )


def timestamp_case(
    name: str, value: Any, expected: Rejected | None, note: str, library: Any = None
) -> None:
    record = {"title": name}
    add(
        Case(
            name,
            "timestamp",
            message(id=name, updated_at=value, record=record),
            expected or Accepted(name, record),
            f"updated_at {shown(value)}",
            note,
        ),
        StoreCall(name, record, library if library is not None else value),
    )


def raw_record(name: str, record_text: str) -> str:
    """A message whose record is given as JSON text (for what json.dumps cannot write)."""
    return f'{{"id": "{name}", "updated_at": "{T}", "record": {record_text}}}'


def claim_check(
    name: str,
    category: str,
    payload: bytes,
    expected: Rejected | Accepted,
    shows: str,
    note: str,
) -> None:
    key = f"{STAGING_PREFIX}claim-checks/{name}.json"
    add(
        Case(
            name,
            category,
            pointer(key),
            expected,
            shows,
            note,
            attributes=flagged(len(payload)),
            staged={key: payload},
        )
    )


def payload(**fields: Any) -> bytes:
    return message(**fields).encode()


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


# --- ids ----------------------------------------------------------------------------------

id_case("id-empty", "", Rejected("id", "must not be empty"), "An id names a record.")
id_case(
    "id-257-characters",
    "b" * 257,
    Rejected("id", "over the maximum of 256"),
    "Ids are 1-256 code points, so the key and the DynamoDB item stay bounded.",
)
id_case(
    "id-only-spaces",
    "   ",
    Rejected("id", "only whitespace"),
    "Blank ids are producer bugs, never names.",
)
id_case(
    "id-only-unicode-spaces",
    "\u3000\u00a0\u2003",
    Rejected("id", "only whitespace"),
    "Ideographic, no-break and em spaces are whitespace too.",
)
id_case(
    "id-nul",
    "b1\u0000",
    Rejected("id", "control character U+0000"),
    "Control characters truncate or corrupt ids in logs, shells and C strings.",
)
id_case(
    "id-newline",
    "b1\n",
    Rejected("id", "control character U+000A"),
    "A trailing newline from a line reader would make a second, invisible record.",
)
id_case(
    "id-c1-control",
    "b1\u0085",
    Rejected("id", "control character U+0085"),
    "C1 controls (NEL here) are control characters too.",
)
add(
    Case(
        "id-unpaired-surrogate",
        "id",
        f'{{"id": "b1\\ud800", "updated_at": "{T}", "record": {{}}}}',
        Rejected("id", "unpaired surrogate"),
        'id "b1\\ud800"',
        "Not a Unicode character: it cannot be encoded into a key or sent to SQS.",
    ),
    StoreCall("b1\ud800", {}),
)
id_case(
    "id-number",
    1234,
    Rejected("id", "must be a string"),
    "Ids are strings: 1234 and 1234.0 and 01234 would otherwise be one id or three.",
)
id_case("id-null", None, Rejected("id", "must be a string"), "null is no id.")
id_case("id-array", ["b1"], Rejected("id", "must be a string"), "Composite ids must be joined.")
add(
    Case(
        "id-missing",
        "id",
        message(updated_at=T, record={}),
        Rejected("id", "is required"),
        "no id",
        "Every message names its record.",
    )
)
id_case(
    "id-256-emoji",
    "\U0001f600" * 256,
    None,
    "256 code points (1 KiB of UTF-8) is the maximum: the key's id segment is cut at 512 "
    "bytes and ends in a digest of the whole id.",
)
id_case(
    "id-256-dots",
    "." * 256,
    None,
    "Every . is percent-encoded (%2E), so no key segment is . or ..; the long form is cut "
    "and ends in a digest.",
)
id_case(
    "id-ark-with-slashes",
    "ark:/13030/tf5p30086k",
    None,
    "ARK and DOI identifiers contain slashes; / is encoded (%2F), so the id is one segment.",
)
id_case("id-dot-dot", "..", None, "Encoded as %2E%2E: never a parent-directory segment.")
id_case(
    "id-path-traversal",
    "../../etc/passwd",
    None,
    "An id, not a path: stored under its shard as one encoded segment.",
)
id_case(
    "id-absolute-path",
    "/etc/passwd",
    None,
    "A leading / is encoded, so it cannot empty a segment or restart the key.",
)
id_case(
    "id-backslash-traversal",
    "..\\..\\windows\\win.ini",
    None,
    "Backslashes are encoded too (%5C).",
)
id_case("id-latin", "\u00c6sop", None, "Non-ASCII letters are kept readable in the key.")
id_case(
    "id-rtl-override",
    "\u202egpj.exe",
    None,
    "U+202E would reorder text when shown; format characters are percent-encoded in keys.",
)
id_case(
    "id-zero-width-space",
    "b1\u200b",
    None,
    "A distinct id from b1 (ids are opaque); encoded as %E2%80%8B in the key.",
)
id_case(
    "id-decomposed-unicode",
    "Ae\u0301sop",
    None,
    "NFD is not normalised: producers' ids are kept exactly, so it reads back as sent.",
)
id_case(
    "id-percent-escapes",
    "a%2F..%2Fb",
    None,
    "% is encoded (%25), so an id that looks encoded never decodes into a different id.",
)
id_case(
    "id-tilde-digest-marker",
    "b1~0123456789abcdef0123456789abcdef",
    None,
    "~ marks a cut key segment; it is encoded in readable ids, so they never look cut.",
)

# --- timestamps ---------------------------------------------------------------------------

timestamp_case(
    "ts-naive",
    "2026-11-01T09:00:00",
    Rejected("updated_at", "a timezone is required"),
    "Without an offset the instant is unknown, and ordering depends on it.",
    library=datetime(2026, 11, 1, 9),
)
timestamp_case(
    "ts-date-only",
    "2026-11-01",
    Rejected("updated_at", "a date without a time"),
    "Two updates on one day would tie.",
)
timestamp_case(
    "ts-epoch-seconds",
    1793523600,
    Rejected("updated_at", "RFC 3339 string"),
    "Seconds or milliseconds? Numbers are refused rather than guessed.",
)
timestamp_case(
    "ts-epoch-millis-string",
    "1793523600000",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "An epoch in a string is still not RFC 3339.",
)
timestamp_case(
    "ts-far-future",
    "2999-01-01T00:00:00Z",
    Rejected("updated_at", "in the future"),
    "It would make every real update of the id stale for ever.",
)
timestamp_case(
    "ts-year-9999-behind-utc",
    "9999-12-31T23:00:00-05:00",
    Rejected("updated_at", "out of range once converted to UTC"),
    "Was an OverflowError: retried five times, then redriven without a reason.",
)
timestamp_case(
    "ts-year-1-ahead-of-utc",
    "0001-01-01T00:30:00+01:00",
    Rejected("updated_at", "out of range once converted to UTC"),
    "Was an OverflowError, as above.",
)
timestamp_case(
    "ts-year-999",
    "0999-12-31T23:59:59Z",
    Rejected("updated_at", "before 1000"),
    "Stored timestamps are fixed-width so that string order is time order.",
)
timestamp_case(
    "ts-word",
    "yesterday",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Malformed.",
)
timestamp_case(
    "ts-february-30",
    "2026-02-30T00:00:00Z",
    Rejected("updated_at", "not a valid date and time"),
    "Well-formed but not a date.",
)
timestamp_case(
    "ts-leap-second",
    "2026-12-31T23:59:60Z",
    Rejected("updated_at", "leap seconds"),
    "RFC 3339 allows :60; Python's datetime cannot hold it, so it is refused by name.",
)
timestamp_case(
    "ts-iso-basic-format",
    "20261101T090000Z",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "ISO 8601 but not RFC 3339; was accepted, though the shipped schema refuses it.",
)
timestamp_case(
    "ts-iso-week-date",
    "2026-W44-7T09:00:00Z",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Was accepted (as 2026-11-01): a week date is not RFC 3339.",
)
timestamp_case(
    "ts-no-seconds",
    "2026-11-01T09:00Z",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Was accepted; RFC 3339 requires seconds.",
)
timestamp_case(
    "ts-offset-without-colon",
    "2026-11-01T09:00:00+0100",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Was accepted; RFC 3339 offsets are +hh:mm.",
)
timestamp_case(
    "ts-padded",
    " 2026-11-01T09:00:00Z ",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Was accepted (stripped); the schema refuses it, so the handler does too.",
)
timestamp_case(
    "ts-fullwidth-digits",
    "\uff12\uff10\uff12\uff16-11-01T09:00:00Z",
    Rejected("updated_at", "not an RFC 3339 timestamp"),
    "Only ASCII digits: regular expressions' \\d would take any script's.",
)
timestamp_case(
    "ts-boolean",
    True,
    Rejected("updated_at", "not bool"),
    "A boolean is not a time (nor, in Python, an int here).",
)
timestamp_case(
    "ts-100k-characters",
    "2026-11-01T09:00:00." + "0" * 100_000 + "Z",
    Rejected("updated_at", "characters long"),
    "Refused by length before parsing; the reason does not echo 100 KB.",
)
add(
    Case(
        "ts-null",
        "timestamp",
        message(id="ts-null", updated_at=None, record={}),
        Rejected("updated_at", "is required"),
        "updated_at null",
        "Every write needs its ordering timestamp.",
    )
)
timestamp_case(
    "ts-nanoseconds",
    "2026-11-01T09:00:00.123456789Z",
    None,
    "Java's Instant writes nanoseconds: accepted, cut to microseconds (never rounded up).",
)
timestamp_case(
    "ts-lower-case-t-and-z",
    "2026-11-01t09:00:00z",
    None,
    "RFC 3339 section 5.6 allows lower-case t and z.",
)
timestamp_case(
    "ts-unknown-local-offset",
    "2026-11-01T09:00:00-00:00",
    None,
    "RFC 3339's 'offset unknown' form; the instant is UTC.",
)

# --- bodies -------------------------------------------------------------------------------

add(
    Case(
        "body-empty-base64",
        "body",
        message(id="body-empty-base64", updated_at=T, body_base64=""),
        Accepted("body-empty-base64", b""),
        'body_base64 ""',
        "An empty file is a valid opaque body: stored, and read back as zero bytes.",
    ),
    StoreCall("body-empty-base64", b""),
)
add(
    Case(
        "body-empty-staged-object",
        "body",
        message(
            id="body-empty-staged-object",
            updated_at=T,
            record_location=f"s3://{STAGING}/{STAGING_PREFIX}bodies/empty.bin",
        ),
        Accepted("body-empty-staged-object", b""),
        "record_location of a 0-byte object",
        "As above, through S3.",
        staged={f"{STAGING_PREFIX}bodies/empty.bin": b""},
    )
)
claim_check(
    "body-empty-payload",
    "body",
    b"",
    Rejected("payload", "not valid JSON"),
    "claim check to a 0-byte payload",
    "A payload must be a message.",
)
claim_check(
    "body-truncated-payload",
    "body",
    b'{"id": "body-truncated-payload", "updated_at": "2026-11-01T09:00:00Z", "rec',
    Rejected("payload", "not valid JSON"),
    "claim check to truncated JSON",
    "Invalid JSON behind a pointer names the payload.",
)
add(
    Case(
        "body-nan",
        "body",
        raw_record("body-nan", '{"price": NaN}'),
        Rejected("record", "NaN is not valid JSON, at record.price"),
        '"record": {"price": NaN}',
        "Python's json reads NaN; JSON has none. Was refused only by the store, so "
        "validate_message (and vhs send) let it through.",
    ),
    StoreCall("body-nan", {"price": float("nan")}),
)
add(
    Case(
        "body-infinity",
        "body",
        raw_record("body-infinity", "[1, -Infinity]"),
        Rejected("record", "-Infinity is not valid JSON, at record[1]"),
        '"record": [1, -Infinity]',
        "As NaN.",
    ),
    StoreCall("body-infinity", [1, float("-inf")]),
)
add(
    Case(
        "body-number-overflow",
        "body",
        raw_record("body-number-overflow", '{"n": 1e400}'),
        Rejected("record", "1e400 is out of range of a double"),
        '"record": {"n": 1e400}',
        "Python reads it as infinity; refused where it is.",
    )
)
add(
    Case(
        "body-5000-digit-integer",
        "body",
        raw_record("body-5000-digit-integer", '{"n": ' + "9" * 5000 + "}"),
        Rejected("record", "an integer of 5000 digits is too large, at record.n"),
        '"record": {"n": 999...9 (5000 digits)}',
        "Over Python's 4300-digit limit; the reason used to tell producers to call "
        "sys.set_int_max_str_digits.",
    )
)
add(
    Case(
        "body-64-bit-overflow-integer",
        "body",
        raw_record("body-64-bit-overflow-integer", '{"n": 18446744073709551616}'),
        Accepted("body-64-bit-overflow-integer", {"n": 18446744073709551616}),
        '"record": {"n": 2^64}',
        "Big integers within the limit are kept exactly, not rounded to a double.",
    ),
    StoreCall("body-64-bit-overflow-integer", {"n": 2**64}),
)
add(
    Case(
        "body-number-underflow",
        "body",
        raw_record("body-number-underflow", '{"n": 1e-400}'),
        Rejected("record", "1e-400 is too small for a double (it would read as 0), at record.n"),
        '"record": {"n": 1e-400}',
        "Python reads it as 0: a number is stored as the double it denotes, and this one has none.",
    )
)
add(
    Case(
        "body-nested-10000",
        "body",
        raw_record("body-nested-10000", "[" * 10_000 + "]" * 10_000),
        Rejected("record", f"nests deeper than {MAX_DEPTH} levels"),
        '"record": [[[...]]] 10,000 deep',
        "A clear error, the same on every Python, found in the text before any parser recurses "
        "(3.11's json gave up near 1,000 levels, 3.14's near 64,000).",
    ),
    StoreCall("body-nested-10000", nested(10_000)),
)
add(
    Case(
        "body-nested-past-the-limit",
        "body",
        raw_record("body-nested-past-the-limit", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)),
        Rejected("record", f"nests deeper than {MAX_DEPTH} levels, the most a JSON record may"),
        f'"record": [[[...]]] {MAX_DEPTH + 1} deep',
        "One level past the limit that every reader (diffs, patches, the read API) handles.",
    ),
    StoreCall("body-nested-past-the-limit", nested(MAX_DEPTH + 1)),
)
add(
    Case(
        "body-nested-to-the-limit",
        "body",
        raw_record("body-nested-to-the-limit", "[" * MAX_DEPTH + "]" * MAX_DEPTH),
        Accepted("body-nested-to-the-limit", nested(MAX_DEPTH)),
        f'"record": [[[...]]] {MAX_DEPTH} deep',
        "Deep but within the limit: stored and read back.",
    ),
    StoreCall("body-nested-to-the-limit", nested(MAX_DEPTH)),
)
add(
    Case(
        "body-base64-json-nested-past-the-limit",
        "body",
        message(
            id="body-base64-json-nested-past-the-limit",
            updated_at=T,
            content_type="application/json",
            body_base64=base64.b64encode(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)).decode(),
        ),
        Rejected("body_base64", f"nests deeper than {MAX_DEPTH} levels"),
        f"body_base64 of [[[...]]] {MAX_DEPTH + 1} deep, content_type application/json",
        "Bytes that claim JSON are held to a record's rules, as they stand: they were stored "
        "unparsed, and a diff or a change notification then failed on them.",
    ),
)
add(
    Case(
        "body-base64-json-not-json",
        "body",
        message(
            id="body-base64-json-not-json",
            updated_at=T,
            content_type="application/json",
            body_base64=base64.b64encode(b"{not json").decode(),
        ),
        Rejected("body_base64", "not valid JSON"),
        'body_base64 of "{not json", content_type application/json',
        "A body that claims JSON is JSON: the read API's diff answered 500 on one.",
    ),
)
add(
    Case(
        "body-base64-json-duplicate-key",
        "body",
        message(
            id="body-base64-json-duplicate-key",
            updated_at=T,
            content_type="application/json",
            body_base64=base64.b64encode(b'{"a": 1, "a": 2}').decode(),
        ),
        Rejected("body_base64", "duplicate key 'a', at a"),
        """body_base64 of '{"a": 1, "a": 2}', content_type application/json""",
        "The rules of a record's JSON, whichever field carries it.",
    ),
)
add(
    Case(
        "body-base64-json-number-overflow",
        "body",
        message(
            id="body-base64-json-number-overflow",
            updated_at=T,
            content_type="application/json",
            body_base64=base64.b64encode(b'{"price": 1e400}').decode(),
        ),
        Rejected("body_base64", "1e400 is out of range of a double, at price"),
        """body_base64 of '{"price": 1e400}', content_type application/json""",
        "Stored unparsed, it made diffs and change notifications write Infinity, which strict "
        "JSON parsers refuse.",
    ),
)
add(
    Case(
        "body-base64-over-max-size",
        "body",
        message(
            id="body-base64-over-max-size",
            updated_at=T,
            body_base64=base64.b64encode(bytes(MAX_BODY_BYTES + 1)).decode(),
        ),
        Rejected("body_base64", "over the limit"),
        f"body_base64 of {MAX_BODY_BYTES + 1} bytes (max_body_size {MAX_BODY_BYTES})",
        "Was reported as field record.",
    ),
    StoreCall("body-base64-over-max-size", bytes(MAX_BODY_BYTES + 1)),
)
add(
    Case(
        "body-record-over-max-size",
        "body",
        message(id="body-record-over-max-size", updated_at=T, record="r" * MAX_BODY_BYTES),
        Rejected("record", "over the limit"),
        f"a record of {MAX_BODY_BYTES + 2} bytes of JSON",
        "The limit applies to the canonical JSON.",
    ),
    StoreCall("body-record-over-max-size", "r" * MAX_BODY_BYTES),
)
add(
    Case(
        "body-staged-over-max-size",
        "body",
        message(
            id="body-staged-over-max-size",
            updated_at=T,
            record_location=f"s3://{STAGING}/{STAGING_PREFIX}bodies/too-large.bin",
        ),
        Rejected("record_location", "over the limit"),
        f"record_location of {MAX_BODY_BYTES + 1} bytes",
        "Refused from the object's size, before the download (it used to be spooled to /tmp "
        "first).",
        staged={f"{STAGING_PREFIX}bodies/too-large.bin": bytes(MAX_BODY_BYTES + 1)},
    )
)
claim_check(
    "body-payload-over-max-size",
    "body",
    payload(id="body-payload-over-max-size", updated_at=T, record="p" * MAX_PAYLOAD_BYTES),
    Rejected("payload", "over the limit"),
    f"claim-check payload over VHS_MAX_PAYLOAD_BYTES ({MAX_PAYLOAD_BYTES})",
    "Refused before it is read.",
)
claim_check(
    "body-payload-invalid-utf8",
    "body",
    b'{"id": "body-payload-invalid-utf8", "updated_at": "' + T.encode() + b'", "record": "\xff"}',
    Rejected("payload", "not UTF-8: byte 0xff"),
    "claim-check payload with byte 0xFF in a string",
    "SQS bodies are Unicode, so invalid UTF-8 arrives only as bytes from S3.",
)
claim_check(
    "body-payload-encoded-surrogate",
    "body",
    b'{"id": "body-payload-encoded-surrogate", "updated_at": "'
    + T.encode()
    + b'", "record": "\xed\xa0\x80"}',
    Rejected("payload", "not UTF-8: byte 0xed"),
    "claim-check payload with UTF-8-encoded U+D800 (CESU-8)",
    "Was decoded with surrogatepass by json.loads(bytes).",
)
claim_check(
    "body-payload-utf16",
    "body",
    message(id="body-payload-utf16", updated_at=T, record={}).encode("utf-16"),
    Rejected("payload", "not UTF-8: byte 0xff"),
    "claim-check payload in UTF-16 with its BOM",
    "Was accepted (json.loads(bytes) detects UTF-16); RFC 8259 section 8.1 requires UTF-8.",
)
claim_check(
    "body-payload-bom",
    "body",
    b"\xef\xbb\xbf" + payload(id="body-payload-bom", updated_at=T, record={}),
    Rejected("payload", "byte order mark"),
    "claim-check payload starting with a UTF-8 BOM",
    "Was accepted behind a pointer but refused in a message body; refused in both now.",
)
add(
    Case(
        "body-unpaired-surrogate",
        "body",
        raw_record("body-unpaired-surrogate", '{"title": "Mob\\udc00y"}'),
        Rejected("record", "unpaired surrogate, at record.title"),
        '"record": {"title": "Mob\\udc00y"}',
        "Valid JSON escape, invalid Unicode: it cannot be stored as UTF-8.",
    ),
    StoreCall("body-unpaired-surrogate", {"title": "Mob\udc00y"}),
)
add(
    Case(
        "body-escaped-surrogate-pair",
        "body",
        raw_record("body-escaped-surrogate-pair", '{"title": "\\ud83d\\ude00"}'),
        Accepted("body-escaped-surrogate-pair", {"title": "\U0001f600"}),
        '"record": {"title": "\\ud83d\\ude00"}',
        "A pair (how json.dumps escapes emoji) is one character: stored.",
    )
)
add(
    Case(
        "body-duplicate-keys",
        "body",
        raw_record("body-duplicate-keys", '{"price": 1, "price": 1000}'),
        Rejected("record", "duplicate key 'price'"),
        '"record": {"price": 1, "price": 1000}',
        "Which price? Python keeps the last, others the first: silently kept the last before.",
    )
)
add(
    Case(
        "body-invalid-utf8-opaque",
        "body",
        message(id="body-invalid-utf8-opaque", updated_at=T, body_base64="//7toIA="),
        Accepted("body-invalid-utf8-opaque", b"\xff\xfe\xed\xa0\x80"),
        "body_base64 of bytes FF FE ED A0 80",
        "An opaque body is bytes, not text: stored byte for byte.",
    ),
    StoreCall("body-invalid-utf8-opaque", b"\xff\xfe\xed\xa0\x80"),
)
add(
    Case(
        "body-record-null",
        "body",
        message(id="body-record-null", updated_at=T, record=None),
        Accepted("body-record-null", None),
        '"record": null',
        "null is a JSON value: a record of null is stored (unlike a null content_type).",
    ),
    StoreCall("body-record-null", None),
)

# --- messages -----------------------------------------------------------------------------


def message_case(
    name: str, body: str, expected: Rejected, shows: str, note: str, **kw: Any
) -> None:
    add(Case(name, "message", body, expected, shows, note, **kw))


message_case(
    "msg-not-json", "{not json", Rejected("body", "not valid JSON"), "{not json", "Not JSON."
)
message_case(
    "msg-json-array",
    '[{"id": "b1"}]',
    Rejected("body", "not array"),
    "a JSON array",
    "Top level must be an object.",
)
message_case(
    "msg-json-string", '"b1"', Rejected("body", "not string"), "a JSON string", "As above."
)
message_case("msg-json-null", "null", Rejected("body", "not null"), "null", "As above.")
message_case("msg-json-number", "42", Rejected("body", "not number"), "42", "As above.")
message_case(
    "msg-whitespace-only",
    " \n\t ",
    Rejected("body", "not valid JSON"),
    "only whitespace",
    "SQS refuses an empty body; whitespace gets through.",
)
message_case(
    "msg-bom",
    "\ufeff" + message(id="msg-bom", updated_at=T, record={}),
    Rejected("body", "byte order mark"),
    "U+FEFF then a valid message",
    "JSON texts must not start with a BOM (RFC 8259 section 8.1).",
)
message_case(
    "msg-trailing-data",
    message(id="msg-trailing-data", updated_at=T, record={}) + "}",
    Rejected("body", "Extra data"),
    "a valid message then }",
    "One message is one JSON text.",
)
message_case(
    "msg-duplicate-id",
    f'{{"id": "msg-duplicate-id", "id": "../victim", "updated_at": "{T}", "record": {{}}}}',
    Rejected("id", "duplicate key 'id'"),
    '{"id": "a", "id": "../victim", ...}',
    "Parser differential: was stored silently as the last id.",
)
message_case(
    "msg-unknown-field",
    message(id="msg-unknown-field", updated_at=T, record={}, colour="red"),
    Rejected("colour", "unknown field"),
    '"colour": "red"',
    "Typos must not be dropped silently.",
)
message_case(
    "msg-camel-case-fields",
    message(id="msg-camel-case-fields", updatedAt=T, record={}),
    Rejected("updatedAt", "unknown field"),
    '"updatedAt" instead of "updated_at"',
    "A sloppy producer's casing: named, not guessed.",
)
message_case(
    "msg-unknown-field-named-nul",
    f'{{"id": "msg-unknown-field-named-nul", "updated_at": "{T}", "record": {{}}, "\\u0000": 1}}',
    Rejected('"\\u0000"', "unknown field"),
    'a field named "\\u0000"',
    "The name is JSON-escaped in vhs-error-field: raw, SQS refused the dead letter and the "
    "message was retried.",
)
message_case(
    "msg-unknown-field-named-surrogate",
    f'{{"id": "msg-unknown-field-named-surrogate", "updated_at": "{T}", "record": {{}}, '
    f'"\\ud800": 1}}',
    Rejected('"\\ud800"', "unpaired surrogate"),
    'a field named "\\ud800"',
    "As above: a raw lone surrogate cannot be sent to SQS.",
)
message_case(
    "msg-unknown-field-100k-name",
    message(id="msg-unknown-field-100k-name", updated_at=T, record={}, **{"f" * 100_000: 1}),
    Rejected('"' + "f" * 60 + "...", "unknown field"),
    "a field with a 100,000-character name",
    "The name is cut to 64 characters in vhs-error-field.",
)
message_case(
    "msg-two-payloads",
    message(id="msg-two-payloads", updated_at=T, record={}, body_base64="AA=="),
    Rejected("record", "exactly one of"),
    "record and body_base64",
    "Which one is the body?",
)
message_case(
    "msg-no-payload",
    message(id="msg-no-payload", updated_at=T),
    Rejected("record", "exactly one of"),
    "id and updated_at only",
    "Nothing to store.",
)
message_case(
    "msg-deleted-false",
    message(id="msg-deleted-false", updated_at=T, deleted=False),
    Rejected("deleted", "must be true"),
    '"deleted": false',
    "Not a delete, and not a put either.",
)
message_case(
    "msg-deleted-false-with-record",
    message(id="msg-deleted-false-with-record", updated_at=T, record={}, deleted=False),
    Rejected("deleted", "leave it out for a put"),
    'a record and "deleted": false',
    "A common producer habit; the reason says what to do.",
)
message_case(
    "msg-deleted-string",
    message(id="msg-deleted-string", updated_at=T, deleted="true"),
    Rejected("deleted", "must be true"),
    '"deleted": "true"',
    "Only the JSON literal true deletes.",
)
message_case(
    "msg-content-type-on-record",
    message(id="msg-content-type-on-record", updated_at=T, record={}, content_type="text/plain"),
    Rejected("content_type", "only goes with"),
    "content_type with a JSON record",
    "A record is stored as application/json.",
)
message_case(
    "msg-content-type-null",
    message(id="msg-content-type-null", updated_at=T, body_base64="AA==", content_type=None),
    Rejected("content_type", "non-empty string"),
    '"content_type": null',
    "Was accepted, though the shipped schema refuses it.",
)
message_case(
    "msg-content-type-header-injection",
    message(
        id="msg-content-type-header-injection",
        updated_at=T,
        body_base64="AA==",
        content_type="text/plain\r\nx-amz-meta-owner: mallory",
    ),
    Rejected("content_type", "media type"),
    "content_type with CR LF and a header",
    "It becomes S3's Content-Type header.",
)
message_case(
    "msg-content-type-not-ascii",
    message(
        id="msg-content-type-not-ascii",
        updated_at=T,
        body_base64="AA==",
        content_type="text/plain; x=日本",
    ),
    Rejected("content_type", "media type"),
    "content_type with a parameter value that is not ASCII",
    "Printable, but no media type (RFC 9110): it would be reflected into the read API's "
    "Content-Type header.",
)
message_case(
    "msg-base64-invalid",
    message(id="msg-base64-invalid", updated_at=T, body_base64="%%%"),
    Rejected("body_base64", "not valid base64"),
    'body_base64 "%%%"',
    "Invalid alphabet.",
)
message_case(
    "msg-base64-not-a-string",
    message(id="msg-base64-not-a-string", updated_at=T, body_base64=[1, 2, 3]),
    Rejected("body_base64", "not array"),
    "body_base64 [1, 2, 3]",
    "Bytes travel as a base64 string.",
)
message_case(
    "msg-base64-url-safe",
    message(id="msg-base64-url-safe", updated_at=T, body_base64="-_-_"),
    Rejected("body_base64", "not valid base64"),
    'body_base64 "-_-_" (URL-safe alphabet)',
    "The standard alphabet only (RFC 4648 section 4), not guessed.",
)
message_case(
    "msg-base64-line-breaks",
    message(id="msg-base64-line-breaks", updated_at=T, body_base64="AAAA\nAAAA"),
    Rejected("body_base64", "not valid base64"),
    "MIME-wrapped body_base64",
    "No line breaks.",
)
message_case(
    "msg-location-https-url",
    message(
        id="msg-location-https-url",
        updated_at=T,
        record_location="https://bucket.s3.amazonaws.com/key",
    ),
    Rejected("record_location", "s3://bucket/key URI"),
    "record_location https://...",
    "Only s3:// URIs.",
)
message_case(
    "msg-location-no-key",
    message(id="msg-location-no-key", updated_at=T, record_location=f"s3://{STAGING}"),
    Rejected("record_location", "s3://bucket/key URI"),
    "record_location s3://bucket",
    "A bucket is not an object.",
)
message_case(
    "msg-location-upper-case-scheme",
    message(
        id="msg-location-upper-case-scheme",
        updated_at=T,
        record_location=f"S3://{STAGING}/{STAGING_PREFIX}bodies/empty.bin",
    ),
    Rejected("record_location", "s3://bucket/key URI"),
    "record_location S3://...",
    "As the schema's pattern (it was accepted).",
)
message_case(
    "msg-location-not-a-string",
    message(id="msg-location-not-a-string", updated_at=T, record_location={"bucket": "b"}),
    Rejected("record_location", "not object"),
    "record_location {...}",
    "A URI string.",
)
message_case(
    "msg-location-tab-in-key",
    message(
        id="msg-location-tab-in-key",
        updated_at=T,
        record_location=f"s3://{STAGING}/{STAGING_PREFIX}bodies/a\tb",
    ),
    Rejected("record_location", "control character U+0009"),
    "record_location key a<TAB>b, with a staged object ab",
    "urlsplit dropped the tab, so the handler stored the other object (ab).",
    staged={f"{STAGING_PREFIX}bodies/ab": b"not this one"},
)
message_case(
    "msg-location-bracket",
    message(
        id="msg-location-bracket",
        updated_at=T,
        record_location=f"s3://[{STAGING}/{STAGING_PREFIX}x",
    ),
    Rejected("record_location", "outside the staging location"),
    "record_location s3://[bucket/...",
    "urlsplit raised ValueError: retried five times as if transient.",
)
message_case(
    "msg-location-key-too-long",
    message(
        id="msg-location-key-too-long",
        updated_at=T,
        record_location=f"s3://{STAGING}/{STAGING_PREFIX}{'k' * 1100}",
    ),
    Rejected("record_location", "over S3's limit of 1024"),
    "record_location with a 1,108-byte key",
    "S3 keys are at most 1,024 bytes; refused here, not by a failing GetObject.",
)
message_case(
    "msg-location-missing",
    message(
        id="msg-location-missing",
        updated_at=T,
        record_location=f"s3://{STAGING}/{STAGING_PREFIX}bodies/missing.bin",
    ),
    Rejected("record_location", "does not exist", "MissingStagedObject"),
    "record_location of a missing object",
    "Cannot succeed on retry: staged objects are written before the message is sent.",
)
message_case(
    "msg-location-foreign-bucket",
    message(
        id="msg-location-foreign-bucket",
        updated_at=T,
        record_location=f"s3://{BODIES}/00/anything",
    ),
    Rejected("record_location", "outside the staging location"),
    "record_location in the store's own body bucket",
    "The handler may read the body bucket; a message must not make it copy from there.",
)
message_case(
    "msg-location-outside-prefix",
    message(
        id="msg-location-outside-prefix",
        updated_at=T,
        record_location=f"s3://{STAGING}/secret.json",
    ),
    Rejected("record_location", "outside the staging location"),
    "record_location outside the staging prefix",
    "Only the staging prefix may be read.",
    staged={"secret.json": b'{"secret": true}'},
)
message_case(
    "msg-location-dot-dot",
    message(
        id="msg-location-dot-dot",
        updated_at=T,
        record_location=f"s3://{STAGING}/{STAGING_PREFIX}../secret.json",
    ),
    Rejected("record_location", "does not exist", "MissingStagedObject"),
    "record_location staging/../secret.json",
    "S3 keys are literal (botocore does not resolve ..): the secret beside the prefix is not read.",
    staged={"secret.json": b'{"secret": true}'},
)
message_case(
    "msg-claim-check-missing",
    pointer(f"{STAGING_PREFIX}claim-checks/missing.json"),
    Rejected("body.s3Key", "does not exist", "MissingStagedObject"),
    "claim check to a missing payload",
    "A dangling pointer (the Extended Client deletes payloads when its consumer is done).",
    attributes=flagged(100),
)
message_case(
    "msg-claim-check-foreign-bucket",
    pointer("00/anything", BODIES),
    Rejected("body.s3BucketName", "outside the staging location"),
    "claim check into the store's body bucket",
    "Names the bucket field now.",
    attributes=flagged(100),
)
message_case(
    "msg-claim-check-outside-prefix",
    pointer("secret.json"),
    Rejected("body.s3Key", "outside the staging location"),
    "claim check outside the staging prefix",
    "As record_location.",
    attributes=flagged(100),
    staged={"secret.json": b'{"secret": true}'},
)
message_case(
    "msg-claim-check-flag-without-pointer",
    message(id="msg-claim-check-flag-without-pointer", updated_at=T, record={}),
    Rejected("body", "flagged as a claim check but not a pointer"),
    "ExtendedPayloadSize on a plain message",
    "The producer meant a claim check: storing the body would store the wrong thing.",
    attributes=flagged(100),
)
message_case(
    "msg-claim-check-pointer-not-object",
    json.dumps([POINTER_CLASS, f"s3://{STAGING}/{STAGING_PREFIX}x"]),
    Rejected("body", "pointer must be an object"),
    '["...PayloadS3Pointer", "s3://..."]',
    "The Extended Client's shape only.",
)
message_case(
    "msg-claim-check-no-key",
    json.dumps([POINTER_CLASS, {"s3BucketName": STAGING}]),
    Rejected("body.s3Key", "non-empty string"),
    "pointer without s3Key",
    "Incomplete pointer.",
)
message_case(
    "msg-claim-check-surrogate-key",
    f'["{POINTER_CLASS}", {{"s3BucketName": "{STAGING}", "s3Key": "{STAGING_PREFIX}\\ud800"}}]',
    Rejected("body", "unpaired surrogate, at [1].s3Key"),
    's3Key "staging/\\ud800"',
    "botocore raised UnicodeEncodeError: retried five times as if transient.",
)
claim_check(
    "msg-payload-bad-timestamp",
    "message",
    payload(id="msg-payload-bad-timestamp", updated_at="soon", record={}),
    Rejected("payload.updated_at", "not an RFC 3339 timestamp"),
    'claim check whose payload has updated_at "soon"',
    "Payload fields are named payload.<field>.",
)
claim_check(
    "msg-payload-future-timestamp",
    "message",
    payload(id="msg-payload-future-timestamp", updated_at="2999-01-01T00:00:00Z", record={}),
    Rejected("payload.updated_at", "in the future"),
    "claim check whose payload is far in the future",
    "The store's error was reported as updated_at, without payload.",
)
claim_check(
    "msg-payload-body-over-max-size",
    "message",
    payload(
        id="msg-payload-body-over-max-size",
        updated_at=T,
        body_base64=base64.b64encode(bytes(MAX_BODY_BYTES + 1)).decode(),
    ),
    Rejected("payload.body_base64", "over the limit"),
    "claim check whose payload's body is over max_body_size",
    "Was reported as record.",
)
claim_check(
    "msg-payload-nan",
    "message",
    f'{{"id": "msg-payload-nan", "updated_at": "{T}", "record": [NaN]}}'.encode(),
    Rejected("payload.record", "NaN is not valid JSON, at record[0]"),
    "claim check whose payload's record has NaN",
    "Was reported as record, without payload.",
)
claim_check(
    "msg-payload-array",
    "message",
    b"[1, 2, 3]",
    Rejected("payload", "not array"),
    "claim check whose payload is an array",
    "Was named payload.body.",
)
claim_check(
    "msg-payload-is-a-pointer",
    "message",
    pointer(f"{STAGING_PREFIX}claim-checks/msg-payload-is-a-pointer.json").encode(),
    Rejected("payload", "pointers do not nest"),
    "claim check whose payload is a claim check (to itself)",
    "One level only: no loops, no chains.",
)
claim_check(
    "msg-payload-unknown-field",
    "message",
    payload(id="msg-payload-unknown-field", updated_at=T, record={}, colour="red"),
    Rejected("payload.colour", "unknown field"),
    "claim check whose payload has an unknown field",
    "As in a message.",
)
message_case(
    "msg-spoofed-error-attributes",
    message(id="", updated_at=T, record={}),
    Rejected("id", "must not be empty"),
    "invalid, with the producer's own vhs-error-field: none",
    "The handler's vhs-error-* attributes win over a producer's.",
    attributes={
        "vhs-error-field": {"DataType": "String", "StringValue": "none"},
        "vhs-error-message": {"DataType": "String", "StringValue": "all fine"},
    },
)
message_case(
    "msg-ten-attributes",
    message(id="msg-ten-attributes", updated_at=T, record={}, colour="red"),
    Rejected("colour", "unknown field"),
    "invalid, with 10 producer attributes (SQS's maximum)",
    "The dead letter keeps the handler's 5 attributes and as many of the producer's as fit.",
    attributes={f"a{n}": {"DataType": "String", "StringValue": str(n)} for n in range(10)},
)


# --- the corpus as a whole ----------------------------------------------------------------


def by_name() -> dict[str, Case]:
    return {case.name: case for case in CASES}


def counts() -> dict[str, dict[str, int]]:
    """Cases per category and handling: {"id": {"rejected": 11, "accepted safely": 14}, ...}."""
    table: dict[str, dict[str, int]] = {}
    for case in CASES:
        handling = "rejected" if isinstance(case.expected, Rejected) else "accepted safely"
        row = table.setdefault(case.category, {"rejected": 0, "accepted safely": 0})
        row[handling] += 1
    return table


def valid_id(id: str) -> bool:
    """Whether the store takes `id` (keys.validate_id), as a yes or no."""
    try:
        keys.validate_id(id)
    except InvalidId:
        return False
    return True
