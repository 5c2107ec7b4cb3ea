"""The ingest dead-letter queue: read it without consuming it, and redrive it.

Two kinds of message end up in the DLQ (docs/ingest.md):

* **invalid** messages, sent by the ingest handler with their reason in `vhs-error-*` message
  attributes (type, field, message, the ingest queue's message id, when it was first seen);
* messages whose **retries were exhausted**: transient failures (throttling, 5xx, timeouts,
  write conflicts, a misconfiguration) that SQS's redrive policy moved after
  `maxReceiveCount` receives. They carry no `vhs-error-*` attributes; their message id is the
  one they had on the ingest queue, so the function's log finds their errors.

A reason is believed only when the handler's receipt for that dead letter vouches for it
(deadletter.py; dlq_letters.py reads the letters): a message that claims a reason without one
(a producer's forged attributes) reads as retries-exhausted, its claim shown as unverified,
and `discard` leaves it alone unless `include_unverified`. Receipts are read from the staging
location (VHS_STAGING_BUCKET); without one, no reason is believed.

`DeadLetterQueue.list()` peeks: it receives every message with a visibility timeout long
enough for one pass, de-duplicates by message id, and at the end makes every message it
received visible again (ChangeMessageVisibility to 0). Nothing is deleted. Each receive adds
one to a message's ApproximateReceiveCount, which is harmless on the DLQ (it has no redrive
policy of its own).

`DeadLetterQueue.redrive()` moves messages back to the ingest queue. With no filter, and
where the endpoint supports it, it starts an SQS message move task (StartMessageMoveTask),
which SQS runs server-side and which keeps every attribute. Otherwise, and whenever a filter
is given, it moves messages one at a time: receive, SendMessage to the ingest queue (the body
unchanged, the producer's attributes kept, the `vhs-error-*` attributes stripped), then
DeleteMessage from the DLQ, in that order. An interruption at any point leaves a message in
the DLQ, in the queue, or (between the send and the delete) in both: a duplicate, which the
store absorbs as `unchanged`. It is never lost. Messages not selected stay hidden until the
pass ends, so the pass sees each message once, and are then made visible again at once (also
when the pass is interrupted; if the process dies they reappear when their visibility
timeout ends).
"""

from __future__ import annotations

import builtins  # DeadLetterQueue.list shadows list in the class body
from collections.abc import Callable
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from vhs import settings
from vhs.errors import ConfigurationError
from vhs.ingest.deadletter import (
    DeadLetter,
)
from vhs.ingest.staging import StagingLocation

from .dlq_letters import LetterReader
from .queues import QueueDepth, QueuePass, queue_depth

# Long enough for one pass over a large DLQ; a message whose timeout runs out mid-pass comes
# back and is recognised by its message id.
DEFAULT_VISIBILITY_TIMEOUT = 300
DEFAULT_WAIT_SECONDS = 1


@dataclass(frozen=True)
class RedriveFilter:
    """Which dead letters to redrive. Every criterion given must match; none: all of them."""

    error_types: frozenset[str] = frozenset()  # e.g. {"InvalidMessage"}; case-insensitive
    error_fields: frozenset[str] = frozenset()  # e.g. {"updated_at", "payload.updated_at"}
    id_prefix: str | None = None  # record ids starting with this (claim checks: resolved)
    retries_exhausted: bool = False  # only messages the redrive policy moved
    max_messages: int | None = None  # move at most this many

    @property
    def selects_everything(self) -> bool:
        return self == RedriveFilter()

    def matches(self, letter: DeadLetter) -> bool:
        if self.retries_exhausted and not letter.retries_exhausted:
            return False
        if self.error_types and letter.error_type.lower() not in {
            t.lower() for t in self.error_types
        }:
            return False
        if self.error_fields and letter.error_field not in self.error_fields:
            return False
        return self.id_prefix is None or (
            letter.record_id is not None and letter.record_id.startswith(self.id_prefix)
        )


