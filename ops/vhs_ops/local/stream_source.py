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
after the call found no new records and nothing left to retry. What it shares with the SQS
source (threads, invoking, reading a response) is in event_source.py.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vhs import settings
from vhs.aws import error_code
from vhs.changes.stream import MAX_GET_RECORDS, lambda_record
from vhs.shapes import CHANGES, ChangeFeedShape

from .event_source import EventSource, Handler, Invoked, LocalFunction, malformed, reported_failures
from .stack import client, endpoint_environment, function_environment
from .stream_failures import failure_record, sqs_destination

log = logging.getLogger(__name__)

TRIM_HORIZON = "TRIM_HORIZON"
LATEST = "LATEST"


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


@dataclass
class _Shard:
    shard_id: str
    parent_id: str | None
    iterator: str | None = None
    started: bool = False
    closed: bool = False  # its iterator ran out: no more records will come
    buffer: list[dict[str, Any]] = field(default_factory=list)
    last_read: str | None = None  # the last sequence number read (for an expired iterator)
    limit: int = 0  # the next batch's size (halved by bisection)
    retry_position: str | None = None  # the sequence number being retried
    attempts: int = 0  # retries at retry_position

    @property
    def finished(self) -> bool:
        return self.closed and not self.buffer


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
        *,
        region: str | None = None,
        shape: ChangeFeedShape = CHANGES,
        batch_size: int | None = None,
        starting_position: str = TRIM_HORIZON,
        bisect_batch_on_error: bool = True,
        retry_attempts: int | None = None,
        max_record_age_seconds: float | None = None,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        function_name: str = "vhs-local-changes",
        function_timeout_seconds: float | None = None,
        poll_interval: float = 0.1,
        shard_refresh_seconds: float = 5.0,
        on_invocation: Callable[[StreamInvocation], None] | None = None,
    ) -> None:
        if starting_position not in (TRIM_HORIZON, LATEST):
            raise ValueError("starting_position is TRIM_HORIZON or LATEST")
        super().__init__()
        self.streams = streams
        self.stream_arn = stream_arn
        self.handler = handler
        self.region = region or stream_arn.split(":")[3]
        self.batch_size = batch_size or shape.batch_size
        self.starting_position = starting_position
        self.bisect = bisect_batch_on_error
        self.retry_attempts = shape.retry_attempts if retry_attempts is None else retry_attempts
        self.max_record_age = (
            shape.max_record_age_seconds
            if max_record_age_seconds is None
            else max_record_age_seconds
        )
        self.on_failure = on_failure
        self.function_name = function_name
        self.function_timeout = function_timeout_seconds or shape.function_timeout_seconds
        self.poll_interval = poll_interval
        self.shard_refresh_seconds = shard_refresh_seconds
        self.on_invocation = on_invocation
        self.stats = StreamSourceStats()
        self.invocations: list[StreamInvocation] = []
        self.given_up: list[dict[str, Any]] = []
        self._shards: dict[str, _Shard] = {}
        self._refreshed_at: float | None = None
        self._first_refresh = True
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
        return {s.shard_id: len(s.buffer) for s in list(self._shards.values()) if s.buffer}

    # --- polling ---------------------------------------------------------------------------

    def poll_once(self) -> int:
        """One round: refresh the shard list when due, read every readable shard, invoke the
        handler once per shard that has records. Returns the records handled."""
        with self._poll_lock:
            with self._progress:
                round_number = self._rounds_started
                self._rounds_started += 1
            self._refresh_shards()
            handled = 0
            read_any = False
            for shard in list(self._shards.values()):
                if shard.finished or not self._ready(shard):
                    continue
                read_any |= self._read(shard)
                if shard.buffer:
                    handled += self._invoke(shard)
            idle = handled == 0 and not read_any and not self.pending()
            with self._progress:
                if idle:
                    self._last_idle_round = round_number
                self._progress.notify_all()
            return handled

    def _refresh_shards(self) -> None:
        now = time.monotonic()
        due = self._refreshed_at is None or now - self._refreshed_at >= self.shard_refresh_seconds
        if not due and not any(s.finished for s in self._shards.values()):
            return
        self._refreshed_at = now
        found: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
            if start:
                kwargs["ExclusiveStartShardId"] = start
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            found += description.get("Shards") or []
            start = description.get("LastEvaluatedShardId")
            if not start:
                break
        for raw in found:
            shard_id = raw["ShardId"]
            if shard_id in self._shards:
                continue
            shard = _Shard(shard_id, raw.get("ParentShardId"), limit=self.batch_size)
            if self._first_refresh and self.starting_position == LATEST:
                if raw.get("SequenceNumberRange", {}).get("EndingSequenceNumber"):
                    shard.closed = shard.started = True  # closed before we started: skip it
                else:
                    shard.iterator = self._iterator(shard_id, LATEST)
                    shard.started = True
            self._shards[shard_id] = shard
        self._first_refresh = False

    def _ready(self, shard: _Shard) -> bool:
        """A child shard is read only once its parent has been read to its end."""
        parent = self._shards.get(shard.parent_id) if shard.parent_id else None
        return parent is None or parent.finished

    def _iterator(self, shard_id: str, kind: str, sequence_number: str | None = None) -> str:
        kwargs: dict[str, Any] = {
            "StreamArn": self.stream_arn,
            "ShardId": shard_id,
            "ShardIteratorType": kind,
        }
        if sequence_number is not None:
            kwargs["SequenceNumber"] = sequence_number
        return self.streams.get_shard_iterator(**kwargs)["ShardIterator"]

    def _read(self, shard: _Shard) -> bool:
        if shard.closed or len(shard.buffer) >= shard.limit:
            return False
        if not shard.started:
            shard.iterator = self._iterator(shard.shard_id, TRIM_HORIZON)
            shard.started = True
        try:
            response = self.streams.get_records(
                ShardIterator=shard.iterator,
                Limit=min(MAX_GET_RECORDS, max(self.batch_size, 1)),
            )
        except Exception as error:
            if error_code(error) != "ExpiredIteratorException":
                raise
            shard.iterator = (
                self._iterator(shard.shard_id, "AFTER_SEQUENCE_NUMBER", shard.last_read)
                if shard.last_read
                else self._iterator(shard.shard_id, TRIM_HORIZON)
            )
            return False
        records = response.get("Records") or []
        shard.iterator = response.get("NextShardIterator")
        if shard.iterator is None:
            shard.closed = True
        for raw in records:
            shard.buffer.append(lambda_record(raw, stream_arn=self.stream_arn, region=self.region))
            shard.last_read = str(raw["dynamodb"]["SequenceNumber"])
        self.stats.records_read += len(records)
        return bool(records)

    # --- invoking --------------------------------------------------------------------------

    def _invoke(self, shard: _Shard) -> int:
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

    def _count_retry(self, shard: _Shard, batch: list[dict[str, Any]], error: str | None) -> None:
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
        self, shard: _Shard, batch: list[dict[str, Any]], condition: str, error: str | None
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


