"""The store's resources: the index table and the body bucket (infra/store.py deploys them;
`vhs local up` and the tests create them with vhs_ops.provisioning.create_store_resources)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# --- The index table -----------------------------------------------------------------------
# One item per record id: the current version, the retained earlier versions and, for small
# bodies, the body itself. See docs/design.md for the item layout.
TABLE_PARTITION_KEY = "id"
TABLE_PARTITION_KEY_TYPE = "S"
TABLE_BILLING_MODE = "PAY_PER_REQUEST"
# The change feed (a later issue) reads both images from the stream.
TABLE_STREAM_VIEW_TYPE = "NEW_AND_OLD_IMAGES"
# A sparse index of the items that hold a garbage-collector condemnation (index/codec.py's `gcd`,
# its deadline): only those items are in it, so the collector finds and clears expired
# condemnations of ids that no longer have any object to list (a purged record, say) at the
# cost of the condemned items alone. Keys only: the collector needs the id and the deadline.
CONDEMNED_INDEX_NAME = "condemned"
CONDEMNED_INDEX_KEY = "gcd"
CONDEMNED_INDEX_KEY_TYPE = "N"


@dataclass(frozen=True)
class TableShape:
    partition_key: str = TABLE_PARTITION_KEY
    partition_key_type: str = TABLE_PARTITION_KEY_TYPE
    billing_mode: str = TABLE_BILLING_MODE
    stream_view_type: str = TABLE_STREAM_VIEW_TYPE
    condemned_index: str = CONDEMNED_INDEX_NAME
    condemned_index_key: str = CONDEMNED_INDEX_KEY
    condemned_index_key_type: str = CONDEMNED_INDEX_KEY_TYPE

    def create_table_kwargs(self, table_name: str) -> dict[str, Any]:
        """Arguments for DynamoDB CreateTable (used by the local stack and the tests)."""
        return {
            "TableName": table_name,
            "KeySchema": [{"AttributeName": self.partition_key, "KeyType": "HASH"}],
            "AttributeDefinitions": [
                {"AttributeName": self.partition_key, "AttributeType": self.partition_key_type},
                {
                    "AttributeName": self.condemned_index_key,
                    "AttributeType": self.condemned_index_key_type,
                },
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": self.condemned_index,
                    "KeySchema": [{"AttributeName": self.condemned_index_key, "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": self.billing_mode,
            "StreamSpecification": {
                "StreamEnabled": True,
                "StreamViewType": self.stream_view_type,
            },
        }


TABLE = TableShape()

# --- The body bucket -----------------------------------------------------------------------
# Incomplete multipart uploads (a writer that crashed mid-upload) are aborted after this many
# days, so they cost nothing for long.
BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS = 1
BUCKET_ABORT_RULE_ID = "abort-incomplete-multipart-uploads"


def abort_incomplete_uploads_rule() -> dict[str, Any]:
    """The S3 lifecycle rule that aborts the body bucket's incomplete multipart uploads after
    BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS (infra/store.py's body bucket declares the same)."""
    return {
        "ID": BUCKET_ABORT_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {
            "DaysAfterInitiation": BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS
        },
    }
