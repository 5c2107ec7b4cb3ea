"""The producer side: put records on the ingest queue.

Messages go in batches of up to 10 (SendMessageBatch), never over SQS's 1 MiB per request.
A message too large for the queue is offloaded to the staging location and sent as a claim
check in the AWS SQS Extended Client's own format, so the same consumer path serves messages
from this producer and from the Java and Python Extended Clients. Entries that a batch
reports as failed are retried with backoff; a message that still cannot be sent is reported,
never dropped silently.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import settings
from ..errors import ConfigurationError, InvalidInput
from ..resources import INGEST, STAGING_PREFIX
from .contract import validate_message
from .staging import S3Location, claim_check_attributes, claim_check_body

MAX_BATCH_ENTRIES = 10
# Room for message attributes and the batch request's own framing.
_ATTRIBUTE_ALLOWANCE = 1024
_RETRY_ATTEMPTS = 6


@dataclass
class SendReport:
    sent: int = 0
    claim_checks: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)  # (index, reason)

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class _Outgoing:
    index: int
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
    ) -> None:
        self.queue_url = queue_url
        self.sqs = sqs_client
        self.s3 = s3_client
        self.staging_bucket = staging_bucket
        self.staging_prefix = staging_prefix
        self.max_body_bytes = max_message_bytes - _ATTRIBUTE_ALLOWANCE
        self.validate = validate

    @classmethod
    def from_env(cls, **options: Any) -> Producer:
        """From VHS_QUEUE_URL, and VHS_STAGING_BUCKET / VHS_STAGING_PREFIX for claim checks."""
        from ..aws import aws_client

        (queue_url,) = settings.require(settings.QUEUE_URL, hint="try: vhs local up")
        staging_bucket = settings.get(settings.STAGING_BUCKET) or None
        return cls(
            queue_url,
            sqs_client=aws_client("sqs"),
            s3_client=aws_client("s3") if staging_bucket else None,
            staging_bucket=staging_bucket,
            staging_prefix=settings.get(settings.STAGING_PREFIX, STAGING_PREFIX),
            **options,
        )

    def send(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> SendReport:
        """Send every message; `progress(n)` is called as n more messages are accounted for.
        Invalid messages (when validating) are reported with their field, not sent."""
        report = SendReport()
        batch: list[_Outgoing] = []
        batch_bytes = 0
        for outgoing in self._prepare(messages, report, progress):
            size = len(outgoing.body.encode()) + _ATTRIBUTE_ALLOWANCE
            if batch and (
                len(batch) == MAX_BATCH_ENTRIES or batch_bytes + size > INGEST.max_message_bytes
            ):
                self._send_batch(batch, report, progress)
                batch, batch_bytes = [], 0
            batch.append(outgoing)
            batch_bytes += size
        if batch:
            self._send_batch(batch, report, progress)
        return report

    def _prepare(
        self,
        messages: Iterable[dict[str, Any]],
        report: SendReport,
        progress: Callable[[int], None] | None,
    ) -> Iterator[_Outgoing]:
        for index, message in enumerate(messages):
            if self.validate:
                try:
                    validate_message(message)
                except InvalidInput as error:
                    report.failed.append((index, str(error)))
                    if progress:
                        progress(1)
                    continue
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
            attributes: dict[str, Any] = {}
            if len(body.encode()) > self.max_body_bytes:
                body, attributes = self._claim_check(body)
                report.claim_checks += 1
            yield _Outgoing(index, body, attributes)

    def _claim_check(self, body: str) -> tuple[str, dict[str, Any]]:
        if not (self.s3 and self.staging_bucket):
            raise ConfigurationError(
                "a message is over the queue's size limit and no staging bucket is set "
                "(VHS_STAGING_BUCKET) for its claim check"
            )
        payload = body.encode()
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
                    report.failed.append((outgoing.index, failure.get("Message", failure["Code"])))
                    if progress:
                        progress(1)
                else:
                    retry[failure["Id"]] = outgoing
            if not retry:
                return
            pending = retry
            time.sleep(min(2.0, 0.05 * 2**attempt))  # back off before retrying server faults
        for outgoing in pending.values():
            report.failed.append((outgoing.index, "SQS kept failing this entry"))
            if progress:
                progress(1)