# --- the local change feed ----------------------------------------------------------------


@dataclass
class LocalChangeFeed(LocalFunction):
    """The change feed on the local stack, running: the stream source invoking the real
    `changes` handler with the function's environment (as infra/changes.py sets it), reading
    the table's stream and publishing to `topic_arn` (an SNS FIFO topic:
    `vhs_ops.provisioning.create_change_topic`). `vhs local up` runs it beside the ingest pipeline.

    `threaded=False` leaves polling to `drain()` (and `source.poll_once()`) in the caller's
    thread. `dlq_url`, when set, receives what the source gives up on, as the deployed DLQ
    does. Other keyword arguments go to `DynamoDBStreamSource`."""

    endpoint: str
    table_name: str
    topic_arn: str
    bucket_name: str
    prefix: str = ""
    region: str = "us-east-1"
    dlq_url: str | None = None
    threaded: bool = True
    handler: Handler | None = None
    function_name: str = "vhs-local-changes"
    source_options: dict[str, Any] = field(default_factory=dict)
    source: DynamoDBStreamSource | None = field(default=None, init=False)
    module: Any = field(default=None, init=False)
    stream_arn: str = field(default="", init=False)
    _exit: Any = field(default=None, init=False)

    def function_env(self) -> dict[str, str]:
        """The function's environment, as infra/changes.py sets it (the prefix even when
        empty: it overrides one in this process's)."""
        return {
            **endpoint_environment(self.endpoint, self.region),
            **settings.changes_environment(topic_arn=self.topic_arn, bucket_name=self.bucket_name),
            settings.PREFIX: self.prefix,
            **function_environment(settings.CHANGES_FUNCTION),
        }

    def _start(self, running: contextlib.ExitStack) -> None:
        handler = self._load(running, settings.CHANGES_FUNCTION, self.function_env())
        dynamodb = client("dynamodb", self.endpoint, self.region)
        table = dynamodb.describe_table(TableName=self.table_name)["Table"]
        self.stream_arn = table["LatestStreamArn"]
        options = dict(self.source_options)
        if self.dlq_url and "on_failure" not in options:
            options["on_failure"] = sqs_destination(
                client("sqs", self.endpoint, self.region), self.dlq_url
            )
        self.source = DynamoDBStreamSource(
            client("dynamodbstreams", self.endpoint, self.region),
            self.stream_arn,
            handler,
            region=self.region,
            function_name=self.function_name,
            **options,
        )
        if self.threaded:
            running.enter_context(self.source)

    def drain(self, timeout: float = 60.0) -> None:
        """Wait until every change written so far has been handled (see the source's)."""
        if self.source is None:
            raise RuntimeError("the change feed is not running: start() it, or use `with`")
        self.source.drain(timeout)
