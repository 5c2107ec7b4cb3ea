"""Dead letters: the reason VHS writes on a message it cannot store, and reading it back.

The ingest handler sends an invalid message to the DLQ with its reason in `vhs-error-*`
message attributes (type, field, message, the ingest queue's message id, when it was first
seen). A message whose retries were exhausted is moved there by SQS's redrive policy and
carries none: it reads as RETRIES_EXHAUSTED. `vhs dlq` reads both kinds (vhs_ops/admin/dlq.py).

Message attributes are the producer's to write, and SQS moves a message to the DLQ with the
attributes it was sent with: a producer could send `vhs-error-type: InvalidMessage` on a valid
record, and if it then exhausted its retries, a tool that believed the attribute would skip it
on redrive and discard it. So a reason is believed only with a **receipt**: after sending a
dead letter, the handler writes one to the staging bucket under DEAD_LETTER_RECEIPT_PREFIX,
keyed by the dead letter's own message id (which SQS assigns, so no producer knows it in
advance), naming its reason and the sha256 of its body. Producers may not write there (the
producer policy denies it). A message whose claimed reason has no matching receipt reads as
RETRIES_EXHAUSTED, the claim shown as unverified, and `vhs dlq discard` leaves it alone unless
told otherwise. A message that comes back to the ingest queue still carrying `vhs-*`
attributes (SQS's own redrive keeps them) has its receipt revoked by the handler, so an old
reason is never believed again if that message later exhausts its retries. The handler never
copies a producer's `vhs-*` attributes onto a dead letter it writes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import InvalidMessage
from .staging import CLAIM_CHECK_ATTRIBUTES, is_claim_check

# Message attributes on a dead letter.
ERROR_TYPE = "vhs-error-type"
ERROR_FIELD = "vhs-error-field"
ERROR_MESSAGE = "vhs-error-message"
SOURCE_MESSAGE_ID = "vhs-source-message-id"
FIRST_SEEN = "vhs-first-seen"
DEAD_LETTER_ATTRIBUTES = (ERROR_TYPE, ERROR_FIELD, ERROR_MESSAGE, SOURCE_MESSAGE_ID, FIRST_SEEN)
RETRIES_EXHAUSTED = "RetriesExhausted"
# Attribute names VHS writes. A producer's attributes with this prefix are never copied onto a
# dead letter, and never believed.
RESERVED_PREFIX = "vhs-"
REVOKED_RECEIPT = b'{"revoked":true}'
_SQS_ATTRIBUTE_LIMIT = 10
_PREVIEW = 120


def dead_letter_attributes(record: dict[str, Any], error: InvalidMessage) -> dict[str, Any]:
    first_seen = (record.get("attributes") or {}).get("ApproximateFirstReceiveTimestamp")
    seen = (
        datetime.fromtimestamp(int(first_seen) / 1000, UTC)
        if first_seen and str(first_seen).isdigit()
        else datetime.now(UTC)
    )
    ours = {
        ERROR_TYPE: type(error).__name__,
        ERROR_FIELD: error.field[:256],
        ERROR_MESSAGE: error.reason[:1024],
        SOURCE_MESSAGE_ID: record.get("messageId", ""),
        FIRST_SEEN: seen.isoformat(),
    }
    attributes = {
        name: {"DataType": "String", "StringValue": sqs_text(value) or "-"}
        for name, value in ours.items()
    }
    # Keep the producer's own attributes (claim-check flags first, so a redrive still
    # resolves), as many as SQS's limit of 10 allows.
    original = record.get("messageAttributes") or {}
    ordered = sorted(original, key=lambda name: name not in CLAIM_CHECK_ATTRIBUTES)
    for name in ordered:
        if name.startswith(RESERVED_PREFIX):  # ours, from an earlier dead-lettering, or forged
            continue
        if len(attributes) >= _SQS_ATTRIBUTE_LIMIT:
            break
        converted = _attribute_from_event(original[name])
        if converted:
            attributes[name] = converted
    return attributes


def carries_reserved_attributes(record: dict[str, Any]) -> bool:
    """Whether a Lambda SQS record carries `vhs-*` attributes: a dead letter moved back by
    SQS's own redrive (which keeps them), or a producer's forgery."""
    return any(name.startswith(RESERVED_PREFIX) for name in record.get("messageAttributes") or {})


def receipt(attributes: dict[str, Any], body: str) -> bytes:
    """The receipt of a dead letter sent with `attributes` (SendMessage's shape) and `body`."""
    return _receipt_document(
        {name: _string(attributes, name) for name in DEAD_LETTER_ATTRIBUTES}, body
    )


def _receipt_document(reason: dict[str, str | None], body: str) -> bytes:
    document = {"reason": reason, "body_sha256": hashlib.sha256(body.encode()).hexdigest()}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def receipt_vouches_for(stored: bytes | None, message: dict[str, Any]) -> bool:
    """Whether `stored` (a receipt, or None when there is none) is the receipt of `message`
    (a ReceiveMessage message): the same reason attributes and the same body. A revoked
    receipt vouches for nothing."""
    if stored is None:
        return False
    attributes = message.get("MessageAttributes") or {}
    expected = _receipt_document(
        {name: _string(attributes, name) for name in DEAD_LETTER_ATTRIBUTES},
        message.get("Body", ""),
    )
    return stored == expected


@functools.cache
def _sqs_refused() -> re.Pattern[str]:
    # What SQS refuses in a message or attribute value: anything outside #x9 | #xA | #xD |
    # #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF. Compiled when first needed (a dead
    # letter), not at import: it costs several milliseconds of every cold start.
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_text(value: str) -> str:
    """`value` with every character SQS refuses written as a \\uXXXX escape. A reason may
    quote the message (an S3 key with a control character, say), and a dead letter that
    SQS refuses would be retried instead of dead-lettered."""
    return _sqs_refused().sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def _attribute_from_event(value: dict[str, Any]) -> dict[str, Any] | None:
    """A Lambda event's messageAttributes entry, in SendMessage's shape."""
    data_type = value.get("dataType") or value.get("DataType")
    if not data_type:
        return None
    string = value.get("stringValue", value.get("StringValue"))
    binary = value.get("binaryValue", value.get("BinaryValue"))
    if string is not None:
        return {"DataType": data_type, "StringValue": string}
    if binary is not None:
        raw = base64.b64decode(binary) if isinstance(binary, str) else binary
        return {"DataType": data_type, "BinaryValue": raw}
    return None


@dataclass(frozen=True)
class DeadLetter:
    message_id: str  # in the DLQ
    record_id: str | None  # None: not JSON, no id, or an unresolved claim check
    claim_check: bool
    error_type: str  # InvalidMessage, MissingStagedObject, or RETRIES_EXHAUSTED
    error_field: str | None
    reason: str
    first_seen: datetime  # when the ingest queue first delivered it (else when it was sent)
    receive_count: int  # ApproximateReceiveCount: the ingest queue's receives (for a
    #                     message the redrive policy moved) plus every read of the DLQ
    source_message_id: str  # its message id on the ingest queue (for the function's log)
    size: int  # body bytes
    preview: str  # the body's start, for messages that are not what they should be
    # A reason the message claims (its vhs-error-* attributes) that no receipt vouches for:
    # not VHS's word, so the letter reads as RETRIES_EXHAUSTED.
    unverified_reason: str | None = None

    @property
    def retries_exhausted(self) -> bool:
        return self.error_type == RETRIES_EXHAUSTED

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or datetime.now(UTC)) - self.first_seen

    def as_dict(self, now: datetime | None = None) -> dict[str, Any]:
        data = asdict(self)
        data["first_seen"] = self.first_seen.isoformat()
        data["age_seconds"] = round(self.age(now).total_seconds(), 3)
        return data

    @property
    def trusted(self) -> bool:
        """Whether what the letter says of itself is VHS's word (see the module's docstring)."""
        return self.unverified_reason is None

    @classmethod
    def from_message(
        cls, message: dict[str, Any], record_id: str | None = None, *, vouched: bool = False
    ) -> DeadLetter:
        """From a ReceiveMessage message (received with every attribute). Its `vhs-error-*`
        reason is believed only if `vouched` (its receipt matched, `receipt_vouches_for`)."""
        attributes = message.get("MessageAttributes") or {}
        system = message.get("Attributes") or {}
        body = message.get("Body", "")
        count = int(system.get("ApproximateReceiveCount", "0") or 0)
        parsed = parse_or_none(body)
        claim_check = is_claim_check(parsed)
        if record_id is None and isinstance(parsed, dict) and isinstance(parsed.get("id"), str):
            record_id = parsed["id"]
        error_type = _string(attributes, ERROR_TYPE)
        unverified = None
        if error_type and not vouched:
            claimed = _string(attributes, ERROR_MESSAGE) or ""
            unverified = f"{error_type}: {claimed}"[: _PREVIEW * 4]
            error_type = None
        if error_type:
            reason = _string(attributes, ERROR_MESSAGE) or "(no reason given)"
            error_field = _string(attributes, ERROR_FIELD)
            error_field = None if error_field in (None, "-") else error_field
        else:
            error_type, error_field = RETRIES_EXHAUSTED, None
            reason = (
                "retries exhausted: not stored after repeated receives, so SQS's redrive "
                "policy moved it (a failure that persisted: throttling, 5xx, timeouts, write "
                "conflicts, configuration); the function's log has each attempt's error "
                "under this message id"
            )
        return cls(
            message_id=message["MessageId"],
            record_id=record_id,
            claim_check=claim_check,
            error_type=error_type,
            error_field=error_field,
            reason=reason,
            # Unvouched, none of the vhs-* attributes is believed: the times are SQS's.
            first_seen=_first_seen(attributes if vouched else {}, system),
            receive_count=count,
            source_message_id=(_string(attributes, SOURCE_MESSAGE_ID) if vouched else None)
            or message["MessageId"],
            size=len(body.encode()),
            preview=body[:_PREVIEW],
            unverified_reason=unverified,
        )


