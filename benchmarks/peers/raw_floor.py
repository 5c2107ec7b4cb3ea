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

from botocore.exceptions import ClientError

from vhs.resources import TABLE

from ..billing import Biller

# Bodies up to this size go inline: below DynamoDB's 400 KB item limit with room to spare.
INLINE_LIMIT = 350 * 1024


class RawFloor:
    name = "raw floor"

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str, bucket: str) -> None:
        self.s3 = s3
        self.dynamodb = dynamodb
        self.table = table
        self.bucket = bucket
        # The same table shape as VHS's (key, billing mode, stream): the floor differs from
        # VHS in its calls only.
        dynamodb.create_table(**TABLE.create_table_kwargs(table))
        s3.create_bucket(Bucket=bucket)
        self.biller = Biller(probe, [s3], [dynamodb])

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
        try:
            self.dynamodb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(id) OR t < :t",
                ExpressionAttributeValues={":t": {"S": stamp}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
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
