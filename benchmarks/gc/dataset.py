"""The GC benchmark's objects (`build`), written into a store on the in-process server."""

from __future__ import annotations

import base64
import random
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vhs.codec import Body, encode_record
from vhs.index.codec import CURRENT, HISTORY, ID, VERSION, entry_to_dynamo
from vhs.keys import body_metadata
from vhs.model import Entry
from vhs.timestamps import parse_timestamp

from .. import workload
from .child import InProcessServer

ORPHAN_SHARE = 0.05
API_OBJECTS = 250  # objects per store written through the store's API; the rest seeded
# The current version and 6 earlier ones: one more than the default retention keeps.
EXPIRED_RECORD_VERSIONS = 7


@dataclass
class Record:
    id: str
    bodies: list[Body]  # versions 1..n, oldest first
    expired: int = 0  # how many of the oldest are beyond retention: orphans
    crashed: list[Body] = field(default_factory=list)  # uploaded, never committed: orphans
    via_api: bool = False

    def stamp(self, version: int) -> str:
        return workload.timestamp(0, 60 * version).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Dataset:
    objects: int
    records: list[Record]  # records with an item
    crashed_creates: list[Record]  # ids with no item, a body uploaded by a create that died
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
        return expired + sum(
            b.size for r in [*self.records, *self.crashed_creates] for b in r.crashed
        )

    def referenced_keys(self, key: Any) -> set[str]:
        return {key(r.id, body.sha256) for r in self.records for body in r.bodies[r.expired :]}


def bodies(rid: str, versions: range, seed: int = workload.SEED) -> list[Body]:
    """Small catalogue records of `rid` (about 250 bytes of JSON), encoded for the store."""
    w = workload.Writer(random.Random(f"{seed}/{rid}"))

    def record(v: int) -> dict[str, Any]:
        return {"id": rid, "version": v, "title": w.sentence(6, 12), "creator": w.name(),
                "date": w.dates(), "note": w.sentence(12, 24)}  # fmt: skip

    return [encode_record(record(v), None, max_size=2**20) for v in versions]


def build(objects: int, orphan_share: float) -> Dataset:
    """`objects` S3 objects, `orphan_share` of them orphans of the three kinds (`kinds`)."""
    orphans = round(objects * orphan_share)
    referenced = objects - orphans
    expired = min(orphans // 3, referenced // (2 * (EXPIRED_RECORD_VERSIONS - 1)))
    updates = (orphans - expired) // 2
    creates = orphans - expired - updates
    records = [
        Record(f"b{n:07d}-x", bodies(f"b{n:07d}-x", range(1, EXPIRED_RECORD_VERSIONS + 1)), 1)
        for n in range(expired)
    ]
    remaining, n = referenced - expired * (EXPIRED_RECORD_VERSIONS - 1), 0
    while remaining > 0:
        count = min(1 + n % 3, remaining)
        records.append(Record(f"b{n:07d}", bodies(f"b{n:07d}", range(1, count + 1))))
        remaining, n = remaining - count, n + 1
    plain = [r for r in records if not r.expired]
    for k in range(updates):
        target = plain[k % len(plain)]
        after = len(target.bodies) + 1 + len(target.crashed)
        target.crashed += bodies(target.id, range(after, after + 1))
    crashed = [Record(f"n{k:07d}", [], crashed=bodies(f"n{k:07d}", range(1, 2)))
               for k in range(creates)]  # fmt: skip
    share = min(1.0, API_OBJECTS / objects)  # a sample of every kind through the store's API
    for group in (records[:expired], plain, crashed):
        for record in group[: max(1, round(len(group) * share))]:
            record.via_api = True
    kinds = {"crashed create": creates, "crashed update": updates, "beyond retention": expired}
    dataset = Dataset(objects, records, crashed, kinds)
    assert sum(len(r.bodies) + len(r.crashed) for r in [*records, *crashed]) == objects
    return dataset


def populate(dataset: Dataset, store: Any, dynamodb: Any) -> float:
    """Write `dataset` into `store` (a sample through its API, the rest seeded); the seconds."""
    everyone = [*dataset.records, *dataset.crashed_creates]
    started = time.perf_counter()

    def through_api(record: Record) -> None:
        for version, body in enumerate(record.bodies, start=1):
            at = record.stamp(version)
            store.put(record.id, body.data, updated_at=at, content_type=body.content_type)
        for body in record.crashed:
            store.bodies.put(store.body_key(record.id, body.sha256), body, {})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(through_api, [r for r in everyone if r.via_api]))
    seed_objects([r for r in everyone if not r.via_api], store)
    items = [_item(r) for r in dataset.records if not r.via_api]

    def write(batch: list[dict[str, Any]]) -> None:
        request = {store.table_name: [{"PutRequest": {"Item": i}} for i in batch]}
        while request:
            request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [items[i : i + 25] for i in range(0, len(items), 25)]))
    return time.perf_counter() - started


def seed_objects(records: list[Record], store: Any) -> None:
    """`records`' bodies put straight into moto's S3 backend, as the store's upload makes them."""
    backend = InProcessServer.s3_backend()
    bucket = backend.get_bucket(store.bucket_name)
    for record in records:
        uploads = list(enumerate(record.bodies, start=1))
        uploads += [(len(record.bodies) + 1, b) for b in record.crashed]
        for version, body in uploads:
            key = backend.put_object(
                store.bucket_name,
                store.body_key(record.id, body.sha256),
                body.data,
                checksum_value=base64.b64encode(bytes.fromhex(body.sha256)).decode(),
            )
            metadata = body_metadata(record.id, record.stamp(version))
            metadata = {f"x-amz-meta-{name}": value for name, value in metadata.items()}
            key.set_metadata({"Content-Type": body.content_type, **metadata})
            key.set_acl(bucket.acl)


def _item(record: Record) -> dict[str, Any]:
    """The record's item, in the store's format (vhs.index.codec)."""
    now = int(time.time())
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
