"""Lambda's SQS event source, emulated: the local pipeline's poller.

`SqsEventSource` does locally what an SQS event source mapping does on AWS, with the settings
of `shapes.INGEST` (the ones the CDK deploys):

* it long-polls the queue (ReceiveMessage, at most 10 at a time, every system and message
  attribute) and gathers a batch until it holds `batch_size` messages, the batching window has
  passed since the batch's first message, or the next message would take the event over
  Lambda's 6 MB invocation payload;
* it invokes the real handler with the event Lambda sends (sqs_event.py's `lambda_record`)
  and a context object;
* ReportBatchItemFailures: it deletes every message of the batch that the response does not
  list in `batchItemFailures`. A listed message is left alone: it reappears after the queue's
  visibility timeout with a higher ApproximateReceiveCount, and once it has been received
  maxReceiveCount times SQS's redrive policy moves it to the DLQ. A handler that raises, times
  out or returns a malformed response fails the whole batch, as on AWS.

One execution environment: invocations run one after another in one thread, as in one Lambda
sandbox (the handler's module state, Powertools' BatchProcessor included, is not meant to be
shared by concurrent invocations). The next batch is received while the handler runs, as
Lambda's pollers do. Concurrency comes from inside the handler, which stores a batch's
messages in parallel.

`LocalPipeline` (runners.py) runs it on the local stack with the real ingest handler, beside
the DLQ alarm evaluator. What it shares with the stream source (threads, invoking, reading a
response) is in event_source.py.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vhs.shapes import INGEST

from ..admin.queues import QueueDepth, queue_depth
from .event_source import EventSource, Handler, Invoked, malformed, reported_failures
from .sqs_event import lambda_record

# Lambda's limit on a synchronous invocation's payload; an SQS batch never exceeds it.
MAX_INVOCATION_PAYLOAD_BYTES = 6 * 1024 * 1024
MAX_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages
MAX_DELETE = 10  # DeleteMessageBatch's entries


# --- the response -------------------------------------------------------------------------


def settle_response(response: Any, message_ids: list[str]) -> tuple[list[str], str | None]:
    """(the messages to leave on the queue, why the whole batch failed or None) for a
    handler's response, under ReportBatchItemFailures, as on AWS: None, an empty response and
    an empty or null `batchItemFailures` are complete success; a response of another shape,
    or an identifier that is empty, null, under another key or not in the batch, fails the
    whole batch."""
    listed = reported_failures(response, message_ids)
    if listed is None:
        return list(message_ids), malformed(response)
    return [i for i in message_ids if i in set(listed)], None


# --- the event source ---------------------------------------------------------------------


@dataclass
class Invocation(Invoked):
    message_ids: list[str]
    receive_counts: list[int]
    failed: list[str]  # left on the queue, to be redelivered


@dataclass
class EventSourceStats:
    received: int = 0
    invocations: int = 0
    deleted: int = 0
    item_failures: int = 0  # messages left on the queue by a partial or whole-batch failure
    failed_invocations: int = 0
    redeliveries: int = 0  # messages received with ApproximateReceiveCount > 1
    delete_errors: int = 0
    receive_errors: int = 0
    max_receive_count: int = 0


_STOP = object()


class SqsEventSource(EventSource):
    """An SQS event source mapping with ReportBatchItemFailures, run in two threads: a poller
    that receives and gathers batches, and the execution environment that invokes `handler`
    and deletes what succeeded. stop() stops polling; batches already received are still
    invoked (they are in flight, and would otherwise wait out the visibility timeout)."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        *,
        queue_arn: str | None = None,
        region: str | None = None,
        shape: Any = INGEST,
        batch_size: int | None = None,
        batching_window_seconds: float | None = None,
        function_name: str = "vhs-local-ingest",
        poll_wait_seconds: int = 1,
        on_invocation: Callable[[Invocation], None] | None = None,
    ) -> None:
        super().__init__()
        self.sqs = sqs
        self.queue_url = queue_url
        self.handler = handler
        settings = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn", "VisibilityTimeout"]
        )["Attributes"]
        self.queue_arn = queue_arn or settings["QueueArn"]
        self.visibility_timeout = int(settings["VisibilityTimeout"])
        self.region = region or self.queue_arn.split(":")[3]
        self.batch_size = batch_size or shape.batch_size
        self.batching_window = (
            shape.max_batching_window_seconds
            if batching_window_seconds is None
            else batching_window_seconds
        )
        if self.batching_window >= self.visibility_timeout:
            # AWS: visibility timeout >= 6x the function timeout plus the batching window.
            # Gathering longer than the timeout would hand a message back to the queue (and
            # count another receive) before it is even invoked.
            raise ValueError(
                f"the batching window ({self.batching_window}s) must be shorter than the "
                f"queue's visibility timeout ({self.visibility_timeout}s)"
            )
        self.function_timeout = shape.function_timeout_seconds
        self.memory_mb = shape.function_memory_mb
        self.function_name = function_name
        self.poll_wait_seconds = poll_wait_seconds
        self.on_invocation = on_invocation
        self.stats = EventSourceStats()
        self.invocations: deque[Invocation] = deque(maxlen=10_000)  # the latest
        self._handoff: queue.Queue[Any] = queue.Queue(maxsize=1)  # one batch received ahead
        self._lock = threading.Lock()

    def _workers(self) -> list[tuple[str, Callable[[], None]]]:
        return [("sqs-poller", self._poll), ("lambda-env", self._invoke_loop)]

    def _failed(self) -> None:
        with contextlib.suppress(queue.Full):
            self._handoff.put_nowait(_STOP)

    # --- waiting -------------------------------------------------------------------------------

    def depth(self) -> QueueDepth:
        return queue_depth(self.sqs, self.queue_url)

    def run_until_idle(self, timeout: float = 60.0, *, poll_interval: float = 0.1) -> None:
        """Wait until the queue holds nothing: no visible, in-flight or delayed message (every
        message stored, acknowledged or dead-lettered). Raises TimeoutError at the deadline.

        Empty means two reads in a row: the three counts are not read at one instant, so a
        message whose visibility timeout runs out between them is in neither (moto counts the
        visible ones first), and one read can say empty while a message waits to be retried."""
        deadline = time.monotonic() + timeout
        empty_reads = 0
        while True:
            self.check()
            depth = self.depth()
            empty_reads = empty_reads + 1 if depth.empty else 0
            if empty_reads == 2:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"queue not drained after {timeout}s: {depth}")
            self._stopping.wait(poll_interval)

    drain = run_until_idle

    # --- the poller ----------------------------------------------------------------------------

    def _receive(self, count: int, wait: int) -> list[dict[str, Any]]:
        try:
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=count,
                WaitTimeSeconds=wait,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        except (BotoCoreError, ClientError):
            # Lambda's pollers retry; so does this one, after a pause.
            with self._lock:
                self.stats.receive_errors += 1
            self._stopping.wait(1.0)
            return []
        return response.get("Messages", [])

    # Lambda's SQS poller in one loop: the batch, its bytes, its window's start and the
    # messages carried to the next batch live across receives, as the poller's state does.
    def _poll(self) -> None:  # noqa: C901, PLR0912
        batch: list[dict[str, Any]] = []
        batch_bytes = 0
        first_at = 0.0
        carried: list[dict[str, Any]] = []
        while not self._stopping.is_set():
            if batch:
                remaining = self.batching_window - (time.monotonic() - first_at)
                if len(batch) >= self.batch_size or remaining <= 0:
                    self._dispatch(batch)
                    batch, batch_bytes = [], 0
                    continue
                wait = self.poll_wait_seconds if remaining >= self.poll_wait_seconds else 0
            else:
                remaining, wait = 0.0, self.poll_wait_seconds
            if carried:
                messages, carried = carried, []
            else:
                messages = self._receive(min(MAX_RECEIVE, self.batch_size - len(batch)), wait)
            if not messages:
                if batch and wait == 0:
                    self._stopping.wait(min(remaining, 0.05))
                continue
            for n, message in enumerate(messages):
                record = lambda_record(message, queue_arn=self.queue_arn, region=self.region)
                size = len(json.dumps(record))
                if batch and batch_bytes + size > MAX_INVOCATION_PAYLOAD_BYTES:
                    carried = messages[n:]
                    self._dispatch(batch)
                    batch, batch_bytes = [], 0
                    break
                if not batch:
                    first_at = time.monotonic()
                seen = next(
                    (i for i, r in enumerate(batch) if r["messageId"] == record["messageId"]), None
                )
                if seen is not None:
                    # Its visibility timeout ran out while the batch was gathering (a window
                    # longer than the timeout): keep the newest receipt, invoke it once.
                    batch[seen] = record
                    continue
                batch.append(record)
                batch_bytes += size
            if self.batching_window <= 0 and batch:
                self._dispatch(batch)
                batch, batch_bytes = [], 0
        # Stopping: what was received is in flight; invoke it rather than strand it.
        if carried:
            for message in carried:
                batch.append(lambda_record(message, queue_arn=self.queue_arn, region=self.region))
        if batch:
            self._dispatch(batch)
        self._handoff.put(_STOP)

    def _dispatch(self, batch: list[dict[str, Any]]) -> None:
        with self._lock:
            self.stats.received += len(batch)
            for record in batch:
                count = int(record["attributes"].get("ApproximateReceiveCount", "1"))
                self.stats.max_receive_count = max(self.stats.max_receive_count, count)
                if count > 1:
                    self.stats.redeliveries += 1
        while True:
            try:
                self._handoff.put(batch, timeout=0.2)
                return
            except queue.Full:
                if self._failure is not None:
                    return

    # --- the execution environment -------------------------------------------------------------

    def _invoke_loop(self) -> None:
        while True:
            batch = self._handoff.get()
            if batch is _STOP:
                return
            self.invoke(batch)

    def invoke(self, records: list[dict[str, Any]]) -> Invocation:
        """Invoke the handler on one batch and settle it: delete the messages that succeeded."""
        message_ids = [r["messageId"] for r in records]
        call = self._call(
            records, lambda response: settle_response(response, message_ids), list(message_ids)
        )
        failed, error = call.outcome, call.error
        left = set(failed)
        self._delete([r for r in records if r["messageId"] not in left])
        invocation = Invocation(
            message_ids,
            [int(r["attributes"].get("ApproximateReceiveCount", "1")) for r in records],
            failed,
            request_id=call.request_id,
            error=error,
            seconds=call.seconds,
        )
        with self._lock:
            self.stats.invocations += 1
            self.stats.item_failures += len(failed)
            self.stats.failed_invocations += error is not None
            self.invocations.append(invocation)
        if self.on_invocation:
            self.on_invocation(invocation)
        return invocation

    def _delete(self, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), MAX_DELETE):
            chunk = records[start : start + MAX_DELETE]
            try:
                response = self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(n), "ReceiptHandle": r["receiptHandle"]}
                        for n, r in enumerate(chunk)
                    ],
                )
            except (BotoCoreError, ClientError):
                # Not deleted: the messages come back after the visibility timeout and are
                # stored again, which ordering makes harmless (at-least-once delivery).
                response = {"Failed": chunk}
            with self._lock:
                self.stats.deleted += len(response.get("Successful", []))
                self.stats.delete_errors += len(response.get("Failed", []))
