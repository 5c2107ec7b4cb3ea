"""The producer side: put records on the ingest queue.

A line of a JSON Lines file is sent as it is: its bytes, unchanged. With validation on (the
default), a line is first judged exactly as the ingest handler will judge it, by the
handler's own parser and validator (`contract.read_message`, duplicate keys, NaN and lone
surrogates included), and a line the handler would dead-letter is refused here instead, with
its field and reason. With validation off the handler judges it.

Messages go in batches of up to 10 (SendMessageBatch), never over SQS's 1 MiB per request.
A message too large for the queue, or with bytes SQS cannot carry (not UTF-8, or characters
outside SQS's set), is offloaded to the staging location and sent as a claim check in the AWS
SQS Extended Client's own format, so the same consumer path serves messages from this
producer and from the Java and Python Extended Clients, and the handler reads the bytes as
they were. Entries that a batch reports as failed are retried with backoff; a message that
still cannot be sent is reported, never dropped silently, and the rest still go.

Flow control (`max_queued`, on by default only against a local endpoint: `from_env`): before
sending, the producer reads the queue's depth (visible, in flight and delayed) and waits while
it holds `max_queued` messages or more, so a sender faster than its consumer never builds a
backlog. On AWS a queue's depth costs nothing to hold, so the deployed default sends at full
speed; moto's server holds every message in memory. A sender can be stopped between batches
(`stop`): the report then says which line to resume from (`next_line`), every line before it
having been sent, refused or reported as not sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from vhs import settings
from vhs.aws import is_object_missing
from vhs.codec import MAX_BODY_SIZE
from vhs.errors import InvalidMessage, MissingStagedObject
from vhs.ingest.contract import MessageLimits, read_message
from vhs.ingest.staging import S3Location, StagingLocation, claim_check_attributes, claim_check_body
from vhs.shapes import INGEST, STAGING_PREFIX
from vhs.strict_json import parse_json_body

MAX_BATCH_ENTRIES = 10
# Room for message attributes and the batch request's own framing.
_ATTRIBUTE_ALLOWANCE = 1024
_RETRY_ATTEMPTS = 6
# What an SQS message body may hold (SendMessage refuses anything else).
_NOT_SQS_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Flow control against a local endpoint: at most this many messages held by the queue. The
# local pipeline takes 10 at a time, so this keeps it busy while moto holds little.
LOCAL_MAX_QUEUED = 1_000
_DEPTH_POLL_SECONDS = 0.25
# Names, compared with the endpoint's host; nothing binds to them (bandit B104 reads "0.0.0.0").
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"}  # nosec B104


def is_local_endpoint(endpoint: str | None) -> bool:
    """Whether `endpoint` (AWS_ENDPOINT_URL) is a server on this machine (the local stack)."""
    if not endpoint:
        return False
    host = urlsplit(endpoint).hostname or ""
    return host in _LOCAL_HOSTS or host.startswith("127.")


@dataclass(frozen=True)
class Refusal:
    """A line the ingest handler would dead-letter: refused, with the handler's reason."""

    line: int  # the line's number in its file (send_lines), or 1-based position (send)
    field: str
    reason: str


@dataclass(frozen=True)
class NotSent:
    """A line that could not be sent (SQS or S3 would not take it, or nothing to stage it)."""

    line: int
    reason: str


@dataclass
class SendReport:
    sent: int = 0
    claim_checks: int = 0
    refused: list[Refusal] = field(default_factory=list)
    not_sent: list[NotSent] = field(default_factory=list)
    # Stopped before the end: every line before `next_line` was sent, refused or reported as
    # not sent, and none from it on was looked at.
    interrupted: bool = False
    next_line: int | None = None
    queue_waits: int = 0  # times the queue was full (max_queued) and the producer waited
    queue_wait_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.refused and not self.not_sent


class Flow(TypedDict, total=False):
    """How a send reports and stops (the keyword arguments of `send` and `send_lines`).

    `progress(n)` is called as n more messages are accounted for. Once `stop` is set, no
    further line is read: the batch in hand is sent (unless the producer is waiting on a full
    queue, when it is left unsent) and the report says `interrupted`, with the `next_line` to
    resume from. `waiting(depth)` is called while the producer waits on a full queue (the
    queue is the bottleneck), and `waiting(None)` once it sends again."""

    progress: Callable[[int], None] | None
    stop: threading.Event | None
    waiting: Callable[[int | None], None] | None


@dataclass(frozen=True)
class _Outgoing:
    line: int
    body: str
    attributes: dict[str, Any]


