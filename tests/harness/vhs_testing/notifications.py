"""What a subscriber of the change feed receives, and what it must have received."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from vhs.changes.feed import Change


def receive_notifications(sqs: Any, queue_url: str, timeout: float = 20.0) -> list[Change]:
    """Every notification on a subscriber queue, in delivery order (FIFO per id), deleting
    each as it is received; returns once the queue holds nothing visible or in flight."""
    received: list[Change] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30
        ).get("Messages", [])
        received += [Change.from_message(message["Body"]) for message in messages]
        if messages:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                    for n, m in enumerate(messages)
                ],
            )
            continue
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        if all(value == "0" for value in attributes.values()):
            return received
    raise TimeoutError("the subscriber queue did not empty")


def assert_exactly_once_in_order(received: list[Change], expected: dict[str, list[int]]) -> None:
    """`received` holds each version of `expected` ({id: versions}) once, in version order per
    id, and nothing else; `expected` itself counts up from 1 without gaps."""
    by_id: dict[str, list[int]] = defaultdict(list)
    for change in received:
        by_id[change.id].append(change.version)
    assert set(by_id) == set(expected)
    for id, versions in expected.items():
        assert versions == list(range(1, len(versions) + 1)), (id, versions)  # no gaps
        assert by_id[id] == versions, (id, by_id[id])  # each once, in version order
