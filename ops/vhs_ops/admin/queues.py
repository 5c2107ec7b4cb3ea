"""Reading an SQS queue from outside it: its depth, and a pass that sees every message once.

Operator side (the `vhs dlq` tool, the producer's flow control, the local event source); never
in the Lambda asset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

# Stop a pass after this many receives in a row that brought only messages already seen.
_STALE_RECEIVES = 10


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int  # received by someone and not yet deleted or released
    delayed: int

    @property
    def empty(self) -> bool:
        return self.visible == 0 and self.in_flight == 0 and self.delayed == 0


_DEPTH_ATTRIBUTES = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def queue_depth(sqs: Any, queue_url: str) -> QueueDepth:
    """A queue's visible, in-flight and delayed messages (one GetQueueAttributes)."""
    found = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=_DEPTH_ATTRIBUTES)
    return QueueDepth(*(int(found.get("Attributes", {}).get(n, 0)) for n in _DEPTH_ATTRIBUTES))


class QueuePass:
    """One pass over a queue: every message received once, held invisible (for
    `visibility_timeout` seconds at a time) until the pass ends, then made visible again
    unless it was deleted (`forget`)."""

    def __init__(
        self, sqs: Any, queue_url: str, visibility_timeout: int, wait_seconds: int
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.visibility_timeout = visibility_timeout
        self.wait_seconds = wait_seconds
        self.held: dict[str, str] = {}  # message id -> latest receipt handle

    def __enter__(self) -> QueuePass:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def messages(self, limit: int | None) -> Iterator[dict[str, Any]]:
        seen: set[str] = set()
        stale = 0
        while limit is None or len(seen) < limit:
            want = 10 if limit is None else max(1, min(10, limit - len(seen)))
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=want,
                VisibilityTimeout=self.visibility_timeout,
                WaitTimeSeconds=self.wait_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            if not received:
                return
            # Hold the whole batch before handing out any of it, so that an interruption
            # releases the messages not yet looked at too.
            for message in received:
                self.held[message["MessageId"]] = message["ReceiptHandle"]
            fresh = [m for m in received if m["MessageId"] not in seen]
            # (A message seen before had its timeout run out mid-pass: hidden again, and
            # not handed out twice.)
            seen.update(m["MessageId"] for m in fresh)
            yield from fresh
            stale = 0 if fresh else stale + 1
            if stale >= _STALE_RECEIVES:
                return

    def forget(self, message_id: str) -> None:
        self.held.pop(message_id, None)

    def release(self) -> None:
        """Make every held message visible again (best effort: a handle that expired means
        the message is visible already)."""
        handles = list(self.held.items())
        self.held.clear()
        for start in range(0, len(handles), 10):
            entries = [
                {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                for n, (_, handle) in enumerate(handles[start : start + 10])
            ]
            try:
                self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError):
                continue  # they come back when their visibility timeout ends
