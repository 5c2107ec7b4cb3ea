"""Verification: does every retained pointer still lead to the body it promises?

`Verifier.run()` walks the index table with a parallel Scan (the one operation in VHS allowed
to read the whole table) and checks every version that retention keeps readable now:

* an **inline** body (in the item) must decompress, hash to the entry's sha256 and have its size;
* an **S3** body must exist (else a dangling pointer), be the entry's size, carry the record id
  in its `vhs-id` metadata, and, where S3 returns a full-object SHA-256 checksum
  (HeadObject with ChecksumMode=ENABLED), have the digest its key names. With `deep=True` the
  body is read and hashed as well (GetObject instead of HeadObject: one request either way).

Findings are plain values (`Finding`): one per problem, never one per check that noticed it.
An S3 object that several retained versions of an id share (content addressing) is checked
once and reported once, with every version that points at it. A dangling pointer is confirmed
before it is reported: the item is read again, strongly consistent, and the object looked up
again, so a version that retention released, or a body re-uploaded, while the scan ran is not
reported.

Memory is bounded: items are streamed page by page, at most `4 x workers` object checks are in
flight, and the report keeps the first `max_findings` findings (every finding goes to
`on_finding`). Cost: the scan reads every item once (eventually consistent unless
`consistent_reads`), plus one HEAD (or GET with `deep`) per distinct retained S3 body.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vhs import keys
from vhs.aws import is_object_missing
from vhs.index.codec import ID, MalformedItem, item_from_dynamo, layout_problem, stored_layout
from vhs.index.scan import scan_pages
from vhs.model import Entry, Item
from vhs.store import VersionedHybridStore

from .body_checks import inline_findings, inline_part_findings, object_problems
from .findings import (
    Finding,
    FindingCallback,
    FindingKind,
    ProgressCallback,
    VerifyProgress,
    VerifyReport,
)

DEFAULT_SEGMENTS = 4
DEFAULT_WORKERS = 16
DEFAULT_MAX_FINDINGS = 1000
_READ_CHUNK = 1024 * 1024


class Verifier:
    """Checks retained pointers. Thread-safe to construct, not to `run` twice at once."""

    def __init__(
        self,
        store: VersionedHybridStore,
        *,
        deep: bool = False,
        segments: int = DEFAULT_SEGMENTS,
        workers: int = DEFAULT_WORKERS,
        consistent_reads: bool = False,
        max_findings: int | None = DEFAULT_MAX_FINDINGS,
        clock: Callable[[], float] | None = None,
        page_size: int | None = None,
    ) -> None:
        if segments < 1 or workers < 1:
            raise ValueError("segments and workers must be at least 1")
        self.store = store
        self.s3 = store.bodies.s3
        self.dynamodb = store.index.dynamodb
        self.table = store.table_name
        self.bucket = store.bucket_name
        self.deep = deep
        self.segments = segments
        self.workers = workers
        self.consistent_reads = consistent_reads
        self.max_findings = max_findings
        self.clock = clock or store.clock
        self.page_size = page_size
        self._lock = threading.Lock()

    # --- running ---------------------------------------------------------------------------

    def run(
        self,
        ids: Iterable[str] | None = None,
        *,
        on_finding: FindingCallback | None = None,
        progress: ProgressCallback | None = None,
    ) -> VerifyReport:
        """Verify the whole table, or only the items of `ids`. `on_finding` is called once per
        finding and `progress` after each page of items and at the end; both are called from
        worker threads, one call at a time."""
        self._report = VerifyReport(deep=self.deep)
        self._on_finding = on_finding
        self._progress = progress
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(self.workers * 4)
        wanted = list(dict.fromkeys(ids)) if ids is not None else None
        self._estimate = len(wanted) if wanted is not None else self._estimated_items()
        with ThreadPoolExecutor(self.workers, thread_name_prefix="vhs-verify") as self._pool:
            try:
                if wanted is not None:
                    self._verify_ids(wanted)
                else:
                    self._scan_all()
            except BaseException:
                self._stop.set()
                raise
        self._tick()
        return self._report

    def _estimated_items(self) -> int | None:
        try:
            table = self.dynamodb.describe_table(TableName=self.table)["Table"]
            return int(table.get("ItemCount", 0)) or None
        except (ClientError, BotoCoreError):
            return None

    def _scan_all(self) -> None:
        with ThreadPoolExecutor(self.segments, thread_name_prefix="vhs-scan") as scanners:
            running = [scanners.submit(self._scan_segment, s) for s in range(self.segments)]
            try:
                for future in running:
                    future.result()
            except BaseException:
                self._stop.set()
                raise

    def _scan_segment(self, segment: int) -> None:
        for page in self._pages(segment):
            for raw in page:
                if self._stop.is_set():
                    return
                self._check_raw(raw)
            self._tick()

    def _pages(self, segment: int) -> Iterator[list[dict[str, Any]]]:
        for page in scan_pages(
            self.dynamodb,
            self.table,
            segment=segment,
            total_segments=self.segments,
            consistent_reads=self.consistent_reads,
            page_size=self.page_size,
        ):
            if self._stop.is_set():
                return
            yield page.items

    def _verify_ids(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 100):
            page = ids[start : start + 100]
            raws = self.store.index.read_raw_many(page)
            for id in page:
                if id in raws:
                    self._check_raw(raws[id])
                else:
                    self._found(
                        Finding(FindingKind.NOT_FOUND, id, None, self._item_location(id), "no item")
                    )
            self._tick()

    # --- one item --------------------------------------------------------------------------

    def _check_raw(self, raw: dict[str, Any]) -> None:
        id = _raw_id(raw)
        with self._lock:
            self._report.items += 1
        try:
            item = item_from_dynamo(raw)
            problem = layout_problem(raw, item)
        except MalformedItem as error:  # a damaged item, by the field its decoding refused
            item, problem = None, f"damaged: {error.field}: {error.reason}"
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            item, problem = None, f"not in the store's layout: {type(error).__name__} {error}"
        if problem is not None:
            location = self._item_location(id)
            self._found(Finding(FindingKind.UNPARSEABLE, id, None, location, problem))
            return
        if item is None:
            with self._lock:
                self._report.unversioned += 1
            return
        layout = str(stored_layout(raw))
        with self._lock:
            self._report.layouts[layout] = self._report.layouts.get(layout, 0) + 1
        self._check_item(item)

    def _check_item(self, item: Item) -> None:
        retained = self.store.retention.retained(item, self.clock())
        # sha256 → (version, size, whether the object is that version's body) of each pointer
        by_hash: dict[str, list[tuple[int, int, bool]]] = {}
        deletes = 0
        inline = self._check_inline(item.id, retained)
        for version, entry in retained:
            if entry.deleted:
                deletes += 1
            for content_hash, size in entry.s3_objects().items():
                is_body = entry.in_s3 and content_hash == entry.body_sha256
                by_hash.setdefault(content_hash, []).append((version, size, is_body))
        with self._lock:
            report = self._report
            report.deletes += deletes
            report.inline += inline
            report.versions += deletes + inline
            report.s3 += sum(p[2] for pointers in by_hash.values() for p in pointers)
            report.s3_objects += len(by_hash)
        for content_hash, pointers in by_hash.items():
            self._submit(item.id, content_hash, pointers)

    def _check_inline(self, id: str, retained: list[tuple[int, Entry]]) -> int:
        """Check every inline body and part of the `retained` versions of `id`; returns how
        many inline bodies there are."""
        location = self._item_location(id)
        count, hashed, findings = inline_findings(
            id, retained, self.store.dictionaries.get, location
        )
        part_hashed, part_findings = inline_part_findings(id, retained, location)
        with self._lock:
            self._report.bytes_hashed += hashed + part_hashed
        for found in (*findings, *part_findings):
            self._found(found)
        return count

    def _submit(self, id: str, content_hash: str, pointers: list[tuple[int, int, bool]]) -> None:
        self._slots.acquire()
        if self._stop.is_set():
            self._slots.release()
            return
        future: Future[None] = self._pool.submit(self._check_object, id, content_hash, pointers)
        future.add_done_callback(lambda _: self._slots.release())

    def _check_object(
        self, id: str, content_hash: str, pointers: list[tuple[int, int, bool]]
    ) -> None:
        versions = tuple(dict.fromkeys(version for version, _, _ in pointers))
        newest, size, _ = pointers[-1]
        key = keys.body_key(self.store.prefix, id, content_hash)
        location = f"s3://{self.bucket}/{key}"

        def finding(kind: FindingKind, detail: str) -> None:
            self._found(Finding(kind, id, newest, location, detail, versions))

        try:
            try:
                response, actual = self._fetch(key)
            except ClientError as error:
                if is_object_missing(error):
                    if self._still_dangling(id, content_hash, key):
                        finding(FindingKind.DANGLING, "the object does not exist")
                    return
                finding(FindingKind.CHECK_FAILED, f"{'GET' if self.deep else 'HEAD'}: {error}")
                return
            except BotoCoreError as error:
                # FlexibleChecksumError: the bytes S3 sent disagree with S3's own checksum.
                kind = (
                    FindingKind.HASH_MISMATCH
                    if type(error).__name__ == "FlexibleChecksumError"
                    else FindingKind.CHECK_FAILED
                )
                finding(kind, str(error))
                return
            problems, unconfirmed = object_problems(id, content_hash, size, response, actual)
            if unconfirmed:
                with self._lock:
                    self._report.unconfirmed += 1
            for kind, detail in problems:
                finding(kind, detail)
        except Exception as error:  # a bug here must not pass for a clean store
            finding(FindingKind.CHECK_FAILED, f"{type(error).__name__}: {error}")
        finally:
            with self._lock:
                self._report.versions += sum(is_body for _, _, is_body in pointers)

    def _fetch(self, key: str) -> tuple[dict[str, Any], str | None]:
        """HeadObject, or with `deep` GetObject and the body's sha256."""
        if not self.deep:
            return self.s3.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED"), None
        response = self.s3.get_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        digest = hashlib.sha256()
        read = 0
        for chunk in response["Body"].iter_chunks(_READ_CHUNK):
            digest.update(chunk)
            read += len(chunk)
        with self._lock:
            self._report.bytes_hashed += read
        response["ContentLength"] = read
        return response, digest.hexdigest()

    def _still_dangling(self, id: str, content_hash: str, key: str) -> bool:
        """Confirm a missing object against the item as it is now, strongly consistent: a
        version that retention released, or a body uploaded again, is not a finding."""
        raw = self.dynamodb.get_item(
            TableName=self.table, Key={ID: {"S": id}}, ConsistentRead=True
        ).get("Item", {})
        item = item_from_dynamo(raw)
        referenced = item is not None and any(
            content_hash in entry.s3_objects()
            for _, entry in self.store.retention.retained(item, self.clock())
        )
        if referenced:
            try:
                self.s3.head_object(Bucket=self.bucket, Key=key)
            except ClientError as error:
                if is_object_missing(error):
                    return True
                raise
        with self._lock:
            self._report.raced += 1
        return False

    # --- bookkeeping -----------------------------------------------------------------------

    def _item_location(self, id: str) -> str:
        return f"dynamodb://{self.table}/{id}"

    def _found(self, finding: Finding) -> None:
        with self._lock:
            report = self._report
            report.findings_total += 1
            report.by_kind[str(finding.kind)] = report.by_kind.get(str(finding.kind), 0) + 1
            if self.max_findings is None or len(report.findings) < self.max_findings:
                report.findings.append(finding)
            if self._on_finding:
                self._on_finding(finding)

    def _tick(self) -> None:
        if self._progress is None:
            return
        with self._lock:
            report = self._report
            missing = report.by_kind.get(str(FindingKind.NOT_FOUND), 0)
            self._progress(
                VerifyProgress(
                    report.items, report.versions, report.findings_total, self._estimate, missing
                )
            )


def verify(
    store: VersionedHybridStore,
    *,
    ids: Iterable[str] | None = None,
    deep: bool = False,
    segments: int = DEFAULT_SEGMENTS,
    workers: int = DEFAULT_WORKERS,
    consistent_reads: bool = False,
    max_findings: int | None = DEFAULT_MAX_FINDINGS,
    on_finding: FindingCallback | None = None,
    progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Verify every retained pointer of `store` (or of `ids` only). See `Verifier`."""
    verifier = Verifier(
        store,
        deep=deep,
        segments=segments,
        workers=workers,
        consistent_reads=consistent_reads,
        max_findings=max_findings,
    )
    return verifier.run(ids, on_finding=on_finding, progress=progress)


# --- helpers ---------------------------------------------------------------------------------


def _raw_id(raw: dict[str, Any]) -> str:
    value = raw.get(ID)
    if isinstance(value, dict) and isinstance(value.get("S"), str):
        return value["S"]
    return repr(value)