@dataclass
class RedriveReport:
    method: str  # "move-task" or "receive-send-delete"
    dry_run: bool = False
    moved: int = 0  # sent to the ingest queue (dry run: would be)
    skipped: int = 0  # not selected by the filter: left in the DLQ
    failed: int = 0  # not sent: still in the DLQ
    duplicated: int = 0  # sent, but the DLQ delete failed: also still in the DLQ
    moved_ids: list[str] = field(default_factory=list)  # DLQ message ids moved
    errors: list[dict[str, str]] = field(default_factory=list)  # {message_id, stage, error}
    task_handle: str | None = None  # the move task, when one was started
    to_move: int | None = None  # messages in the DLQ when the move task started
    move_task_refused: str | None = None  # why StartMessageMoveTask was not used, if tried

    def done(self, message_id: str) -> None:
        """`message_id` was moved (dry run: would be)."""
        self.moved += 1
        self.moved_ids.append(message_id)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DiscardReport:
    dry_run: bool = False
    discarded: int = 0  # deleted from the DLQ (dry run: would be)
    skipped: int = 0  # not selected: left in the DLQ
    unverified_kept: int = 0  # selected, but its claimed reason is unverified: left in the DLQ
    failed: int = 0  # the delete failed: still in the DLQ
    discarded_ids: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)  # {message_id, stage, error}

    def done(self, message_id: str) -> None:
        """`message_id` was deleted (dry run: would be)."""
        self.discarded += 1
        self.discarded_ids.append(message_id)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Report(Protocol):
    """What a pass over the DLQ counts in (RedriveReport, DiscardReport)."""

    skipped: int

    def done(self, message_id: str) -> None: ...


_ReportT = TypeVar("_ReportT", bound=_Report)


