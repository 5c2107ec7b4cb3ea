"""Lambda's DynamoDB Streams event source, emulated: the local change feed's poller.

`DynamoDBStreamSource` does locally what a DynamoDB stream event source mapping does on AWS,
with the settings of `shapes.CHANGES` (the ones infra/changes.py deploys):

* it lists the stream's shards (DescribeStream) and reads each with GetShardIterator
  (TRIM_HORIZON, or LATEST for the shards open when it starts) and GetRecords, a child shard
  only once its parent has been read to its end, as Lambda does, so an item's records are
  handled in order;
* it invokes the handler with the event Lambda sends: ``{"Records": [...]}``, each record
  with eventID, eventName (INSERT, MODIFY, REMOVE), eventVersion, eventSource
  "aws:dynamodb", awsRegion, eventSourceARN and ``dynamodb`` (ApproximateCreationDateTime in
  epoch seconds, Keys, NewImage, OldImage, SequenceNumber, SizeBytes, StreamViewType), binary
  values base64-encoded as in Lambda's JSON (`lambda_record`, in vhs/changes/stream.py: the
  change feed's replay reads the stream with it too);
* ReportBatchItemFailures: a response that lists sequence numbers in `batchItemFailures`
  checkpoints at the lowest of them: the records before it are done and everything from it
  on is delivered again. A handler that raises, times out or answers malformed fails the
  whole batch; with `bisect_batch_on_error` the next attempt takes half of it (a split does
  not count as a retry, as on AWS). After `retry_attempts` retries of the same position, or
  once the batch's first record is older than `max_record_age_seconds`, the batch is given up
  on: `on_failure` receives Lambda's on-failure record (`DDBStreamBatchInfo`: the shard and
  the range of sequence numbers, not the records), and the source moves on.

One execution environment per source: invocations run one after another in one thread, shard
by shard, as with a parallelization factor of 1. `start()`/`stop()` run it in a thread;
`poll_once()` runs one round in the caller's thread; `drain()` waits until a round that began
after the call found no new records and nothing left to retry. Its settings are one value,
`StreamSourceConfig`. `LocalChangeFeed` (runners.py) runs it on the local stack with the real
`changes` handler. What it shares with the SQS source (threads, invoking, reading a
response) is in event_source.py; how the stream's shards are listed and read is in
stream_shards.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vhs.shapes import CHANGES, ChangeFeedShape

from .event_source import EventSource, Handler, Invoked, malformed, reported_failures
from .stream_failures import failure_record
from .stream_shards import TRIM_HORIZON, Shard, ShardReader

log = logging.getLogger(__name__)


# --- the response -------------------------------------------------------------------------


def settle_response(response: Any, sequence_numbers: list[str]) -> tuple[int | None, str | None]:
    """(the index in the batch to retry from, or None when the batch succeeded; why the
    whole batch failed, or None) for a handler's response, as Lambda reads it for streams:
    None, an empty response and an empty or null `batchItemFailures` are complete success;
    listed sequence numbers checkpoint at the lowest; an identifier that is empty, null,
    under another key or not in the batch, or a response of another shape, fails the whole
    batch."""
    listed = reported_failures(response, sequence_numbers)
    if listed is None:
        return 0, malformed(response)
    if not listed:
        return None, None
    position = {seq: n for n, seq in enumerate(sequence_numbers)}
    return min(position[i] for i in listed), None


# --- the event source ---------------------------------------------------------------------


@dataclass
class StreamInvocation(Invoked):
    shard_id: str
    sequence_numbers: list[str]
    retry_from: str | None  # the checkpoint: this record and every later one come again


@dataclass
class StreamSourceStats:
    records_read: int = 0
    invocations: int = 0
    records_done: int = 0  # checkpointed past
    partial_failures: int = 0
    failed_invocations: int = 0
    bisections: int = 0
    batches_given_up: int = 0
    records_given_up: int = 0


@dataclass(frozen=True)
class StreamSourceConfig:
    """How the emulated event source mapping reads and retries, as one value (as s3transfer's
    TransferConfig): what an event source mapping is given, each None taking the change
    feed's shape (`shape`, the one infra/changes.py deploys), and the local poller's own
    timings."""

    shape: ChangeFeedShape = CHANGES
    batch_size: int | None = None
    starting_position: str = TRIM_HORIZON
    bisect_batch_on_error: bool = True
    retry_attempts: int | None = None
    max_record_age_seconds: float | None = None
    function_name: str = "vhs-local-changes"
    function_timeout_seconds: float | None = None
    poll_interval: float = 0.1
    shard_refresh_seconds: float = 5.0


class DynamoDBStreamSource(EventSource):
    """A DynamoDB stream event source mapping with ReportBatchItemFailures, bisection on
    error, bounded retries and an on-failure destination, polled in one thread. stop() stops
    polling after the invocation in progress, if any."""

    kind = "stream source"

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        handler: Handler,
        config: StreamSourceConfig | None = None,
        *,
        region: str | None = None,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        on_invocation: Callable[[StreamInvocation], None] | None = None,
    ) -> None:
        config = config or StreamSourceConfig()
        shape = config.shape
        super().__init__()
        self.config = config
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region or stream_arn.split(":")[3]
        self.batch_size = config.batch_size or shape.batch_size
        self.reader = ShardReader(
            streams=streams,
            stream_arn=stream_arn,
            region=self.region,
            batch_size=self.batch_size,
            starting_position=config.starting_position,
            refresh_seconds=config.shard_refresh_seconds,
        )
        self.bisect = config.bisect_batch_on_error
        retry_attempts = config.retry_attempts
        self.retry_attempts = shape.retry_attempts if retry_attempts is None else retry_attempts
        max_record_age = config.max_record_age_seconds
        self.max_record_age = (
            shape.max_record_age_seconds if max_record_age is None else max_record_age
        )
        self.on_failure = on_failure
        self.function_name = config.function_name
        self.function_timeout = config.function_timeout_seconds or shape.function_timeout_seconds
        self.poll_interval = config.poll_interval
        self.on_invocation = on_invocation
        self.stats = StreamSourceStats()
        self.invocations: list[StreamInvocation] = []
        self.given_up: list[dict[str, Any]] = []
        self._poll_lock = threading.Lock()
        self._progress = threading.Condition()
        self._rounds_started = 0
        self._last_idle_round = -1

    def _workers(self) -> list[tuple[str, Callable[[], None]]]:
        return [("ddb-stream-poller", self._run)]

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self.poll_once() == 0:
                self._stopping.wait(self.poll_interval)

    def _failed(self) -> None:  # surfaced by check() and drain()
        with self._progress:
            self._progress.notify_all()

    # --- waiting ---------------------------------------------------------------------------

    def drain(self, timeout: float = 60.0) -> None:
        """Return once a polling round that began after this call found no new record and
        nothing to retry: every record written before the call has been handled (or given
        up on). Polls in the caller's thread when the source is not started. Raises
        TimeoutError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._progress:
            target = self._rounds_started
        while True:
            self.check()
            if not self.running:
                self.poll_once()
            with self._progress:
                if self._last_idle_round >= target:
                    return
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"stream not drained after {timeout}s: {self.pending()}")
                if self.running:
                    self._progress.wait(min(0.2, max(0.0, deadline - time.monotonic())))

    def pending(self) -> dict[str, int]:
        """Records read but not yet checkpointed past, by shard."""
        return self.reader.pending()

    # --- polling ---------------------------------------------------------------------------

    def poll_once(self) -> int:
        """One round: refresh the shard list when due, read every readable shard, invoke the
        handler once per shard that has records. Returns the records handled."""
        with self._poll_lock:
            with self._progress:
                round_number = self._rounds_started
                self._rounds_started += 1
            self.reader.refresh()
            handled = 0
            read_any = False
            for shard in list(self.reader.shards.values()):
                if shard.finished or not self.reader.ready(shard):
                    continue
                read = self.reader.read(shard)
                self.stats.records_read += read
                read_any |= read > 0
                if shard.buffer:
                    handled += self._invoke(shard)
            idle = handled == 0 and not read_any and not self.pending()
            with self._progress:
                if idle:
                    self._last_idle_round = round_number
                self._progress.notify_all()
            return handled

    # --- invoking --------------------------------------------------------------------------

    def _invoke(self, shard: Shard) -> int:
        batch = shard.buffer[: max(1, shard.limit)]
        sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
        if self._too_old(batch[0]):
            self._give_up(shard, batch, "RecordAgeExceeded", None)
            return len(batch)
        call = self._call(
            [dict(r) for r in batch],
            lambda response: settle_response(response, sequence_numbers),
            0,
        )
        retry_at, error = call.outcome, call.error
        done = len(batch) if retry_at is None else retry_at
        del shard.buffer[:done]
        self.stats.invocations += 1
        self.stats.records_done += done
        invocation = StreamInvocation(
            shard.shard_id,
            sequence_numbers,
            None if retry_at is None else sequence_numbers[retry_at],
            request_id=call.request_id,
            error=error,
            seconds=call.seconds,
        )
        self.invocations.append(invocation)
        if retry_at is None:
            shard.limit, shard.retry_position, shard.attempts = self.batch_size, None, 0
        elif error is not None:
            self.stats.failed_invocations += 1
            if self.bisect and len(batch) > 1:
                # A split is not a retry: the first half is tried next.
                self.stats.bisections += 1
                shard.limit = max(1, len(batch) // 2)
            else:
                self._count_retry(shard, batch, error)
        else:
            self.stats.partial_failures += 1
            # Lambda retries from the checkpoint: the rest of the batch, from its first failure.
            self._count_retry(shard, batch[retry_at:], None)
        if self.on_invocation:
            self.on_invocation(invocation)
        return len(batch)

    def _count_retry(self, shard: Shard, batch: list[dict[str, Any]], error: str | None) -> None:
        position = batch[0]["dynamodb"]["SequenceNumber"]
        if shard.retry_position != position:
            shard.retry_position, shard.attempts = position, 0
        shard.attempts += 1
        if shard.attempts > self.retry_attempts:
            self._give_up(shard, batch, "RetryAttemptsExhausted", error)

    def _too_old(self, record: dict[str, Any]) -> bool:
        created = record["dynamodb"].get("ApproximateCreationDateTime")
        return created is not None and time.time() - created > self.max_record_age

    def _give_up(
        self, shard: Shard, batch: list[dict[str, Any]], condition: str, error: str | None
    ) -> None:
        """Drop `batch` (the head of the shard's buffer) and tell the on-failure destination."""
        record = failure_record(
            batch,
            shard_id=shard.shard_id,
            stream_arn=self.stream_arn,
            condition=condition,
            function_arn=(
                f"arn:aws:lambda:{self.region}:000000000000:function:{self.function_name}"
            ),
            attempts=shard.attempts + 1,
            error=error,
        )
        del shard.buffer[: len(batch)]
        shard.limit, shard.retry_position, shard.attempts = self.batch_size, None, 0
        self.stats.batches_given_up += 1
        self.stats.records_given_up += len(batch)
        self.given_up.append(record)
        log.warning("gave up on a stream batch: %s", record["DDBStreamBatchInfo"])
        if self.on_failure is not None:
            self.on_failure(record)
