"""The interface every benchmarked system offers, and the VHS adapter. `put` says what the
system did ("stored", "unchanged", "stale"...); `exists` tells a peer with separate create and
update calls which to use, for free, where a real caller would need a read."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import ClientError

from vhs import VersionedHybridStore, resources
from vhs.local.stack import DEFAULT_REGION
from vhs.maintenance.gc import GarbageCollector

from .billing import Biller

GC_AHEAD = 24 * 3600  # past the collector's lease and marker expiry (minutes)


class System(Protocol):
    name: str
    biller: Biller

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str: ...

    def get(self, id: str) -> bytes: ...

    def delete(self, id: str, deleted_at: datetime) -> None: ...


def plain_table(name: str, *, stream: bool) -> dict[str, Any]:
    """CreateTable's parameters for a table keyed by `id`, on demand, with a stream or none."""
    key = {"KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
           "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}]}  # fmt: skip
    table = {"TableName": name, "BillingMode": "PAY_PER_REQUEST", **key}
    view = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return table | ({"StreamSpecification": view} if stream else {})


def put_if(dynamodb: Any, table: str, item: dict[str, Any], condition: str, values: dict) -> bool:
    """PutItem `item` if `condition` holds (one request either way): False if refused."""
    try:
        dynamodb.put_item(TableName=table, Item=item, ConditionExpression=condition,
                          ExpressionAttributeValues=values)  # fmt: skip
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return False
    return True


class OwnTableAndBucket:
    """A system of bare boto3 calls: a table (`table_definition`) and a bucket of its own, and
    a biller over its two clients."""

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str, bucket: str) -> None:
        self.s3, self.dynamodb, self.table, self.bucket = s3, dynamodb, table, bucket
        dynamodb.create_table(**self.table_definition(table))
        s3.create_bucket(Bucket=bucket)
        self.biller = Biller(probe, [s3], [dynamodb])

    def table_definition(self, table: str) -> dict[str, Any]:
        raise NotImplementedError


class VhsSystem:
    """The store under test with its defaults (8 KB inline threshold, 5 retained versions,
    strongly consistent reads, delta history unless `delta_history` is False)."""

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str, bucket: str,
                 name: str = "VHS", delta_history: bool = True) -> None:  # fmt: skip
        self.name, self.table, self.bucket = name, table, bucket
        resources.create_store_resources(dynamodb, s3, table_name=table, bucket_name=bucket,
                                         region=DEFAULT_REGION)  # fmt: skip
        self.options = {"prefix": "bench", "delta_history": delta_history}
        self.store = VersionedHybridStore(table, bucket, s3_client=s3, dynamodb_client=dynamodb,
                                          **self.options)  # fmt: skip
        self.biller = Biller(probe, [s3], [dynamodb])

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        return str(self.store.put(id, record, updated_at=updated_at).outcome)

    def get(self, id: str) -> bytes:
        return self.store.get(id).body

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.store.delete(id, deleted_at=deleted_at)

    def collect_garbage(self, s3: Any, dynamodb: Any) -> None:
        """VHS's garbage collector, as its schedule would run it at steady state, through
        un-metered clients: past every grace period (orphans deleted), then past the
        condemnations' expiry (their markers cleared from the items)."""
        store = VersionedHybridStore(self.table, self.bucket, s3_client=s3,
                                     dynamodb_client=dynamodb, **self.options)  # fmt: skip
        # Only the shards that hold objects (keys are `prefix/shard/...`).
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        shards = {e["Key"].split("/")[1] for page in listed for e in page.get("Contents", [])}
        for ahead in (GC_AHEAD, 2 * GC_AHEAD):
            clock = lambda ahead=ahead: time.time() + ahead  # noqa: E731
            report = GarbageCollector(store, grace=timedelta(0), clock=clock).run(sorted(shards))
            if not report.ok:
                raise RuntimeError(f"{self.name}: the garbage collector failed: {report}")