@dataclass
class DeadLetterQueue:
    """The ingest DLQ (`dlq_url`), and the queue its letters are redriven to (`queue_url`).
    `s3` reads claim-check payloads when asked to resolve their record ids."""

    sqs: Any
    dlq_url: str
    queue_url: str | None = None
    _: KW_ONLY
    s3: Any = None
    staging: StagingLocation | None = None  # where the handler's receipts are
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT
    wait_seconds: int = DEFAULT_WAIT_SECONDS

    def __post_init__(self) -> None:
        if not self.dlq_url:
            raise ConfigurationError("the dead-letter queue URL is required (VHS_DLQ_URL)")

    @classmethod
    def from_env(cls) -> DeadLetterQueue:
        """From VHS_DLQ_URL and VHS_QUEUE_URL (as `vhs local up` prints them; for a deployed stage
        the Ingest stack's DeadLetterQueueUrl and QueueUrl outputs)."""
        from vhs.aws import aws_client

        (dlq_url,) = settings.require(
            settings.DLQ_URL,
            hint=f"{settings.LOCAL_ENV_HINT}, or --stack: the Ingest stack's DeadLetterQueueUrl",
        )
        queue_url = settings.get(settings.QUEUE_URL) or None
        return cls(
            aws_client("sqs"),
            dlq_url,
            queue_url,
            s3=aws_client("s3"),
            staging=StagingLocation.from_env(),
        )

    # --- reading ---------------------------------------------------------------------------

    def depth(self) -> QueueDepth:
        return queue_depth(self.sqs, self.dlq_url)

    def list(
        self,
        *,
        limit: int | None = None,
        resolve_claim_checks: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> builtins.list[DeadLetter]:
        """Every dead letter (up to `limit`), oldest first, without consuming any. With
        `resolve_claim_checks` (and an S3 client), claim-check payloads up to RESOLVE_LIMIT
        are read to find their record ids. `progress` gets the count read so far."""
        letters: builtins.list[DeadLetter] = []
        with self._pass() as peek:
            for message in peek.messages(limit):
                letters.append(self._letters.letter(message, resolve_claim_checks))
                if progress:
                    progress(len(letters))
        return sorted(letters, key=lambda letter: letter.first_seen)

    # --- redriving -------------------------------------------------------------------------

    def redrive(
        self,
        selection: RedriveFilter | None = None,
        *,
        dry_run: bool = False,
        use_move_task: bool | None = None,
        progress: Callable[[RedriveReport], None] | None = None,
    ) -> RedriveReport:
        """Move dead letters back to the ingest queue (see the module's docstring).

        `use_move_task`: None (the default) tries StartMessageMoveTask when nothing is
        filtered, it is not a dry run and the endpoint is AWS's, and falls back if the
        endpoint refuses; True tries it on any endpoint; False never does. `progress` gets
        the report after each message."""
        if not self.queue_url:
            raise ConfigurationError("set VHS_QUEUE_URL: the queue to move dead letters to")
        selection = selection or RedriveFilter()
        refused: str | None = None
        if selection.selects_everything and not dry_run and self._may_move(use_move_task):
            started, refused = self._start_move_task(self.queue_url)
            if started is not None:
                return started
        report = RedriveReport("receive-send-delete", dry_run=dry_run, move_task_refused=refused)
        return self._sweep(
            selection, report, self._move, lambda: report.moved, dry_run=dry_run, progress=progress
        )

    def discard(
        self,
        selection: RedriveFilter,
        *,
        everything: bool = False,
        include_unverified: bool = False,
        dry_run: bool = False,
        progress: Callable[[DiscardReport], None] | None = None,
    ) -> DiscardReport:
        """Delete the selected dead letters for good: messages that can never be stored and
        that nobody will send again corrected, or that the producer has already resent
        corrected. A selection of everything is refused unless `everything`. A letter whose
        claimed reason no receipt vouches for is kept (`unverified_kept`) unless
        `include_unverified`: it may be a valid record behind a forged reason. Keep a copy
        first (`list()`, `vhs dlq list --json`): nothing else does."""
        if selection.selects_everything and not everything:
            raise ValueError("refusing to discard every dead letter without everything=True")
        report = DiscardReport(dry_run=dry_run)

        def protected(letter: DeadLetter) -> bool:
            if letter.trusted or include_unverified:
                return False
            report.unverified_kept += 1
            return True

        return self._sweep(
            selection,
            report,
            self._discard,
            lambda: report.discarded,
            dry_run=dry_run,
            progress=progress,
            protected=protected,
        )

    def _sweep(
        self,
        selection: RedriveFilter,
        report: _ReportT,
        act: Callable[[dict[str, Any], QueuePass, _ReportT], None],
        acted_on: Callable[[], int],
        *,
        dry_run: bool,
        progress: Callable[[_ReportT], None] | None,
        protected: Callable[[DeadLetter], bool] | None = None,
    ) -> _ReportT:
        """One pass over the DLQ: `act` on each message `selection` picks (in a dry run,
        only count it as done) until `acted_on()` reaches its `max_messages`; count the
        others as skipped, and leave alone a selected one that `protected` (which counts
        it) keeps. `progress` gets the report after each message."""
        resolve = selection.id_prefix is not None
        with self._pass() as sweep:
            for message in sweep.messages(None):
                letter = self._letters.letter(message, resolve)
                full = selection.max_messages is not None and acted_on() >= selection.max_messages
                if full or not selection.matches(letter):
                    report.skipped += 1
                elif protected is not None and protected(letter):
                    pass
                elif dry_run:
                    report.done(letter.message_id)
                else:
                    act(message, sweep, report)
                if progress:
                    progress(report)
        return report

    def _discard(self, message: dict[str, Any], sweep: QueuePass, report: DiscardReport) -> None:
        message_id = message["MessageId"]
        try:
            self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"])
        except (ClientError, BotoCoreError) as error:
            report.failed += 1
            report.errors.append({"message_id": message_id, "stage": "delete", "error": str(error)})
        else:
            sweep.forget(message_id)
            report.done(message_id)

    def _move(self, message: dict[str, Any], moving: QueuePass, report: RedriveReport) -> None:
        message_id = message["MessageId"]
        try:
            body, attributes = self._letters.unstaged(message)
            self.sqs.send_message(
                QueueUrl=self.queue_url, MessageBody=body, MessageAttributes=attributes
            )
        except (ClientError, BotoCoreError) as error:
            report.failed += 1
            report.errors.append({"message_id": message_id, "stage": "send", "error": str(error)})
            return  # still in the DLQ: released with the others at the end of the pass
        report.done(message_id)
        try:
            self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"])
            moving.forget(message_id)
        except (ClientError, BotoCoreError) as error:
            report.duplicated += 1
            report.errors.append({"message_id": message_id, "stage": "delete", "error": str(error)})

    def _may_move(self, use_move_task: bool | None) -> bool:
        if use_move_task is not None:
            return use_move_task
        host = urlsplit(getattr(self.sqs.meta, "endpoint_url", "") or "").hostname or ""
        return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))

    def _start_move_task(self, queue_url: str) -> tuple[RedriveReport | None, str | None]:
        try:
            depth = self.depth()
            response = self.sqs.start_message_move_task(
                SourceArn=self._arn(self.dlq_url), DestinationArn=self._arn(queue_url)
            )
        except NotImplementedError as error:  # moto, in-process
            return None, f"not implemented by this endpoint: {error}"
        except (ClientError, BotoCoreError) as error:
            # Unsupported by the endpoint, not permitted, or a task is already running: the
            # receive-send-delete path is always safe, so use it rather than give up.
            return None, str(error)
        report = RedriveReport("move-task", task_handle=response.get("TaskHandle"))
        report.to_move = depth.visible
        return report, None

    # --- helpers ---------------------------------------------------------------------------

    @property
    def _letters(self) -> LetterReader:
        return LetterReader(self.s3, self.staging)

    def _pass(self) -> QueuePass:
        return QueuePass(self.sqs, self.dlq_url, self.visibility_timeout, self.wait_seconds)

    def _arn(self, url: str) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return attributes["Attributes"]["QueueArn"]
