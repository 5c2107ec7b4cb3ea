"""Ingest: turn one SQS message into one store write, or one dead letter.

A message goes one way: read and validated once (contract.read_message: in the ingest handler,
its first read is the batch's, vhs.ingest.batch), then written (`write`), with nothing parsed
or validated again and every error naming the message's field.

The policy is "nothing lost": every message ends stored, stale or unchanged (and is deleted
from the queue), or in the dead-letter queue.

* An **invalid** message (not JSON, a schema error, a claim check that points at a missing
  object or outside the staging location, too large) can never succeed, so it is not retried:
  `dead_letter` sends it to the DLQ with its reason, and the handler then acknowledges it.
* Anything else (throttling, 5xx, timeouts, a write conflict, a misconfiguration) is
  **transient**: it propagates, the handler reports a batch item failure, SQS retries, and its
  redrive policy dead-letters the message after maxReceiveCount, so it is never lost either.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .. import settings
from ..aws import aws_client, is_key_denied, is_object_missing
from ..bodies.parts import PartBody, encode_part
from ..codec import encode_record
from ..errors import (
    BodyTooLarge,
    InvalidMessage,
    MissingStagedObject,
    OverBudget,
    UnreadableStagedObject,
)
from ..model import DeleteResult, PutResult
from ..shapes import MAX_SQS_MESSAGE_BYTES
from ..store import VersionedHybridStore
from .budget import SPOOL_IN_MEMORY, Budgets, Cost, claim_check_cost, staged_body_cost
from .contract import (
    FirstRead,
    IngestMessage,
    MessageLimits,
    as_message_error,
    first_read,
    read_message,
)
from .staging import S3Location, StagingLocation, claim_check_attributes, claim_check_body

logger = logging.getLogger(__name__)

# SQS's largest message (body and attributes). A dead letter that would not fit is staged in
# S3 and sent as a claim check instead, so nothing is cut.
MAX_MESSAGE_BYTES = MAX_SQS_MESSAGE_BYTES
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class IngestResult:
    message_id: str
    record_id: str | None
    outcome: str  # an Outcome value, or "invalid"
    version: int | None = None
    bytes: int = 0


class Ingestor:
    def __init__(
        self,
        store: VersionedHybridStore,
        *,
        sqs_client: Any,
        dlq_url: str,
        staging: StagingLocation | None,
        s3_client: Any = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        budgets: Budgets | None = None,
    ) -> None:
        self.store = store
        self.sqs = sqs_client
        self.s3 = s3_client or store.bodies.s3
        self.dlq_url = dlq_url
        self.staging = staging
        self.max_payload_bytes = max_payload_bytes
        # What the messages being stored at once may hold (budget.py); this instance's.
        self.budgets = budgets or Budgets.of_this_function()
        self._message = threading.local()  # the reservations of the message this thread stores

    def bound_waits(self, time_left: Callable[[], float]) -> None:
        """Wait no longer than `time_left()` seconds (an invocation's remaining time, less a
        margin): for the collector's condemnation of a body (the store's writer), and for the
        memory or /tmp other messages hold (the budgets). Past it a message fails instead,
        and SQS delivers it again."""
        self.store.bound_waits(time_left)
        self.budgets.remaining = time_left

    @property
    def limits(self) -> MessageLimits:
        """What a message must meet: the store's limits, as the store has them now."""
        return MessageLimits(self.store.max_future, self.store.max_body_size)

    @classmethod
    def from_env(cls) -> Ingestor:
        (dlq_url,) = settings.require(
            settings.DLQ_URL, hint="invalid messages are dead-lettered there"
        )
        return cls(
            VersionedHybridStore.from_env(),
            sqs_client=aws_client("sqs"),
            dlq_url=dlq_url,
            staging=StagingLocation.from_env(),
            max_payload_bytes=settings.whole_number(
                settings.MAX_PAYLOAD_BYTES, DEFAULT_MAX_PAYLOAD_BYTES
            ),
        )

    # --- one message -------------------------------------------------------------------------

    def first_read(self, record: dict[str, Any]) -> FirstRead:
        """What `record` reads as before anything is fetched (contract.first_read), against
        this ingestor's staging location and limits."""
        return first_read(record, staging=self.staging, limits=self.limits)

    def handle(self, record: dict[str, Any], first: FirstRead | None = None) -> IngestResult:
        """Store one SQS record (Lambda event shape), from its `first_read` if given (the
        batch read it already: it is not parsed or validated again), else read now. Raises
        InvalidMessage for a message that can never be stored; any other exception means
        "retry"."""
        if record.get("messageAttributes"):
            self._revoke_receipt_if_redriven(record)
        # What reading the message reserves (a payload, a staged body) is held until it is
        # stored, and given back however it ends.
        with contextlib.ExitStack() as held:
            self._message.held = held
            message = read_message(
                record, staging=self.staging, fetch=self._fetch, limits=self.limits, first=first
            )
            return self.write(message, record["messageId"])

    def _reserve(self, cost: Cost, field: str) -> None:
        """Hold `cost` until this thread's message is stored. A cost that could never be met
        (over the whole budget, or longer than the timeout) is an InvalidMessage."""
        too_slow = self.budgets.check_time(cost)
        if too_slow:
            raise InvalidMessage(field, f"too large for this function: {too_slow}")
        try:
            self._message.held.enter_context(self.budgets.hold(cost))
        except OverBudget as error:
            raise InvalidMessage(field, f"too large for this function: {error}") from None

    def write(self, message: IngestMessage, message_id: str) -> IngestResult:
        """Write a message read by `read_message`: nothing in it is validated again. What the
        store itself refuses as bad input when it writes (parts that leave no room in the
        item, a version too large for it alone: never true on a retry) is an InvalidMessage."""
        result: PutResult | DeleteResult
        size = 0
        with as_message_error():
            if message.kind == "deleted":
                result = self.store.delete_validated(message.id, message.stamp, purge=message.purge)
            elif message.encoded is not None and not message.parts:
                # A record (as canonical JSON) or body_base64.
                result = self.store.put_validated(message.id, message.encoded, message.stamp)
                size = 0 if message.kind == "record" else message.encoded.size
            else:
                result, size = self._put_staged(message)
        return IngestResult(message_id, message.id, result.outcome, result.version, size)

    def _put_staged(self, message: IngestMessage) -> tuple[PutResult, int]:
        """A put with a staged body, or with staged parts, or both: each staged object is
        downloaded (spooled to /tmp when large) and checked only now that it is seen."""
        with contextlib.ExitStack() as spools:
            size = 0
            if message.encoded is not None:
                body = message.encoded
                size = 0 if message.kind == "record" else body.size
            elif message.location is not None:
                field = message.field("record_location")
                spool = spools.enter_context(tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY))
                content_type = self._download(message.location, field, spool)
                size = spool.tell()
                with as_message_error():
                    body = encode_record(
                        spool,
                        message.content_type or content_type,
                        max_size=self.store.max_body_size,
                        field=field,
                        content_type_field=message.field("content_type"),
                    )
            else:
                raise InvalidMessage(message.field("record"), f"no payload for a {message.kind!r}")
            parts = []
            for staged in message.parts:
                spool = spools.enter_context(tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY))
                content_type = self._download(staged.location, staged.field, spool)
                size += spool.tell()
                with as_message_error():
                    encoded = encode_part(
                        spool,
                        staged.content_type or content_type,
                        self.store.max_body_size,
                        staged.part_field,
                    )
                parts.append(PartBody(staged.name, encoded))
            result = self.store.put_validated(message.id, body, message.stamp, parts=parts)
        return result, size

    def _get_object(self, location: S3Location, field: str) -> dict[str, Any]:
        try:
            return self.s3.get_object(Bucket=location.bucket, Key=location.key)
        except ClientError as error:
            # The role may list the staging bucket, so a missing object is a 404, not a 403.
            if is_object_missing(error):
                raise MissingStagedObject(field, f"{location} does not exist") from None
            if is_key_denied(error):
                message = error.response.get("Error", {}).get("Message", "")
                raise UnreadableStagedObject(
                    field, f"{location} cannot be read with the function's access: {message}"
                ) from None
            raise  # anything else (a missing permission, throttling): retried

    def _fetch(self, location: S3Location, field: str) -> bytes:
        response = self._get_object(location, field)
        size, limit = response.get("ContentLength", 0), self.max_payload_bytes
        try:
            if size > limit:
                raise InvalidMessage("payload", f"is {size} bytes, over the limit of {limit} bytes")
            self._reserve(claim_check_cost(size), "payload")
        except BaseException:
            response["Body"].close()
            raise
        return response["Body"].read()

    def _download(self, location: S3Location, field: str, spool: Any) -> str | None:
        response = self._get_object(location, field)
        size, limit = response.get("ContentLength", 0), self.store.max_body_size
        try:
            if size > limit:
                # Refused before the download, which would only fill /tmp to be refused after.
                raise InvalidMessage(field, BodyTooLarge(size, limit).reason)
            self._reserve(staged_body_cost(size), field)
        except BaseException:
            response["Body"].close()
            raise
        for chunk in response["Body"].iter_chunks(8 * 1024 * 1024):
            spool.write(chunk)
        return response.get("ContentType")

    # --- dead letters ------------------------------------------------------------------------

    def dead_letter(self, record: dict[str, Any], error: InvalidMessage) -> None:
        """Send an invalid message to the DLQ with its reason. Raises if that fails, so the
        message is retried rather than lost."""
        # Imported here: most invocations dead-letter nothing, and every cold start would pay.
        from .deadletter import dead_letter_attributes, message_size, receipt

        attributes = dead_letter_attributes(record, error)
        body = record.get("body", "")
        if message_size(body, attributes) > MAX_MESSAGE_BYTES:
            body = self._stage_dead_letter(record, body)
            attributes.update(claim_check_attributes(len(record.get("body", "").encode())))
        sent = self.sqs.send_message(
            QueueUrl=self.dlq_url, MessageBody=body, MessageAttributes=attributes
        )
        self._write_receipt(sent["MessageId"], receipt(attributes, body))

    def _write_receipt(self, dead_letter_message_id: str, document: bytes) -> None:
        """The receipt that makes a dead letter's reason believed (deadletter.py). Its loss
        loses nothing: the letter then reads as retries-exhausted, which is never discarded
        by mistake. So a failure is logged, not raised (raising would send it twice)."""
        if self.staging is None:
            return
        key = self.staging.receipt_key(dead_letter_message_id)
        try:
            self.s3.put_object(Bucket=self.staging.bucket, Key=key, Body=document)
        except (ClientError, BotoCoreError) as error:
            logger.warning("could not write the receipt of dead letter %s: %s", key, error)

    def _revoke_receipt_if_redriven(self, record: dict[str, Any]) -> None:
        """A message back from the DLQ with its `vhs-*` attributes (SQS's own redrive keeps
        them and may keep its message id): revoke any receipt under its id, so that its old
        reason is not believed if it is dead-lettered again by SQS."""
        from .deadletter import REVOKED_RECEIPT, carries_reserved_attributes

        if carries_reserved_attributes(record):
            self._write_receipt(record["messageId"], REVOKED_RECEIPT)

    def _stage_dead_letter(self, record: dict[str, Any], body: str) -> str:
        if self.staging is None:
            raise InvalidMessage("body", "too large to dead-letter and no staging location")
        key = self.staging.dead_letter_key(record["messageId"])
        self.s3.put_object(Bucket=self.staging.bucket, Key=key, Body=body.encode())
        return claim_check_body(S3Location(self.staging.bucket, key))
