"""The pynamodb_mate peer: a pynamodb Model with `LargeAttributeMixin`, used as its docs show.

The model follows the package's "Store Large Object in DynamoDB" example: a hash key, an
`update_at` time and one large attribute (`body`, a UnicodeAttribute that holds the S3 URI).
Calls are the documented "transaction API" with the documented clean-up flags:

* create: `create_large_attribute_item(..., clean_up_when_failed=True)`
  (HEAD, then PUT if the object is new, then PutItem);
* update: `update_large_attribute_item(..., update_actions=[update_at.set(...)],
  clean_up_when_succeeded=True, clean_up_when_failed=True)`
  (HEAD, PUT if new, GetItem of the old item, UpdateItem, DeleteObjects of the old body);
* read: `Model.get(pk)` (pynamodb's default, an eventually consistent read) and an S3 GET;
* delete: `delete_large_attribute_item(..., attributes=["body"],
  clean_up_when_succeeded=True)` (GetItem, DeleteItem, DeleteObjects).

The mixin has no ordering and no conditions: a stale put is applied like any update (last
writer wins). Every body goes to S3, however small: the mixin has no inline path.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pynamodb_mate.api as pm
from pynamodb_mate.patterns.large_attribute.api import LargeAttributeMixin, split_s3_uri

from vhs.local.stack import DEFAULT_REGION, LOCAL_CREDENTIALS

from ..billing import Biller

_PREFIX = "bench/"


def _body(record: Any) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def local_meta(table: str, endpoint: str) -> Any:
    """A pynamodb `Meta` for `table` on the local `endpoint`."""
    return type(
        "Meta",
        (),
        {
            "table_name": table,
            "region": DEFAULT_REGION,
            "host": endpoint,
            "billing_mode": pm.constants.PAY_PER_REQUEST_BILLING_MODE,
            # Not in the docs' example: every table in the run has a stream, so moto's
            # per-write stream work falls on every system alike. It changes no request.
            "stream_view_type": "NEW_AND_OLD_IMAGES",
            "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        },
    )


def document_model(table: str, endpoint: str) -> Any:
    """The docs' `Document` model, bound to `table` on `endpoint`."""
    meta = local_meta(table, endpoint)

    class Document(pm.Model, LargeAttributeMixin):
        Meta = meta
        pk = pm.UnicodeAttribute(hash_key=True)
        update_at = pm.UTCDateTimeAttribute()
        body = pm.UnicodeAttribute(null=True)  # the large attribute: holds its S3 URI

    return Document


class PynamodbMateStore:
    name = "pynamodb_mate"

    def __init__(self, s3: Any, endpoint: str, probe: Any, *, table: str, bucket: str) -> None:
        self.s3 = s3
        self.table, self.bucket = table, bucket
        self.model = document_model(table, endpoint)
        self.model.create_table(wait=True)
        s3.create_bucket(Bucket=bucket)
        # pynamodb makes its own botocore client: meter that one.
        dynamodb = self.model._get_connection().connection.client
        self.biller = Biller(probe, [s3], [dynamodb])

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        common = {
            "s3_client": self.s3,
            "pk": id,
            "sk": None,
            "kvs": {"body": _body(record)},
            "bucket": self.bucket,
            "prefix": _PREFIX,
            "update_at": updated_at,
        }
        if not exists:
            self.model.create_large_attribute_item(
                **common, attributes={"update_at": updated_at}, clean_up_when_failed=True
            )
        else:
            self.model.update_large_attribute_item(
                **common,
                update_actions=[self.model.update_at.set(updated_at)],
                clean_up_when_succeeded=True,
                clean_up_when_failed=True,
            )
        return "stored"

    def get(self, id: str) -> bytes:
        try:
            document = self.model.get(id)
        except self.model.DoesNotExist:
            raise KeyError(id) from None
        bucket, key = split_s3_uri(document.body)
        return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.model.delete_large_attribute_item(
            s3_client=self.s3, pk=id, sk=None, attributes=["body"], clean_up_when_succeeded=True
        )
