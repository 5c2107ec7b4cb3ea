"""A baseline written from Wellcome Collection's published 2018 VersionedHybridStore.

The algorithm (wellcometrust/platform, `VersionedHybridStore.scala`, 2018), per put:

1. GetItem the id's row (the 2018 code used Scanamo's default, an eventually consistent read);
2. if there is a row, GET the current body from S3 and compare: the same bytes end the put;
3. PUT the new body to `{shard}/{id}/{hash of the content}`;
4. PutItem the row with `attribute_not_exists(id) OR version < :v`.

A read is GetItem + S3 GET. The original has no delete (and no garbage collection): here a
delete is a single DeleteItem, which leaves every body in S3. A put whose condition fails
(a stale put) has already uploaded its body, which stays as an orphan, as in the original.

Two details are stand-ins that change no request and no price: the content hash is CRC-32
(the original used 32-bit MurmurHash3), and `version` is the caller's `updated_at` in
microseconds, so the condition orders writes as VHS's does.
"""

from __future__ import annotations

import json
import zlib
from datetime import datetime
from typing import Any

from ..systems import OwnTableAndBucket, put_if


def _body(record: Any) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _version(updated_at: datetime) -> int:
    return int(updated_at.timestamp() * 1_000_000)


class Wellcome2018Store(OwnTableAndBucket):
    name = "Wellcome 2018"

    def table_definition(self, table: str) -> dict[str, Any]:
        return {
            "TableName": table,
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            # The 2018 tables fed the pipeline through their streams; every table in the run
            # has one, so moto's per-write stream work falls on every system alike.
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        }

    def _row(self, id: str) -> dict[str, Any] | None:
        return self.dynamodb.get_item(TableName=self.table, Key={"id": {"S": id}}).get("Item")

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        body = _body(record)
        row = self._row(id)
        if row is not None:
            old = self.s3.get_object(Bucket=self.bucket, Key=row["s3key"]["S"])["Body"].read()
            if old == body:
                return "unchanged"
        key = f"{id[-2:][::-1]}/{id}/{zlib.crc32(body):08x}"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        version = {"N": str(_version(updated_at))}
        item = {"id": {"S": id}, "version": version, "s3key": {"S": key}}
        condition = "attribute_not_exists(id) OR version < :v"
        if not put_if(self.dynamodb, self.table, item, condition, {":v": version}):
            return "stale (orphan body left in S3)"
        return "stored"

    def get(self, id: str) -> bytes:
        row = self._row(id)
        if row is None:
            raise KeyError(id)
        return self.s3.get_object(Bucket=self.bucket, Key=row["s3key"]["S"])["Body"].read()

    def delete(self, id: str, deleted_at: datetime) -> None:
        # Not in the 2018 store: the least a delete can do. Bodies stay in S3 for ever.
        self.dynamodb.delete_item(TableName=self.table, Key={"id": {"S": id}})
