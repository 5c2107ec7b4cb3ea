"""Bulk import: a Step Functions Distributed Map over chunks of files (docs/import.md)."""

from __future__ import annotations

from collections.abc import Iterator

from .shape import Check, FunctionShape

# Where import files and results live when no bucket of their own is given: prefixes of the
# staging bucket beside the producers' (incoming/), which ingest never reads. The staging
# bucket's lifecycle expires them too (STAGING_EXPIRATION_DAYS): see docs/import.md.
IMPORT_PREFIX = "imports/"
IMPORT_RESULTS_PREFIX = "import-results/"


# One function plans (reads every file once, to cut it into chunks of whole lines) and imports
# chunks: the plan of a large export needs the longest timeout. 1,769 MB is one full vCPU: JSON
# parsing and hashing are CPU, the writes are waits.
class BulkImportShape(FunctionShape, shape="bulk import", timeout_seconds=900, memory_mb=1769):
    # Lines a chunk holds: the unit of coalescing, of a worker's report and of a redrive.
    chunk_lines: int = 2000
    # Chunks one invocation imports (the Distributed Map's ItemBatcher).
    max_items_per_batch: int = 1
    # Invocations at once (the Distributed Map's MaxConcurrency): each writes `write_workers`
    # lines at a time, so the table sees up to their product in flight.
    max_concurrency: int = 40
    write_workers: int = 16
    # Chunks that may fail (after their retries) before the Map Run fails; 0: any.
    tolerated_failure_percentage: float = 0
    # The state machine's own timeout.
    execution_timeout_hours: int = 24

    def _checks(self) -> Iterator[Check]:
        yield 1 <= self.chunk_lines <= 100_000, "chunk_lines must be 1..100000"
        yield 1 <= self.max_items_per_batch <= 100, "max_items_per_batch must be 1..100"
        # Distributed Map runs at most 10,000 child executions at once.
        yield 1 <= self.max_concurrency <= 10_000, "max_concurrency must be 1..10000"
        yield 1 <= self.write_workers <= 256, "write_workers must be 1..256"
        yield 0 <= self.tolerated_failure_percentage <= 100, "tolerated failure must be 0..100 %"
        yield 1 <= self.execution_timeout_hours <= 24 * 365, "execution timeout must be 1 h..1 y"


BULK_IMPORT = BulkImportShape()