def message_size(body: str | bytes, attributes: dict[str, Any]) -> int:
    """What counts towards SQS's message size limit: the body, and each attribute's name,
    type and value. `attributes` in SendMessage's shape."""
    data = body.encode() if isinstance(body, str) else body
    return len(data) + sum(
        len(name.encode())
        + len(value["DataType"].encode())
        + len(value.get("StringValue", "").encode())
        + len(value.get("BinaryValue", b""))
        for name, value in attributes.items()
    )


def producer_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """A dead letter's message attributes as SendMessage takes them, without the
    `vhs-error-*` attributes that the ingest handler added when it dead-lettered it."""
    kept: dict[str, Any] = {}
    for name, value in attributes.items():
        if name.startswith(RESERVED_PREFIX):
            continue
        converted: dict[str, Any] = {"DataType": value["DataType"]}
        if value.get("StringValue") is not None:
            converted["StringValue"] = value["StringValue"]
        elif value.get("BinaryValue") is not None:
            converted["BinaryValue"] = value["BinaryValue"]
        else:
            continue
        kept[name] = converted
    return kept


def parse_or_none(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _string(attributes: dict[str, Any], name: str) -> str | None:
    value = attributes.get(name)
    return value.get("StringValue") if isinstance(value, dict) else None


def _first_seen(attributes: dict[str, Any], system: dict[str, Any]) -> datetime:
    stamp = _string(attributes, FIRST_SEEN)
    if stamp:
        try:
            seen = datetime.fromisoformat(stamp)
            return seen if seen.tzinfo else seen.replace(tzinfo=UTC)
        except ValueError:
            pass
    sent = system.get("SentTimestamp")
    if sent and str(sent).isdigit():
        return datetime.fromtimestamp(int(sent) / 1000, UTC)
    return datetime.fromtimestamp(time.time(), UTC)
