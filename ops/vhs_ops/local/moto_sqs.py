"""moto's SQS at a cost per call that does not grow with the queue's depth: the local stack's
server (motoserver.py) installs this before it serves a request.

moto 5.2.5 keeps a queue's messages in a list and scans it on every call (docs/moto-sqs-report.md
has the profile and the upstream report):

* `Queue.attributes` computes every attribute, ApproximateNumberOfMessages, ...NotVisible and
  ...Delayed included (three scans of every message), and SendMessage reads it for
  ContentBasedDeduplication, ReceiveMessage once per message received (the retention check),
  GetQueueAttributes twice per name asked for;
* ReceiveMessage builds the list of every visible message to take the first ten;
* DeleteMessage and ChangeMessageVisibility look for the receipt handle in every message, and
  DeleteMessage then copies the list without it;
* a FIFO queue's deduplication compares the new message with every message held.

So a backlog makes each call slower and a run quadratic (measured: 1.7 messages/s with a
backlog of 4,000, against 60/s without one). Here the same model answers from indexes:

* `attributes` is a mapping that computes an attribute only when it is read (the three counts
  still walk the messages, but only GetQueueAttributes asks for them, and in one pass with one
  clock read);
* the messages are held in insertion order in a dict (`_MessageLog`) with an index of receipt
  handles and one of deduplication ids, kept as messages are added, received and removed;
* ReceiveMessage takes the earliest-added visible messages from a heap and stops once it has
  its count; the messages in flight or delayed wait in another heap, by when they become
  visible, so a receive never walks past them (a `vhs dlq list` pass holds every letter in
  flight: walking past them made it quadratic).

Behaviour is moto's, quirks included (tests/local/test_moto_sqs.py runs the same calls on moto
unpatched and patched and compares what they answer): visibility timeouts, delays, redrive to
the dead-letter queue after maxReceiveCount, FIFO message groups and deduplication, deleting
with an earlier receipt handle. Only the local server runs this; nothing deployed does.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator, Mapping
from copy import deepcopy
from typing import Any

# What each patched name was, to restore it (uninstall, the tests' before/after runs).
_ORIGINAL: dict[tuple[Any, str], Any] = {}
# The moto release whose SQS model this reproduces (its receive code is copied here). Another
# release is served by moto as it is: slower at depth, but never answered by a stale copy.
PATCHED_MOTO_VERSION = "5.2.5"


class _MessageLog:
    """A queue's messages in the order they were added: what moto's list did, with an index
    of receipt handles (every handle a message has had) and of deduplication ids, and two
    heaps that let a receive skip the messages it cannot take without walking past them:
    `ready`, by the order they were added, holds the ones that may be visible, and `waiting`,
    by when they become visible, the ones in flight or delayed. A heap entry is current only
    while its token is the message's latest (a message moves by being pushed again). A caller
    holds the queue's `_messages_lock`; iterating gives a snapshot, as moto's code expects of
    a list it iterates while other threads send and delete."""

    def __init__(self) -> None:
        self.by_id: dict[str, Any] = {}
        self.handles: dict[str, Any] = {}
        self.dedup: dict[Any, dict[str, Any]] = {}
        self.order: dict[str, int] = {}
        self.token: dict[str, int] = {}
        self.ready: list[tuple[int, int, str]] = []
        self.waiting: list[tuple[float, int, int, str]] = []
        self._next = 0

    def append(self, message: Any) -> None:
        self.by_id[message.id] = message
        self.order[message.id] = self._next
        self._next += 1
        for handle in message.all_receipt_handles:
            if handle is not None:
                self.handles[handle] = message
        self.dedup.setdefault(message.deduplication_id, {})[message.id] = message
        self.requeue(message)

    def remove(self, message: Any) -> None:
        if self.by_id.pop(message.id, None) is None:
            raise ValueError("message not in the queue")
        self.order.pop(message.id, None)
        self.token.pop(message.id, None)
        for handle in message.all_receipt_handles:
            if self.handles.get(handle) is message:
                del self.handles[handle]
        same = self.dedup.get(message.deduplication_id, {})
        same.pop(message.id, None)
        if not same:
            self.dedup.pop(message.deduplication_id, None)

    def received(self, message: Any) -> None:
        """Index the receipt handle a receive has just given `message`."""
        self.handles[message.receipt_handle] = message

    def requeue(self, message: Any) -> None:
        """File `message` where it now belongs: ready if visible now, else waiting until it
        may be (its visibility timeout or delay, whichever ends later)."""
        token = self.token.get(message.id, 0) + 1
        self.token[message.id] = token
        if _visible_now(message):
            heapq.heappush(self.ready, (self.order[message.id], token, message.id))
        else:
            due = max(message.visible_at, message.delayed_until)
            heapq.heappush(self.waiting, (due, self.order[message.id], token, message.id))

    def _current(self, message_id: str, token: int) -> Any:
        return self.by_id.get(message_id) if self.token.get(message_id) == token else None

    def next_visible(self) -> Any:
        """Take the earliest-added message visible now out of `ready` (None if there is
        none); the caller requeues it, whatever it does with it."""
        now = _models().unix_time_millis()
        while self.waiting and self.waiting[0][0] <= now:
            _, _, token, message_id = heapq.heappop(self.waiting)
            message = self._current(message_id, token)
            if message is not None:
                self.requeue(message)
        while self.ready:
            _, token, message_id = heapq.heappop(self.ready)
            message = self._current(message_id, token)
            if message is None:
                continue
            if _visible_now(message):
                return message
            self.requeue(message)  # received, delayed or hidden since it was filed
        return None

    def any_visible(self) -> bool:
        message = self.next_visible()
        if message is not None:
            self.requeue(message)
        return message is not None

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.by_id.values()))

    def __len__(self) -> int:
        return len(self.by_id)

    def __bool__(self) -> bool:
        return bool(self.by_id)

    def __contains__(self, message: object) -> bool:
        return getattr(message, "id", None) in self.by_id


class _Attributes(Mapping[str, Any]):
    """A queue's attributes, as moto's `Queue.attributes` dict has them, each computed only
    when it is read."""

    def __init__(self, queue: Any) -> None:
        from moto.core.utils import camelcase_to_underscores

        self._queue = queue
        self._attribute = camelcase_to_underscores
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._names = dict.fromkeys(names)

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        queue = self._queue
        if name == "Policy" and queue.policy:
            value = queue.policy
        elif name == "RedrivePolicy" and queue.redrive_policy:
            import json

            value = json.dumps(queue.redrive_policy)
        else:
            value = getattr(queue, self._attribute(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


# --- the patched model ----------------------------------------------------------------------


def _queue_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL[(_models().Queue, "__init__")](self, *args, **kwargs)
    self._messages = _MessageLog()


def _attributes(self: Any) -> Mapping[str, Any]:
    return _Attributes(self)


def _visible_now(message: Any) -> bool:
    return message.visible and not message.delayed


def _wait_for_messages(self: Any, timeout: int) -> None:
    with self._messages_lock:
        self._messages_lock.wait_for(self._messages.any_visible, timeout=timeout)


def _add_message(self: Any, message: Any) -> None:
    if self.lambda_event_source_mappings:  # moto's own Lambda integration: not used locally
        return _ORIGINAL[(_models().Queue, "add_message")](self, message)
    models = _models()
    with self._messages_lock:
        if self.fifo_queue and (
            self.content_based_deduplication is True or message.deduplication_id
        ):
            for held in self._messages.dedup.get(message.deduplication_id, {}).values():
                age = message.sent_timestamp - held.sent_timestamp
                if age / 1000 < models.DEDUPLICATION_TIME_IN_SECONDS:
                    return None
        self._messages.append(message)
        self._messages_lock.notify_all()
    return None


def _delete_message(self: Any, receipt_handle: str) -> None:
    if receipt_handle in self.deleted_messages:
        return  # deleting again succeeds, as in moto
    with self._messages_lock:
        message = self._messages.handles.get(receipt_handle)
        if message is None:
            raise _models().ReceiptHandleIsInvalid()
        self._messages.remove(message)
        self.pending_messages.discard(message)
        self.deleted_messages.update(message.all_receipt_handles)


def _change_message_visibility(
    self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int
) -> None:
    models = _models()
    queue = self.get_queue(queue_name)
    message = queue._messages.handles.get(receipt_handle)
    if message is None:
        raise models.ReceiptHandleIsInvalid
    timeout_ms = int(visibility_timeout) * 1000
    if models.unix_time_millis() + timeout_ms - message.sent_timestamp > 43200 * 1000:
        raise models.InvalidParameterValue(
            f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: "
            "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"
        )
    with queue._messages_lock:
        message.change_visibility(visibility_timeout)
        queue._messages.requeue(message)
        if message.visible and message in queue.pending_messages:
            queue.pending_messages.remove(message)


def _purge_queue(self: Any, queue_name: str) -> None:
    _ORIGINAL[(_models().SQSBackend, "purge_queue")](self, queue_name)
    queue = self.get_queue(queue_name)
    with queue._messages_lock:
        queue._messages = _MessageLog()


def _pending_groups(queue: Any) -> set[str]:
    """The message groups in flight: only a FIFO queue has groups to hold back, and listing
    them walks every message in flight."""
    return set(queue.pending_message_groups) if queue.fifo_queue else set()


# moto 5.2.5's receive_message, changed only where the docstring says: kept in its shape so
# that it can be read against moto's own, line for line, when moto moves.
def _receive_message(  # noqa: C901, PLR0912
    self: Any,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Any]:
    """moto 5.2.5's receive_message, taking the visible messages in the order they were added
    under the queue's lock and stopping at `count`, instead of listing every visible message
    first (and without walking past the ones in flight)."""
    models = _models()
    message_attribute_names = message_attribute_names or []
    queue = self.get_queue(queue_name)
    result: list[Any] = []
    previous_result_count = 0
    polling_end = models.unix_time() + wait_seconds_timeout
    retention_seconds = int(queue.message_retention_period)
    while True:
        if result or (wait_seconds_timeout and models.unix_time() > polling_end):
            break
        messages_to_dlq: list[Any] = []
        with queue._messages_lock:
            log = queue._messages
            currently_pending_groups = _pending_groups(queue)
            taken: list[Any] = []  # looked at: requeued once the walk is over
            while (message := log.next_visible()) is not None:
                taken.append(message)
                if message in queue.pending_messages:
                    # Pending but visible again: the consumer's visibility timeout ran out.
                    queue.pending_messages.remove(message)
                    currently_pending_groups = _pending_groups(queue)
                if (
                    message.group_id
                    and queue.fifo_queue
                    and message.group_id in currently_pending_groups
                ):
                    continue  # an earlier message of its group is still in flight
                if (
                    queue.dead_letter_queue is not None
                    and queue.redrive_policy
                    and message.approximate_receive_count >= queue.redrive_policy["maxReceiveCount"]
                ):
                    messages_to_dlq.append(message)
                    continue
                queue.pending_messages.add(message)
                message.mark_received(visibility_timeout=visibility_timeout)
                log.received(message)
                message_copy = deepcopy(message)
                models._filter_message_attributes(message_copy, message_attribute_names)
                # moto's retention check, without reading every attribute to find the period.
                if retention_seconds + message.sent_timestamp / 1000 <= models.unix_time():
                    break
                result.append(message_copy)
                if len(result) >= count:
                    break
            for message in messages_to_dlq:
                log.remove(message)
            for message in taken:
                if message in log:
                    log.requeue(message)
        for message in messages_to_dlq:
            queue.dead_letter_queue.add_message(message)
        if previous_result_count == len(result):
            if wait_seconds_timeout == 0:
                break
            queue.wait_for_messages(1)
            continue
        previous_result_count = len(result)
    return result


# --- installing -----------------------------------------------------------------------------


def _models() -> Any:
    from moto.sqs import models

    return models


def _count_visible(self: Any) -> int:
    return _counts(self)[0]


def _count_not_visible(self: Any) -> int:
    return _counts(self)[1]


def _count_delayed(self: Any) -> int:
    return _counts(self)[2]


def _counts(queue: Any) -> tuple[int, int, int]:
    """ApproximateNumberOfMessages, ...NotVisible and ...Delayed as moto counts them (visible:
    past `visible_at` and not delayed; not visible; delayed: before `delayed_until`), in one
    pass that reads the clock once. The counts still walk every message held, but only when
    asked for, and ~20x cheaper than moto's two clock reads per message: `vhs send`'s flow
    control asks several times a second while the queue holds its 1,000 messages."""
    now = _models().unix_time_millis()
    visible = not_visible = delayed = 0
    for message in queue._messages:
        if now < message.delayed_until:
            delayed += 1
        if now > message.visible_at:
            if now >= message.delayed_until:
                visible += 1
        else:
            not_visible += 1
    return visible, not_visible, delayed


def _patches() -> list[tuple[Any, str, Any]]:
    models = _models()
    return [
        (models.Queue, "__init__", _queue_init),
        (models.Queue, "attributes", property(_attributes)),
        (models.Queue, "approximate_number_of_messages", property(_count_visible)),
        (models.Queue, "approximate_number_of_messages_not_visible", property(_count_not_visible)),
        (models.Queue, "approximate_number_of_messages_delayed", property(_count_delayed)),
        (models.Queue, "wait_for_messages", _wait_for_messages),
        (models.Queue, "add_message", _add_message),
        (models.Queue, "delete_message", _delete_message),
        (models.SQSBackend, "receive_message", _receive_message),
        (models.SQSBackend, "change_message_visibility", _change_message_visibility),
        (models.SQSBackend, "purge_queue", _purge_queue),
    ]


def installed() -> bool:
    return bool(_ORIGINAL)


def install() -> bool:
    """Patch moto's SQS model in this process (queues created from now on use the index).
    False, and nothing patched, under a moto release other than the one this reproduces."""
    from importlib.metadata import version

    if version("moto") != PATCHED_MOTO_VERSION:
        return False
    if installed():
        return True
    for owner, name, replacement in _patches():
        _ORIGINAL[(owner, name)] = owner.__dict__[name]
        setattr(owner, name, replacement)
    return True


def uninstall() -> None:
    for (owner, name), original in _ORIGINAL.items():
        setattr(owner, name, original)
    _ORIGINAL.clear()


@contextlib.contextmanager
def patched() -> Iterator[None]:
    if not install():
        raise RuntimeError(f"moto_sqs reproduces moto {PATCHED_MOTO_VERSION} only")
    try:
        yield
    finally:
        uninstall()
