"""The GC benchmark's objects: a data set of referenced bodies and orphans (`build_dataset`), and
writing it into a store on the in-process moto server (`populate`)."""

from __future__ import annotations

import base64
import random
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from vhs.codec import Body, encode_record
from vhs.item import CURRENT, HISTORY, ID, VERSION, entry_to_dynamo
from vhs.model import Entry
from vhs.ordering import parse_timestamp

from . import workload
from .gc_process import InProcessServer

SEED = 2018
ORPHAN_SHARE = 0.05
# Objects written through the store's own API (store.put, and a crashed writer's upload) in
# each store; the rest are put straight into moto's backend (see InProcessServer).
API_OBJECTS = 250
POPULATION_THREADS = 8
# Versions of an expired-kind record: the current one and 6 earlier ones, one more than the
# default retention keeps (5) and one short of a writer's trim (at 2 expired entries).
EXPIRED_RECORD_VERSIONS = 7


@dataclass
class Record:
    id: str
    bodies: list[Body]  # versions 1..n, oldest first
    expired: int = 0  # how many of the oldest are beyond retention: orphans
    crashed: list[Body] = field(default_factory=list)  # uploaded, never committed: orphans
    via_api: bool = False

    def stamp(self, version: int) -> str:
        return (datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=version)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )


@dataclass
class Dataset:
    objects: int
    records: list[Record]  # records with an item (and maybe crashed uploads or expired bodies)
    crashed_creates: list[Record]  # ids with no item: a body uploaded by a create that died
    kinds: dict[str, int]  # orphans by kind

    @property
    def orphans(self) -> int:
        return sum(self.kinds.values())

    @property
    def referenced(self) -> int:
        return self.objects - self.orphans

    @property
    def orphan_bytes(self) -> int:
        expired = sum(b.size for r in self.records for b in r.bodies[: r.expired])
        crashed = sum(b.size for r in [*self.records, *self.crashed_creates] for b in r.crashed)
        return expired + crashed

    def referenced_keys(self, key: Callable[[str, str], str]) -> set[str]:
        return {key(r.id, body.sha256) for r in self.records for body in r.bodies[r.expired :]}


def catalogue_body(writer: Any, rid: str, version: int) -> Body:
    """A small catalogue record of `rid` (about 250 bytes of JSON), encoded for the store."""
    record = {
        "id": rid,
        "version": version,
        "title": writer.sentence(6, 12),
        "creator": writer.name(),
        "date": writer.dates(),
        "note": writer.sentence(12, 24),
    }
    return encode_record(record, None, max_size=2**20)


