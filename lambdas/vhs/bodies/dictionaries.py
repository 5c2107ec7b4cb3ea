"""The zstd dictionaries a store packs bodies with (packing.ZSTD): where they live, how
readers find them, and which one writers use.

A dictionary is trained on a sample of the store's own records (`vhs dictionary train`,
vhs_ops/admin/dictionaries.py) and kept in the store's bucket at `{prefix}/_dictionaries/{id}` (its
id: packing.Dictionary.id, of its content). It is written once and never overwritten or
deleted: every entry packed with it names it (`zd`), and each such body must stay readable for
as long as its entry is kept. The collector never deletes one: it lists the bucket shard by
shard (`{prefix}/{shard}/`, two hex digits), and `_dictionaries` is no shard.

The newest is named by `{prefix}/_dictionaries/current`, which training rewrites once the new
dictionary is uploaded. A store that writes with dictionaries (`dictionaries=True`,
VHS_DICTIONARIES) reads it at most once every REFRESH_SECONDS, so new writes move to a new
dictionary within that time, and a store without one behaves as it always did (zlib alone,
no request more).

Readers fetch a dictionary by the id an entry names, check its content against the id, and
keep it for the life of the process (a Lambda's execution environment: across invocations).
The cache is keyed by id alone: content-addressed, one id is one dictionary whichever store
asks.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..aws import is_object_missing
from ..errors import BodyHashMismatch, DanglingPointer
from .packing import Dictionary

FOLDER = "_dictionaries"
CURRENT = "current"
REFRESH_SECONDS = 300.0

_CACHE: dict[str, Dictionary] = {}
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True)
class DictionaryInfo:
    """A dictionary as the bucket lists it."""

    id: str
    size: int
    last_modified: Any
    current: bool


class DictionaryStore:
    """One store's dictionaries, in its bucket under its prefix."""

    def __init__(
        self,
        s3: Any,
        bucket: str,
        prefix: str = "",
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`s3`: a client, or a function that makes one when it is first needed (the change
        feed reads a dictionary only for a patch of a body packed with one, so its cold
        start need not make an S3 client)."""
        self._s3 = s3
        self.bucket = bucket
        self.folder = f"{prefix}/{FOLDER}/" if prefix else f"{FOLDER}/"
        self.clock = clock
        self._newest: tuple[float, Dictionary | None] | None = None
        self._lock = threading.Lock()

    @property
    def s3(self) -> Any:
        if callable(self._s3) and not hasattr(self._s3, "get_object"):
            self._s3 = self._s3()
        return self._s3

    def key(self, dictionary_id: str) -> str:
        return self.folder + dictionary_id

    def location(self, dictionary_id: str) -> str:
        return f"s3://{self.bucket}/{self.key(dictionary_id)}"

    def get(self, dictionary_id: str) -> Dictionary:
        """The dictionary `dictionary_id`, from the process's cache or the bucket. Raises
        DanglingPointer when it is not there, BodyHashMismatch when its content is not its
        id's."""
        cached = _CACHE.get(dictionary_id)
        if cached is not None:
            return cached
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=self.key(dictionary_id))
        except ClientError as error:
            if is_object_missing(error):
                raise DanglingPointer(self.location(dictionary_id)) from None
            raise
        content = response["Body"].read()
        try:
            dictionary = Dictionary(content, dictionary_id)
        except ValueError:
            actual = hashlib.sha256(content).hexdigest()
            raise BodyHashMismatch(self.location(dictionary_id), dictionary_id, actual) from None
        with _CACHE_LOCK:
            return _CACHE.setdefault(dictionary_id, dictionary)

    def newest(self) -> Dictionary | None:
        """The dictionary new writes use: the one `current` names, read at most once every
        REFRESH_SECONDS; None before any was trained."""
        with self._lock:
            now = self.clock()
            if self._newest is not None and now - self._newest[0] < REFRESH_SECONDS:
                return self._newest[1]
            try:
                response = self.s3.get_object(Bucket=self.bucket, Key=self.folder + CURRENT)
                dictionary: Dictionary | None = self.get(response["Body"].read().decode().strip())
            except ClientError as error:
                if not is_object_missing(error):
                    raise
                dictionary = None
            self._newest = (now, dictionary)
            return dictionary

    def refresh(self) -> None:
        """Read `current` again at the next write, not REFRESH_SECONDS after the last read: for
        a writer that must use a dictionary just published by another (a benchmark that trains
        between releases)."""
        with self._lock:
            self._newest = None

    def publish(self, dictionary: Dictionary) -> None:
        """Keep `dictionary` (once: its key never changes content) and make it the one new
        writes use."""
        self.s3.put_object(
            Bucket=self.bucket,
            Key=self.key(dictionary.id),
            Body=dictionary.content,
            ContentType="application/octet-stream",
            ChecksumAlgorithm="SHA256",
        )
        self.s3.put_object(
            Bucket=self.bucket,
            Key=self.folder + CURRENT,
            Body=dictionary.id.encode(),
            ContentType="text/plain",
        )
        with self._lock:
            self._newest = (self.clock(), dictionary)

    def list(self) -> list[DictionaryInfo]:
        """Every dictionary the bucket keeps for this store, oldest first."""
        current = self.newest()
        found = []
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.folder
        )
        for page in pages:
            for obj in page.get("Contents", []):
                name = obj["Key"][len(self.folder) :]
                if name == CURRENT:
                    continue
                is_current = current is not None and current.id == name
                found.append(DictionaryInfo(name, obj["Size"], obj["LastModified"], is_current))
        return sorted(found, key=lambda info: info.last_modified)
