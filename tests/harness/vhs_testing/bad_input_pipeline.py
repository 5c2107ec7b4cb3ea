"""The bad-input corpus through the real ingest handler, on moto's server over HTTP.

Batches of 10: six corpus cases and four valid messages (a small record, an S3-sized body, a
claim check and a delete), in a shuffled order. Each batch is sent with SendMessageBatch,
received whole, and given to the handler in one invocation by the event-source emulator
(`SqsEventSource.invoke`, which acknowledges what the response does not list in
batchItemFailures, as Lambda does). Right after that one invocation the runner reads what the
store holds and what the DLQ received, so the record of each message is what happened in its
own invocation: a valid message delayed to a retry would show as missing, not as stored.

    .venv/bin/python -m vhs_testing.bad_input_pipeline

runs it on a moto server of its own and prints the markdown report (the table of every case).
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhs import RecordNotFound, VersionedHybridStore
from vhs.ingest.deadletter import DeadLetter
from vhs.ingest.staging import StagingLocation
from vhs_ops.admin.dlq import DeadLetterQueue, RedriveFilter
from vhs_ops.admin.queues import QueueDepth, queue_depth
from vhs_ops.local.function_logs import function_output
from vhs_ops.local.invoke import load_handler
from vhs_ops.local.process_environment import environment
from vhs_ops.local.sqs_event import lambda_record
from vhs_ops.local.sqs_source import Invocation, SqsEventSource
from vhs_ops.local.stack import LocalStack, MotoServer, client
from vhs_testing.bad_inputs import (
    CASES,
    MAX_BODY_BYTES,
    MAX_PAYLOAD_BYTES,
    STAGING_PREFIX,
    Accepted,
    Case,
    T,
    counts,
    flagged,
    message,
    opaque,
    pointer,
)
from vhs_testing.stacks import fresh_stack

CASES_PER_BATCH = 6
BATCH_SIZE = 10  # SQS's and the deployed event source's
DELETED = "(deleted)"  # what a delete reads back as
MISSING = "(not found)"


@dataclass
class Handled:
    """One sent message and what became of it in its invocation."""

    case: Case
    message_id: str
    batch: int
    failed: bool = False  # listed in batchItemFailures: left on the queue to be retried
    dead_letters: list[DeadLetter] = field(default_factory=list)  # as `vhs dlq list` reads them
    read_back: Any = MISSING  # the store's answer right after the invocation

    @property
    def observed(self) -> str:
        """dead-lettered, stored (and read back as sent), stored differently, or lost."""
        if self.dead_letters:
            return "dead-lettered"
        if self.read_back is MISSING or not isinstance(self.case.expected, Accepted):
            return "lost"
        return "stored" if self.read_back == self.case.expected.body else "stored differently"


@dataclass
class CorpusRun:
    stack: LocalStack
    handled: dict[str, Handled]  # by case name (corpus cases and valid messages)
    invocations: list[Invocation]
    queue_after: list[QueueDepth]  # the ingest queue after each invocation
    dlq_after: list[QueueDepth]  # the DLQ after each invocation was drained
    body_keys: list[str]  # every object in the body bucket at the end
    table_ids: set[str]  # every id in the table at the end
    seconds: float

    def cases(self) -> list[Handled]:
        """The corpus cases, in corpus order."""
        return [self.handled[case.name] for case in CASES if case.name in self.handled]

    def valid(self) -> list[Handled]:
        return [h for h in self.handled.values() if h.case.category == "valid"]


def valid_messages(batch: int) -> list[Case]:
    """The valid messages mixed into a batch: each must be stored by that invocation."""
    name = f"valid-{batch}"
    body = opaque(f"{name}-s3-body")
    claimed = {"batch": batch, "via": "claim check"}
    key = f"{STAGING_PREFIX}claim-checks/{name}.json"
    payload = message(id=f"{name}-claim-check", updated_at=T, record=claimed).encode()
    return [
        Case(
            f"{name}-record",
            "valid",
            message(id=f"{name}-record", updated_at=T, record={"batch": batch}),
            Accepted(f"{name}-record", {"batch": batch}),
            "a small record",
            "",
        ),
        Case(
            f"{name}-s3-body",
            "valid",
            message(
                id=f"{name}-s3-body", updated_at=T, body_base64=base64.b64encode(body).decode()
            ),
            Accepted(f"{name}-s3-body", body),
            "an S3-sized body",
            "",
        ),
        Case(
            f"{name}-claim-check",
            "valid",
            pointer(key),
            Accepted(f"{name}-claim-check", claimed),
            "a claim check",
            "",
            attributes=flagged(len(payload)),
            staged={key: payload},
        ),
        Case(
            f"{name}-delete",
            "valid",
            message(id=f"{name}-delete", updated_at=T, deleted=True),
            Accepted(f"{name}-delete", DELETED),
            "a delete",
            "",
        ),
    ]


def read_back(store: VersionedHybridStore, expected: Accepted) -> Any:
    """What the store answers for an accepted message: the body bytes, the JSON value, or
    DELETED; MISSING if it holds nothing."""
    try:
        if expected.body == DELETED:
            return DELETED if store.history(expected.id)[-1].deleted else MISSING
        record = store.get(expected.id)
    except RecordNotFound:
        return MISSING
    return record.body if isinstance(expected.body, bytes) else record.json()


@contextlib.contextmanager
def ingest_function(stack: LocalStack, function_log: Path | None) -> Iterator[Any]:
    """The real ingest handler with the stack's function environment, as LocalPipeline runs
    it, but invoked by the caller batch by batch instead of by a polling thread."""
    with contextlib.ExitStack() as running:
        running.enter_context(environment(stack.function_env()))
        handler = load_handler("ingest")
        module = importlib.import_module(handler.__module__)
        if function_log is not None:
            running.enter_context(function_output(function_log, module))
        module.ingestor.cache_clear()  # its max_body_size is this run's
        running.callback(module.ingestor.cache_clear)
        # max_body_size has no environment variable; a small one keeps "too large" cheap.
        module.ingestor().store.max_body_size = MAX_BODY_BYTES
        yield handler


def run_corpus(
    endpoint: str, cases: list[Case] = CASES, *, function_log: Path | None = None
) -> CorpusRun:
    started = time.monotonic()
    stack = fresh_stack(
        endpoint,
        "bad",
        extra_env={
            "VHS_STAGING_PREFIX": STAGING_PREFIX,
            "VHS_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD_BYTES),
        },
    )
    sqs, s3 = client("sqs", endpoint), client("s3", endpoint)
    dynamodb = client("dynamodb", endpoint)
    store = VersionedHybridStore(
        stack.table_name, stack.bucket_name, s3_client=s3, dynamodb_client=dynamodb
    )
    handled: dict[str, Handled] = {}
    invocations: list[Invocation] = []
    queue_after: list[QueueDepth] = []
    dlq_after: list[QueueDepth] = []
    rng = random.Random(20261101)
    # Read straight after a synchronous invocation: nothing is in flight, so no long poll.
    dlq = DeadLetterQueue(
        sqs,
        stack.dlq_url,
        wait_seconds=0,
        s3=s3,
        staging=StagingLocation(stack.staging_bucket, STAGING_PREFIX),
    )
    with ingest_function(stack, function_log) as handler:
        source = SqsEventSource(
            sqs, stack.queue_url, handler, queue_arn=stack.queue_arn, region=stack.region
        )
        for batch, start in enumerate(range(0, len(cases), CASES_PER_BATCH)):
            chunk = [*cases[start : start + CASES_PER_BATCH], *valid_messages(batch)]
            rng.shuffle(chunk)
            sent = _send(sqs, s3, stack, chunk)
            for case, message_id in zip(chunk, sent, strict=True):
                handled[case.name] = Handled(case, message_id, batch)
            records = [
                lambda_record(m, queue_arn=stack.queue_arn, region=stack.region)
                for m in _receive(sqs, stack.queue_url, sent)
            ]
            invocation = source.invoke(records)
            invocations.append(invocation)
            # Read at once, before anything else runs: this invocation's doing only.
            queue_after.append(source.depth())
            for case in chunk:
                entry = handled[case.name]
                entry.failed = entry.message_id in invocation.failed
                if isinstance(case.expected, Accepted):
                    entry.read_back = read_back(store, case.expected)
            by_source = {h.message_id: h for h in handled.values()}
            for letter in dlq.list():
                by_source[letter.source_message_id].dead_letters.append(letter)
            dlq.discard(RedriveFilter(), everything=True)
            dlq_after.append(queue_depth(sqs, stack.dlq_url))
    body_keys = [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket_name)
        for item in page.get("Contents", [])
    ]
    table_ids = {
        item["id"]["S"]
        for page in dynamodb.get_paginator("scan").paginate(
            TableName=stack.table_name, ProjectionExpression="id"
        )
        for item in page["Items"]
    }
    return CorpusRun(
        stack,
        handled,
        invocations,
        queue_after,
        dlq_after,
        body_keys,
        table_ids,
        time.monotonic() - started,
    )


def _send(sqs: Any, s3: Any, stack: LocalStack, batch: list[Case]) -> list[str]:
    """Stage what the batch's messages point at, send them in one SendMessageBatch, and
    return their message ids in order."""
    entries = []
    for n, case in enumerate(batch):
        body, staged = case.resolve(stack.staging_bucket, stack.bucket_name)
        for key, data in staged.items():
            s3.put_object(Bucket=stack.staging_bucket, Key=key, Body=data)
        entry: dict[str, Any] = {"Id": str(n), "MessageBody": body}
        if case.attributes:
            entry["MessageAttributes"] = case.attributes
        entries.append(entry)
    response = sqs.send_message_batch(QueueUrl=stack.queue_url, Entries=entries)
    if response.get("Failed"):
        raise AssertionError(f"SQS refused: {response['Failed']}")
    ids = {int(ok["Id"]): ok["MessageId"] for ok in response["Successful"]}
    return [ids[n] for n in range(len(batch))]


def _receive(sqs: Any, queue_url: str, message_ids: list[str]) -> list[dict[str, Any]]:
    """Every message of a batch just sent, in the order sent (polled, with a deadline)."""
    received: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    while len(received) < len(message_ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"received {len(received)} of {len(message_ids)} messages")
        response = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=BATCH_SIZE,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        received.update((m["MessageId"], m) for m in response.get("Messages", []))
    return [received[message_id] for message_id in message_ids]


# --- the report ---------------------------------------------------------------------------


def _cell(text: str, limit: int = 90) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"``{text}``"


def markdown_table(run: CorpusRun) -> str:
    """Every corpus case and how the handler dealt with it, as observed in the run."""
    lines = [
        "| # | case | category | input | handled as | `vhs-error-field` "
        "| reason (`vhs-error-message`) | why |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, entry in enumerate(run.cases(), 1):
        case = entry.case
        if entry.dead_letters:
            letter = entry.dead_letters[0]
            handling = f"DLQ ({letter.error_type})"
            field_cell = _code(letter.error_field or "")
            # The run's bucket names are random: show the corpus's names, so the table is stable.
            named = letter.reason.replace(run.stack.staging_bucket, "STAGING")
            reason = _cell(named.replace(run.stack.bucket_name, "BODIES"))
        else:
            handling = {"stored": "stored, read back identical"}.get(entry.observed, entry.observed)
            field_cell, reason = "", ""
        lines.append(
            f"| {n} | {_code(case.name)} | {case.category} | {_cell(case.shows, 60)} | {handling} "
            f"| {field_cell} | {reason} | {_cell(case.note, 200)} |"
        )
    return "\n".join(lines)


def summary(run: CorpusRun) -> str:
    """The figures: cases by category and handling, as observed, and how the run went."""
    observed: Counter[tuple[str, str]] = Counter((h.case.category, h.observed) for h in run.cases())
    rows = ["| category | cases | dead-lettered with reason | accepted safely (stored) |"]
    rows.append("| --- | --- | --- | --- |")
    for category, expected in counts().items():
        total = sum(expected.values())
        rows.append(
            f"| {category} | {total} | {observed[(category, 'dead-lettered')]} "
            f"| {observed[(category, 'stored')]} |"
        )
    cases = run.cases()
    rows.append(
        f"| **all** | **{len(cases)}** "
        f"| **{sum(h.observed == 'dead-lettered' for h in cases)}** "
        f"| **{sum(h.observed == 'stored' for h in cases)}** |"
    )
    valid = run.valid()
    in_time = sum(not h.failed and h.observed == "stored" for h in valid)
    retried = sum(len(i.failed) for i in run.invocations)
    facts = [
        f"{len(run.handled)} messages in {len(run.invocations)} batches of up to {BATCH_SIZE} "
        f"(up to {CASES_PER_BATCH} corpus cases and {len(valid_messages(0))} valid messages "
        "each), one invocation per batch.",
        f"Valid messages stored by their own batch's invocation: {in_time} of {len(valid)}; "
        f"batch item failures (retries): {retried}; failed invocations: "
        f"{sum(i.error is not None for i in run.invocations)}.",
        f"Messages lost (neither stored nor dead-lettered): "
        f"{sum(h.observed == 'lost' for h in run.handled.values())}; left on the queue: "
        f"{sum(d.visible + d.in_flight for d in run.queue_after)}.",
        f"Wall time: {run.seconds:.1f} s on moto's server.",
    ]
    return "\n".join(rows) + "\n\n" + "\n".join(f"* {fact}" for fact in facts)


def main() -> None:
    # function_output sends a thread's output to the function's log unless it is the main
    # thread's (the console), so the function runs in a thread of its own, as on Lambda.
    with (
        MotoServer() as server,
        tempfile.TemporaryDirectory() as scratch,
        ThreadPoolExecutor(1) as function_thread,
    ):
        log = Path(scratch) / "ingest.log"
        run = function_thread.submit(run_corpus, server.endpoint, function_log=log).result()
    sys.stdout.write(summary(run) + "\n\n" + markdown_table(run) + "\n")


if __name__ == "__main__":
    main()