def build_dataset(objects: int, orphan_share: float, seed: int = SEED) -> Dataset:
    """`objects` S3 objects: records of 1 to 3 versions, plus orphans split between crashed
    creates (no item), crashed updates (an item that never pointed at the body) and versions
    beyond retention (in the item's history, no longer retained). Bodies are small catalogue
    records (about 250 bytes of JSON)."""
    writer = workload._Writer(random.Random(seed))

    def body(rid: str, version: int) -> Body:
        return catalogue_body(writer, rid, version)

    orphans = round(objects * orphan_share)
    referenced = objects - orphans
    per_expired = EXPIRED_RECORD_VERSIONS - 1
    expired = min(orphans // 3, referenced // (2 * per_expired))
    updates = (orphans - expired) // 2
    creates = orphans - expired - updates
    records: list[Record] = []
    for n in range(expired):
        rid = f"b{n:07d}-x"
        versions = [body(rid, v) for v in range(1, EXPIRED_RECORD_VERSIONS + 1)]
        records.append(Record(rid, versions, expired=1))
    remaining = referenced - expired * per_expired
    n = 0
    while remaining > 0:
        rid = f"b{n:07d}"
        count = min(1 + n % 3, remaining)
        records.append(Record(rid, [body(rid, v) for v in range(1, count + 1)]))
        remaining -= count
        n += 1
    plain = [r for r in records if not r.expired]
    for k in range(updates):
        target = plain[k % len(plain)]
        target.crashed.append(body(target.id, len(target.bodies) + 1 + len(target.crashed)))
    crashed_creates = []
    for k in range(creates):
        rid = f"n{k:07d}"
        crashed_creates.append(Record(rid, [], crashed=[body(rid, 1)]))
    # A sample of every kind goes through the store's API, spread over the kinds.
    share = min(1.0, API_OBJECTS / objects)
    for group in (records[:expired], plain, crashed_creates):
        for record in group[: max(1, round(len(group) * share))]:
            record.via_api = True
    dataset = Dataset(
        objects,
        records,
        crashed_creates,
        {"crashed create": creates, "crashed update": updates, "beyond retention": expired},
    )
    total = sum(len(r.bodies) + len(r.crashed) for r in [*records, *crashed_creates])
    assert total == objects, (total, objects)
    return dataset


def mean_body_size(orphan_share: float) -> float:
    """The mean size of a referenced body, from a sample data set of 300 objects."""
    sample = build_dataset(300, orphan_share).records
    return sum(b.size for r in sample for b in r.bodies) / sum(len(r.bodies) for r in sample)


def populate(dataset: Dataset, store: Any, dynamodb: Any) -> dict[str, float]:
    """Write `dataset` into `store`: the records marked via_api through store.put (and a
    crashed writer's upload: store.bodies.put with no index write, as tests/test_gc.py does),
    the rest as the same objects put into moto's backend and the same items, in the store's
    format, with BatchWriteItem."""
    everyone = [*dataset.records, *dataset.crashed_creates]
    started = time.perf_counter()

    def through_api(record: Record) -> None:
        for version, body in enumerate(record.bodies, start=1):
            store.put(
                record.id,
                body.data,
                updated_at=record.stamp(version),
                content_type=body.content_type,
            )
        for body in record.crashed:
            store.bodies.put(store.body_key(record.id, body.sha256), body, {})

    with ThreadPoolExecutor(POPULATION_THREADS) as pool:
        list(pool.map(through_api, [r for r in everyone if r.via_api]))
    api_seconds = time.perf_counter() - started

    started = time.perf_counter()
    seed_objects([r for r in everyone if not r.via_api], store)
    s3_seconds = time.perf_counter() - started
    started = time.perf_counter()
    _seed_items([r for r in dataset.records if not r.via_api], store, dynamodb)
    return {
        "api_seconds": api_seconds,
        "seeded_s3_seconds": s3_seconds,
        "seeded_items_seconds": time.perf_counter() - started,
    }


def seed_objects(records: list[Record], store: Any) -> None:
    """Put the bodies of `records` (committed and crashed) straight into moto's S3 backend,
    with the key, checksum and metadata the store's own upload gives them."""
    backend = InProcessServer.s3_backend()
    bucket = backend.get_bucket(store.bucket_name)
    for record in records:
        encoded_id = base64.urlsafe_b64encode(record.id.encode()).decode()
        uploads = [(v, b) for v, b in enumerate(record.bodies, start=1)]
        uploads += [(len(record.bodies) + 1, b) for b in record.crashed]
        for version, body in uploads:
            assert body.data is not None
            key = backend.put_object(
                store.bucket_name,
                store.body_key(record.id, body.sha256),
                body.data,
                checksum_value=base64.b64encode(bytes.fromhex(body.sha256)).decode(),
            )
            key.set_metadata(
                {
                    "Content-Type": body.content_type,
                    "x-amz-meta-vhs-id": encoded_id,
                    "x-amz-meta-vhs-updated-at": record.stamp(version),
                }
            )
            key.set_acl(bucket.acl)


def _seed_items(records: list[Record], store: Any, dynamodb: Any) -> None:
    """Write the items of `records`, in the store's format (vhs.item), with BatchWriteItem."""
    now = int(time.time())

    def to_item(record: Record) -> dict[str, Any]:
        entries = [
            entry_to_dynamo(
                Entry(
                    updated_at=parse_timestamp(record.stamp(version)),
                    content_hash=body.sha256,
                    size=body.size,
                    written_at=now - len(record.bodies) + version,
                    token=secrets.token_urlsafe(9),
                    content_type=body.content_type,
                )
            )
            for version, body in enumerate(record.bodies, start=1)
        ]
        return {
            ID: {"S": record.id},
            VERSION: {"N": str(len(entries))},
            CURRENT: {"L": entries[-1:]},
            HISTORY: {"L": entries[:-1]},
        }

    items = [to_item(r) for r in records]

    def write(batch: list[dict[str, Any]]) -> None:
        request = {store.table_name: [{"PutRequest": {"Item": i}} for i in batch]}
        while request:
            request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [items[i : i + 25] for i in range(0, len(items), 25)]))
