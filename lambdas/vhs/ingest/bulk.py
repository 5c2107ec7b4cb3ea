"""Bulk import: lines of JSON Lines or CSV files, judged and written exactly as ingest writes
messages, with every line accounted for.

A JSON Lines line *is* an ingest message (docs/ingest.md): its bytes are read once, by the
handler's own `contract.first_read`, and written from that reading. A CSV row is first made
into one by a `CsvMapping` (which columns are the id, the timestamp, the record or a delete
flag), then read the same way. A line the contract refuses is not written: it becomes a
`Problem` (file, line, field, reason) in the import's report; so does a line longer than the
largest ingest message (`MAX_LINE_BYTES`), which is refused as it is read
(bulk_lines.split_lines), unheld.

The lines of a chunk are coalesced per id with the ingest handler's own rules
(ingest/coalesce.py): the winner of each id is written, the others are given the outcome the
store would have given them, without a request. Winners are written by an `Ingestor`
(`handle`, the handler's own path: claim checks, staged bodies, budgets) from a pool of
threads. A transient failure (throttling, a 5xx, a write conflict) is retried with backoff;
a line that still fails is a `Problem` too, with outcome "failed": nothing is dropped and
nothing is silent.

What is not here: where lines come from (ingest/bulk_sources.py: local files, S3 objects,
byte ranges), how bytes are cut into lines and rows (ingest/bulk_lines.py), how a CSV row
becomes a message (ingest/bulk_csv.py), and what is remembered between runs (the CLI's
checkpoint, the cloud's Map Run).
"""

from __future__ import annotations

import contextlib
import csv
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..aws import error_code
from ..errors import InvalidInput, InvalidMessage, WriteConflict
from .bulk_csv import CsvMapping
from .bulk_lines import Line
from .coalesce import Candidate, candidate, in_rounds
from .contract import FirstRead, IngestMessage
from .ingestor import Ingestor, IngestResult

FORMATS = ("jsonl", "csv")
# The file names each format is read from when a directory or a prefix is imported.
SUFFIXES = {"jsonl": (".jsonl", ".ndjson"), "csv": (".csv",)}
DEFAULT_CHUNK_LINES = 1000
DEFAULT_WORKERS = 16
DEFAULT_ATTEMPTS = 5
REFUSED, FAILED = "refused", "failed"
OUTCOMES = ("stored", "unchanged", "stale", "deleted", REFUSED, FAILED)
# Errors worth another attempt: the service was busy or broken, not the request.
_TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "SlowDown",
        "InternalError",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestTimeout",
    }
)


@dataclass(frozen=True)
class Problem:
    """A line that was not stored: refused (it can never be) or failed (retries ran out)."""

    file: str
    line: int
    field: str
    reason: str
    outcome: str = REFUSED

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "reason": self.reason,
            "outcome": self.outcome,
        }


@dataclass(frozen=True)
class Settled:
    """How one line ended: an outcome of OUTCOMES, and its Problem if it was not stored."""

    line: Line
    outcome: str
    problem: Problem | None = None
    coalesced: bool = False


@dataclass
class Tally:
    """Lines by outcome, and how many were coalesced into another line's write."""

    counts: Counter[str] = field(default_factory=Counter)
    coalesced: int = 0

    def add(self, settled: Settled) -> None:
        self.counts[settled.outcome] += 1
        self.coalesced += settled.coalesced

    def merge(self, other: Mapping[str, Any]) -> None:
        for name in OUTCOMES:
            self.counts[name] += int(other.get(name, 0))
        self.coalesced += int(other.get("coalesced", 0))

    def as_json(self) -> dict[str, int]:
        return {**{name: self.counts[name] for name in OUTCOMES}, "coalesced": self.coalesced}

    @property
    def ok(self) -> bool:
        return not self.counts[REFUSED] and not self.counts[FAILED]


# --- lines to writes -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Parsed:
    line: Line
    record: dict[str, Any] | None  # the SQS-record shape Ingestor.handle takes
    problem: Problem | None = None


def transient(error: BaseException) -> bool:
    if isinstance(error, WriteConflict | BotoCoreError):
        return True
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or error_code(error) in _TRANSIENT_CODES
    return False


