"""The change feed's notifications published: to the SNS FIFO topic, in order, and again for a
stream range the event source gave up on. Apart from feed.py, which says what a stream record
means (its `Change`s) and knows nothing of SNS's calls.

`ChangePublisher` publishes notifications to an SNS FIFO topic in order: the message group is
the record id (order per id), the deduplication id is a digest of (id, version, content hash,
updated_at, and a replay's run id), so a retried record is dropped by SNS within its 5-minute
deduplication window. It never publishes a change while an earlier one is unconfirmed: it
stops at the first failure and reports how many changes, from the start, are known to be
published. `replay` reads a dead-lettered range back from the stream and publishes its
notifications again.

This module has no Lambda or Powertools dependency; handlers/changes.py wires it to Lambda.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..history.stored_deltas import Dictionaries
from ..shapes import SNS_MAX_MESSAGE_BYTES, SNS_PUBLISH_BATCH_ENTRIES
from .feed import Change, changes_from_record


@dataclass
class PublishResult:
    """`published` changes, from the start of the list, are known to be on the topic; the
    next one is not (`error` says why), and neither is any after it as far as the caller may
    assume (some may be, and are then dropped as duplicates when retried)."""

    published: int
    error: str | None = None
    calls: int = 0

    @property
    def complete(self) -> bool:
        return self.error is None


def _attributes(change: Change) -> dict[str, dict[str, str]]:
    return {
        "change": {"DataType": "String", "StringValue": change.change},
        "id": {"DataType": "String", "StringValue": change.id},
        "version": {"DataType": "Number", "StringValue": str(change.version)},
    }


def _entry_size(entry: Mapping[str, Any]) -> int:
    size = len(entry["Message"].encode())
    for name, value in entry["MessageAttributes"].items():
        size += len(name.encode()) + len(value["DataType"]) + len(value["StringValue"].encode())
    return size


def chunks(changes: Sequence[Change]) -> Iterable[tuple[int, list[Change]]]:
    """(index of the first, changes) for each PublishBatch call, in order: at most 10
    entries, at most 256 KB, and never two changes of one id in one call, so a failed entry
    never has a later change of its id published beside it."""
    start, chunk, groups, size = 0, [], set(), 0
    for index, change in enumerate(changes):
        attributes = _attributes(change)
        entry_size = _entry_size({"Message": change.body(), "MessageAttributes": attributes})
        if chunk and (
            len(chunk) == SNS_PUBLISH_BATCH_ENTRIES
            or change.group_id in groups
            or size + entry_size > SNS_MAX_MESSAGE_BYTES
        ):
            yield start, chunk
            start, chunk, groups, size = index, [], set(), 0
        chunk.append(change)
        groups.add(change.group_id)
        size += entry_size
    if chunk:
        yield start, chunk


@dataclass
class ChangePublisher:
    """Publishes notifications to the SNS FIFO topic `topic_arn`, in order."""

    sns: Any
    topic_arn: str

    def entries(self, changes: Sequence[Change]) -> list[dict[str, Any]]:
        return [
            {
                "Id": str(n),
                "Message": change.body(),
                "MessageAttributes": _attributes(change),
                "MessageGroupId": change.group_id,
                "MessageDeduplicationId": change.deduplication_id,
            }
            for n, change in enumerate(changes)
        ]

    def publish(
        self, changes: Sequence[Change], *, keep_going: Callable[[], bool] | None = None
    ) -> PublishResult:
        """PublishBatch in stream order, stopping at the first failure (or when `keep_going`
        says there is no time left). Raises nothing for SNS's errors: they are the result's."""
        result = PublishResult(0)
        for start, chunk in chunks(changes):
            if keep_going is not None and not keep_going():
                result.error = "stopped: the invocation is running out of time"
                return result
            entries = self.entries(chunk)
            try:
                response = self.sns.publish_batch(
                    TopicArn=self.topic_arn, PublishBatchRequestEntries=entries
                )
            except Exception as error:  # botocore's ClientError, BotoCoreError: retried later
                result.calls += 1
                result.error = f"PublishBatch failed: {type(error).__name__}: {error}"
                return result
            result.calls += 1
            failed = {f["Id"]: f for f in response.get("Failed") or []}
            succeeded = {s["Id"] for s in response.get("Successful") or []}
            for n, entry in enumerate(entries):
                if entry["Id"] in failed or entry["Id"] not in succeeded:
                    reason = failed.get(entry["Id"], {})
                    result.published = start + n
                    result.error = (
                        f"entry for {chunk[n].id!r} version {chunk[n].version} failed: "
                        f"{reason.get('Code', 'missing from the response')} "
                        f"{reason.get('Message', '')}".strip()
                    )
                    return result
            result.published = start + len(chunk)
        return result


# --- replaying a dead-lettered range of the stream -----------------------------------------


def replay(
    failure: Mapping[str, Any] | str,
    streams: Any,
    publisher: ChangePublisher,
    *,
    bucket: str,
    prefix: str = "",
    dictionaries: Dictionaries | None = None,
) -> PublishResult:
    """Publish again the notifications of a stream range that the event source gave up on.

    `failure` is a message from the change feed's DLQ: Lambda's on-failure record, which
    names the stream, the shard and the range of sequence numbers (`DDBStreamBatchInfo`), not
    the records. They are read back from the stream, so this works while the stream still
    holds them (24 hours; the event source gives up after at most CHANGES.max_record_age).
    Notifications already published within SNS's 5-minute window are dropped as duplicates;
    older ones reach subscribers again, which deduplicate by (id, version)."""
    from .stream import lambda_record, read_range

    info = (json.loads(failure) if isinstance(failure, str) else failure)["DDBStreamBatchInfo"]
    region = info["streamArn"].split(":")[3]
    records = [
        lambda_record(raw, stream_arn=info["streamArn"], region=region)
        for raw in read_range(
            streams,
            info["streamArn"],
            info["shardId"],
            info["startSequenceNumber"],
            info["endSequenceNumber"],
        )
    ]
    changes = [
        change
        for record in records
        for change in changes_from_record(
            record, bucket=bucket, prefix=prefix, dictionaries=dictionaries
        ).changes
    ]
    return publisher.publish(changes)
