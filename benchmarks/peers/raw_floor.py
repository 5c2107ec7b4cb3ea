"""The raw floor: the fewest boto3 calls that can store and read a versioned record.

* small put: 1 PutItem with the body inline (no compression, no hashing);
* large put: 1 PutObject + 1 PutItem holding the key;
* every put carries the ordering condition `attribute_not_exists(id) OR t < :t`, so
  duplicate and stale puts cost the same calls and are refused by DynamoDB;
* read: 1 GetItem (strongly consistent), + 1 GetObject when the body is in S3;
* delete: 1 DeleteItem.

It is not a store (no history, no integrity checks, no garbage collection): it is the
wall-time yardstick and the request floor.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from vhs.resources import TABLE

from ..systems import OwnTableAndBucket, put_if

# Bodies up to this size go inline: below DynamoDB's 400 KB item limit with room to spare.
INLINE_LIMIT = 350 * 1024


class RawFloor(OwnTableAndBucket):
    name = "raw floor"

    def table_definition(self, table: str) -> dict[str, Any]:
        # The same table shape as VHS's (key, billing mode, stream): the floor differs from
        # VHS in its calls only.
        return TABLE.create_table_kwargs(table)

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        body = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
        stamp = updated_at.isoformat()
        item: dict[str, Any] = {"id": {"S": id}, "t": {"S": stamp}}
        if len(body) <= INLINE_LIMIT:
            item["b"] = {"B": body}
        else:
            # One key per version, so a refused put never overwrites the current body.
            key = f"{id}/{stamp}"
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
            item["k"] = {"S": key}
        condition = "attribute_not_exists(id) OR t < :t"
        if not put_if(self.dynamodb, self.table, item, condition, {":t": {"S": stamp}}):
            return "refused"
        return "stored"

    def get(self, id: str) -> bytes:
        item = self.dynamodb.get_item(
            TableName=self.table, Key={"id": {"S": id}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            raise KeyError(id)
        if "b" in item:
            return bytes(item["b"]["B"])
        return self.s3.get_object(Bucket=self.bucket, Key=item["k"]["S"])["Body"].read()

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.dynamodb.delete_item(TableName=self.table, Key={"id": {"S": id}})