class ImportWorker:
    """Writes chunks of lines through an Ingestor (and so through the store's put_validated
    and delete_validated), `workers` at a time."""

    def __init__(
        self,
        ingestor: Ingestor,
        *,
        fmt: str = "jsonl",
        mapping: CsvMapping | None = None,
        workers: int = DEFAULT_WORKERS,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff_seconds: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if fmt not in FORMATS:
            raise InvalidInput("--format", f"must be one of {', '.join(FORMATS)}, not {fmt!r}")
        if workers < 1:
            raise InvalidInput("--workers", "must be at least 1")
        self.ingestor = ingestor
        self.fmt = fmt
        self.mapping = mapping or CsvMapping()
        self.workers = workers
        self.attempts = max(1, attempts)
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="vhs-import")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ImportWorker:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def rows(self, lines: Iterable[Line], header: Sequence[str] | None) -> Iterator[_Parsed]:
        """Each line as the record Ingestor.handle takes, or with the Problem that refuses it.
        `header`: a CSV file's columns (already checked against the mapping)."""
        for line in lines:
            message_id = f"{line.source}:{line.number}"
            if line.refused is not None:
                yield _Parsed(line, None, Problem(line.source, line.number, *line.refused))
                continue
            if self.fmt == "jsonl":
                yield _Parsed(line, {"messageId": message_id, "body": line.data})
                continue
            try:
                text = line.data.decode("utf-8", errors="surrogateescape")
                row = next(csv.reader([text]), [])
                message = self.mapping.message(header or [], row)
            except InvalidMessage as error:
                yield _Parsed(
                    line, None, Problem(line.source, line.number, error.field, error.reason)
                )
                continue
            except csv.Error as error:
                yield _Parsed(line, None, Problem(line.source, line.number, "row", str(error)))
                continue
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
            yield _Parsed(line, {"messageId": message_id, "body": body})

    def chunk(self, parsed: Sequence[_Parsed], settle: Callable[[Settled], None]) -> None:
        """Judge, coalesce and write one chunk; `settle` is called (in this thread) once for
        every line, as soon as its outcome is known. A KeyboardInterrupt (or any error) in
        `settle` stops the chunk: writes not yet started are cancelled, and those under way
        finish and are settled before it propagates."""
        candidates: dict[int, Candidate] = {}
        firsts: dict[int, FirstRead] = {}
        pending: list[int] = []
        for n, p in enumerate(parsed):
            if p.problem is not None:
                settle(Settled(p.line, REFUSED, self._named(p.problem)))
                continue
            # Read once: the write goes on from this reading. A claim check is not coalesced
            # (its id is in the payload, fetched when written).
            first = firsts[n] = self.ingestor.first_read(p.record or {})
            if isinstance(first, InvalidMessage):
                problem = Problem(p.line.source, p.line.number, first.field, first.reason)
                settle(Settled(p.line, REFUSED, self._named(problem)))
                continue
            if isinstance(first, IngestMessage):
                candidates[n] = candidate(n, first)
            pending.append(n)
        results: dict[int, IngestResult | Problem] = {}

        def outcome(winner: int) -> str | None:
            won = results[winner]
            return None if isinstance(won, Problem) else won.outcome

        def write(writers: list[int]) -> None:
            self._write_all(parsed, firsts, writers, results, settle)

        for n, _, after in in_rounds(pending, candidates, write, outcome):
            settle(Settled(parsed[n].line, str(after), coalesced=True))

    def _write_all(
        self,
        parsed: Sequence[_Parsed],
        firsts: Mapping[int, FirstRead],
        writers: list[int],
        results: dict[int, IngestResult | Problem],
        settle: Callable[[Settled], None],
    ) -> None:
        futures: dict[Future[IngestResult | Problem], int] = {
            self._pool.submit(self._write, parsed[n], firsts[n]): n for n in writers
        }
        unsettled = set(futures)
        try:
            while unsettled:
                done, _ = wait(unsettled, return_when=FIRST_COMPLETED)
                for future in done:
                    n = futures[future]
                    unsettled.discard(future)
                    results[n] = result = future.result()
                    settle(self._settled(parsed[n].line, result))
        except BaseException:
            for future in unsettled:
                future.cancel()
            # Writes under way finish (a request in flight cannot be taken back): settle them,
            # so that what they wrote is remembered, then stop.
            wait(unsettled)
            for future in unsettled:
                if not future.cancelled() and future.exception() is None:
                    with contextlib.suppress(Exception):
                        settle(self._settled(parsed[futures[future]].line, future.result()))
            raise

    def _settled(self, line: Line, result: IngestResult | Problem) -> Settled:
        if isinstance(result, Problem):
            return Settled(line, result.outcome, self._named(result))
        return Settled(line, result.outcome)

    def _named(self, problem: Problem) -> Problem:
        if self.fmt != "csv":
            return problem
        return Problem(
            problem.file,
            problem.line,
            self.mapping.column_of(problem.field),
            problem.reason,
            problem.outcome,
        )

    def _write(self, p: _Parsed, first: FirstRead) -> IngestResult | Problem:
        line, attempt = p.line, 1
        while True:
            try:
                return self.ingestor.handle(p.record or {}, first)
            except InvalidMessage as error:  # found on writing: a staged body, a claim check
                return Problem(line.source, line.number, error.field, error.reason)
            except Exception as error:
                if not transient(error):
                    return Problem(line.source, line.number, "", _described(error), FAILED)
                if attempt == self.attempts:
                    reason = f"{_described(error)} (after {self.attempts} attempts)"
                    return Problem(line.source, line.number, "", reason, FAILED)
                self.sleep(self.backoff_seconds * 2 ** (attempt - 1))
                attempt += 1


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def chunked(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
