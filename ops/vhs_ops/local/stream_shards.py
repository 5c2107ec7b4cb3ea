"""A DynamoDB stream's shards, read as Lambda's stream poller reads them: listed
(DescribeStream, page by page, again when due or when a shard ran out), a child only once its
parent has been read to its end, each from TRIM_HORIZON (or LATEST for the shards open when
reading starts), its iterator renewed when it expires. Apart from the event source
(stream_source.py), which decides what to do with the records read: invoke, checkpoint, retry,
give up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from vhs.aws import error_code
from vhs.changes.stream import MAX_GET_RECORDS, lambda_record

TRIM_HORIZON = "TRIM_HORIZON"
LATEST = "LATEST"


@dataclass
class Shard:
    """One shard as the poller knows it: where its reading is, and the records read and not
    yet checkpointed past."""

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


@dataclass(kw_only=True)
class ShardReader:
    """The shards of the stream `stream_arn`, and their records read into their buffers, as
    Lambda's records (`lambda_record`)."""

    streams: Any
    stream_arn: str
    region: str
    batch_size: int
    starting_position: str
    refresh_seconds: float
    shards: dict[str, Shard] = field(default_factory=dict, init=False)
    _refreshed_at: float | None = field(default=None, init=False)
    _first_refresh: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        if self.starting_position not in (TRIM_HORIZON, LATEST):
            raise ValueError("starting_position is TRIM_HORIZON or LATEST")

    def pending(self) -> dict[str, int]:
        """Records read but not yet checkpointed past, by shard."""
        return {s.shard_id: len(s.buffer) for s in list(self.shards.values()) if s.buffer}

    def refresh(self) -> None:
        """List the stream's shards, when due (or when one has run out), and take in the new."""
        now = time.monotonic()
        due = self._refreshed_at is None or now - self._refreshed_at >= self.refresh_seconds
        if not due and not any(s.finished for s in self.shards.values()):
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
            if shard_id in self.shards:
                continue
            shard = Shard(shard_id, raw.get("ParentShardId"), limit=self.batch_size)
            if self._first_refresh and self.starting_position == LATEST:
                if raw.get("SequenceNumberRange", {}).get("EndingSequenceNumber"):
                    shard.closed = shard.started = True  # closed before we started: skip it
                else:
                    shard.iterator = self._iterator(shard_id, LATEST)
                    shard.started = True
            self.shards[shard_id] = shard
        self._first_refresh = False

    def ready(self, shard: Shard) -> bool:
        """A child shard is read only once its parent has been read to its end."""
        parent = self.shards.get(shard.parent_id) if shard.parent_id else None
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

    def read(self, shard: Shard) -> int:
        """Read the next records of `shard` into its buffer, unless it holds a batch already:
        how many were read."""
        if shard.closed or len(shard.buffer) >= shard.limit:
            return 0
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
            return 0
        records = response.get("Records") or []
        shard.iterator = response.get("NextShardIterator")
        if shard.iterator is None:
            shard.closed = True
        for raw in records:
            shard.buffer.append(lambda_record(raw, stream_arn=self.stream_arn, region=self.region))
            shard.last_read = str(raw["dynamodb"]["SequenceNumber"])
        return len(records)