class Producer:
    def __init__(
        self,
        queue_url: str,
        *,
        sqs_client: Any,
        s3_client: Any = None,
        staging_bucket: str | None = None,
        staging_prefix: str = STAGING_PREFIX,
        max_message_bytes: int = INGEST.max_message_bytes,
        validate: bool = True,
        limits: MessageLimits | None = None,
        max_queued: int | None = None,
    ) -> None:
        """`limits`: the store's (max_future, max_body_size), as the handler's store has
        them; by default the store's defaults. `max_queued`: wait while the queue holds this
        many messages or more (None or 0: never wait)."""
        self.queue_url = queue_url
        self.sqs = sqs_client
        self.s3 = s3_client
        self.staging_bucket = staging_bucket
        self.staging_prefix = staging_prefix
        self.staging = StagingLocation(staging_bucket, staging_prefix) if staging_bucket else None
        self.max_body_bytes = max_message_bytes - _ATTRIBUTE_ALLOWANCE
        self.validate = validate
        self.limits = limits or _store_limits()
        if max_queued is not None and max_queued < 0:
            raise ValueError("max_queued must be 0 (no flow control) or more")
        self.max_queued = max_queued or None
        self._headroom = 0  # messages that may be sent before the depth is read again

    @classmethod
    def from_env(cls, **options: Any) -> Producer:
        """From VHS_QUEUE_URL, and VHS_STAGING_BUCKET / VHS_STAGING_PREFIX for claim checks;
        flow control (LOCAL_MAX_QUEUED) when AWS_ENDPOINT_URL is a local server, unless
        `max_queued` is given."""
        import os

        from vhs.aws import aws_client

        (queue_url,) = settings.require(settings.QUEUE_URL, hint=settings.LOCAL_ENV_HINT)
        staging_bucket = settings.get(settings.STAGING_BUCKET) or None
        if options.get("max_queued") is None and is_local_endpoint(
            os.environ.get("AWS_ENDPOINT_URL")
        ):
            options["max_queued"] = LOCAL_MAX_QUEUED
        return cls(
            queue_url,
            sqs_client=aws_client("sqs"),
            s3_client=aws_client("s3") if staging_bucket else None,
            staging_bucket=staging_bucket,
            staging_prefix=settings.get(settings.STAGING_PREFIX, STAGING_PREFIX),
            **options,
        )

    def send(self, messages: Iterable[dict[str, Any]], **flow: Unpack[Flow]) -> SendReport:
        """Send every message (as compact JSON). Messages the handler would refuse (when
        validating) are reported in `refused`, with their 1-based position as the line, and
        not sent. `flow`: see Flow."""
        report = SendReport()
        serialised = self._serialised(messages, report, flow.get("progress"))
        return self._send(serialised, report, **flow)

    def send_lines(
        self, lines: Iterable[tuple[int, bytes | InvalidMessage]], **flow: Unpack[Flow]
    ) -> SendReport:
        """Send each (line number, line) as it is: the line's bytes, without its terminator,
        unchanged. Lines the handler would refuse (when validating) are reported in
        `refused` with their number, and not sent; so is a line given as the InvalidMessage
        that refused it as it was read (over the bound on a line: its bytes were never
        held), validating or not. `flow`: see Flow."""
        return self._send(lines, SendReport(), **flow)

    def _serialised(
        self,
        messages: Iterable[dict[str, Any]],
        report: SendReport,
        progress: Callable[[int], None] | None,
    ) -> Iterator[tuple[int, bytes]]:
        for number, message in enumerate(messages, start=1):
            try:
                text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
                yield number, text.encode()
            except (TypeError, ValueError) as error:  # UnicodeEncodeError is a ValueError
                report.refused.append(Refusal(number, "body", f"not JSON text: {error}"))
                if progress:
                    progress(1)

    def _send(
        self,
        lines: Iterable[tuple[int, bytes | InvalidMessage]],
        report: SendReport,
        progress: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
        waiting: Callable[[int | None], None] | None = None,
    ) -> SendReport:
        batch: list[_Outgoing] = []
        batch_bytes = 0
        stopped_at: int | None = None  # the line read but not looked at once `stop` was set
        unsent: list[_Outgoing] = []  # a batch left in hand: `stop` came while waiting
        self._headroom = 0
        for number, data in lines:
            if stop is not None and stop.is_set():
                stopped_at = number
                break
            outgoing = self._prepare(number, data, report)
            if outgoing is None:
                if progress:
                    progress(1)
                continue
            size = len(outgoing.body.encode()) + _ATTRIBUTE_ALLOWANCE
            if batch and (
                len(batch) == MAX_BATCH_ENTRIES or batch_bytes + size > INGEST.max_message_bytes
            ):
                if not self._room_for(len(batch), report, stop, waiting):
                    unsent, batch = batch, []
                    break
                self._send_batch(batch, report, progress)
                batch, batch_bytes = [], 0
            batch.append(outgoing)
            batch_bytes += size
        if batch:
            if self._room_for(len(batch), report, stop, waiting):
                self._send_batch(batch, report, progress)
            else:
                unsent = batch
        next_line = unsent[0].line if unsent else stopped_at
        if next_line is not None:
            report.interrupted = True
            report.next_line = next_line
        return report

    def _room_for(
        self,
        count: int,
        report: SendReport,
        stop: threading.Event | None,
        waiting: Callable[[int | None], None] | None,
    ) -> bool:
        """Flow control: True once the queue has room for `count` more messages, False if
        `stop` was set while waiting. The depth is read again only after enough messages to
        fill the room it last showed, so most batches cost no extra request."""
        if self.max_queued is None:
            return True
        if self._headroom >= count:
            self._headroom -= count
            return True
        from .queues import queue_depth

        started: float | None = None
        while True:
            depth = queue_depth(self.sqs, self.queue_url)
            held = depth.visible + depth.in_flight + depth.delayed
            if held < self.max_queued:
                break
            if started is None:
                started = time.monotonic()
                report.queue_waits += 1
            if waiting:
                waiting(held)
            if stop is not None and stop.wait(_DEPTH_POLL_SECONDS):
                report.queue_wait_seconds += time.monotonic() - started
                return False
            if stop is None:
                time.sleep(_DEPTH_POLL_SECONDS)
        if started is not None:
            report.queue_wait_seconds += time.monotonic() - started
            if waiting:
                waiting(None)
        self._headroom = self.max_queued - held - count
        return True

    def _prepare(
        self, number: int, data: bytes | InvalidMessage, report: SendReport
    ) -> _Outgoing | None:
        """The message for one line, or None if it was refused or could not be staged."""
        if isinstance(data, InvalidMessage):
            report.refused.append(Refusal(number, data.field, data.reason))
            return None
        if self.validate:
            refused = self.refusal(data)
            if refused is not None:
                report.refused.append(Refusal(number, refused.field, refused.reason))
                return None
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and len(data) <= self.max_body_bytes and not _NOT_SQS_TEXT.search(text):
            return _Outgoing(number, text, {})
        try:
            body, attributes = self._claim_check(data)
        except (ClientError, BotoCoreError, _CannotStage) as error:
            report.not_sent.append(NotSent(number, f"could not be staged: {error}"))
            return None
        report.claim_checks += 1
        return _Outgoing(number, body, attributes)

    def refusal(self, data: bytes) -> InvalidMessage | None:
        """Why the ingest handler would dead-letter a message with this body, or None: the
        handler's own reading (contract.read_message), with this producer's staging
        location and limits. A claim-check pointer's payload is read to be judged too; a
        `record_location` is judged as a pointer, and whether its object exists is known
        only when it is stored (it may be uploaded after the message is sent)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            try:
                parse_json_body(data)  # names the byte, as the handler does for a payload
            except InvalidMessage as error:
                return error
            return InvalidMessage("body", "not UTF-8")
        record = {"body": text, "messageAttributes": {}}
        try:
            read_message(record, staging=self.staging, fetch=self._fetch, limits=self.limits)
        except InvalidMessage as error:
            return error
        return None

    def _fetch(self, location: S3Location, field: str) -> bytes:
        if self.s3 is None:
            raise InvalidMessage(field, "no S3 client to read the claim check's payload")
        try:
            return self.s3.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        except ClientError as error:
            if is_object_missing(error):
                raise MissingStagedObject(field, f"{location} does not exist") from None
            raise

    def _claim_check(self, payload: bytes) -> tuple[str, dict[str, Any]]:
        if not (self.s3 and self.staging_bucket):
            raise _CannotStage(
                "over the queue's size limit, or bytes SQS cannot carry, and no staging "
                "bucket is set (VHS_STAGING_BUCKET) for its claim check"
            )
        key = f"{self.staging_prefix}claim-checks/{uuid.uuid4()}.json"
        self.s3.put_object(
            Bucket=self.staging_bucket, Key=key, Body=payload, ContentType="application/json"
        )
        pointer = claim_check_body(S3Location(self.staging_bucket, key))
        return pointer, claim_check_attributes(len(payload))

    def _send_batch(
        self,
        batch: list[_Outgoing],
        report: SendReport,
        progress: Callable[[int], None] | None,
    ) -> None:
        pending = {str(n): outgoing for n, outgoing in enumerate(batch)}
        for attempt in range(_RETRY_ATTEMPTS):
            entries = [
                {
                    "Id": entry_id,
                    "MessageBody": o.body,
                    **({"MessageAttributes": o.attributes} if o.attributes else {}),
                }
                for entry_id, o in pending.items()
            ]
            response = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            succeeded = response.get("Successful", [])
            report.sent += len(succeeded)
            if progress and succeeded:
                progress(len(succeeded))
            retry: dict[str, _Outgoing] = {}
            for failure in response.get("Failed", []):
                outgoing = pending[failure["Id"]]
                if failure.get("SenderFault"):
                    reason = failure.get("Message", failure["Code"])
                    report.not_sent.append(NotSent(outgoing.line, reason))
                    if progress:
                        progress(1)
                else:
                    retry[failure["Id"]] = outgoing
            if not retry:
                return
            pending = retry
            time.sleep(min(2.0, 0.05 * 2**attempt))  # back off before retrying server faults
        for outgoing in pending.values():
            report.not_sent.append(NotSent(outgoing.line, "SQS kept failing this entry"))
            if progress:
                progress(1)


class _CannotStage(Exception):
    pass


def _store_limits() -> MessageLimits:
    """The limits of the store the handler writes with, by default."""
    from vhs.store_config import DEFAULT_MAX_FUTURE

    return MessageLimits(max_future=DEFAULT_MAX_FUTURE, max_body_size=MAX_BODY_SIZE)
