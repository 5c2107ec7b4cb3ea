"""The interface every benchmarked system offers, and the VHS adapter.

A system stores JSON records by id with an `updated_at` timestamp. `put` returns what the
system did ("stored", "unchanged", "stale"...), so the report can say when a peer's answer
differs from VHS's (for example a stale put that a peer applies). `exists` tells peers whose
API has separate create and update calls which one to use: the benchmark hands them that
knowledge for free, where a real caller would need a read to find out.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import ClientError

from vhs import Retention, VersionedHybridStore, resources
from vhs.local.stack import DEFAULT_REGION

from .billing import Biller


class System(Protocol):
    name: str
    biller: Biller

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str: ...

    def get(self, id: str) -> bytes: ...

    def delete(self, id: str, deleted_at: datetime) -> None: ...


def put_if(dynamodb: Any, table: str, item: dict[str, Any], condition: str, values: dict) -> bool:
    """PutItem `item` if `condition` holds (one request either way): False if DynamoDB
    refused it."""
    try:
        dynamodb.put_item(
            TableName=table,
            Item=item,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return False
    return True


class OwnTableAndBucket:
    """The set-up of a system of bare boto3 calls: a table (`table_definition`, made by the
    subclass) and a bucket of its own, created when it is built, and a biller over its two
    clients."""

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str, bucket: str) -> None:
        self.s3 = s3
        self.dynamodb = dynamodb
        self.table = table
        self.bucket = bucket
        dynamodb.create_table(**self.table_definition(table))
        s3.create_bucket(Bucket=bucket)
        self.biller = Biller(probe, [s3], [dynamodb])

    def table_definition(self, table: str) -> dict[str, Any]:
        """CreateTable's parameters for `table`."""
        raise NotImplementedError


class VhsSystem:
    """The store under test, by default with its defaults (8 KB inline threshold, 5 retained
    versions, strongly consistent reads, delta history)."""

    def __init__(
        self,
        s3: Any,
        dynamodb: Any,
        probe: Any,
        *,
        table: str,
        bucket: str,
        name: str = "VHS",
        retention: Retention | None = None,
        delta_history: bool = True,
    ) -> None:
        self.name = name
        self.table, self.bucket = table, bucket
        resources.create_store_resources(
            dynamodb, s3, table_name=table, bucket_name=bucket, region=DEFAULT_REGION
        )
        self.store = VersionedHybridStore(
            table,
            bucket,
            s3_client=s3,
            dynamodb_client=dynamodb,
            prefix="bench",
            retention=retention,
            delta_history=delta_history,
        )
        self.biller = Biller(probe, [s3], [dynamodb])

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        return str(self.store.put(id, record, updated_at=updated_at).outcome)

    def get(self, id: str) -> bytes:
        return self.store.get(id).body

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.store.delete(id, deleted_at=deleted_at)

    def collect_garbage(self, s3: Any, dynamodb: Any) -> None:
        """Run VHS's garbage collector over this store as its schedule would at steady state,
        through clients of its own (`s3`, `dynamodb`: un-metered): once with its clock past
        every grace period (orphans condemned and deleted), then once past the condemnations'
        expiry (their markers cleared from the items)."""
        from vhs.maintenance.gc import GarbageCollector

        store = VersionedHybridStore(
            self.table,
            self.bucket,
            s3_client=s3,
            dynamodb_client=dynamodb,
            prefix=self.store.prefix,
            retention=self.store.retention,
            delta_history=self.store.delta_history,
        )
        # Only the shards that hold objects (keys are `prefix/shard/...`): listing the other
        # ones finds nothing, and takes the benchmark's time.
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        depth = len(store.prefix.split("/")) if store.prefix else 0
        shards = sorted(
            {e["Key"].split("/")[depth] for page in listed for e in page.get("Contents", [])}
        )
        for ahead in (_GC_AHEAD, 2 * _GC_AHEAD):
            collector = GarbageCollector(
                store, grace=timedelta(0), clock=lambda ahead=ahead: time.time() + ahead
            )
            report = collector.run(shards)
            if not report.ok:
                raise RuntimeError(f"{self.name}: the garbage collector failed: {report}")


_GC_AHEAD = 24 * 3600  # past the collector's lease and marker expiry (minutes)
