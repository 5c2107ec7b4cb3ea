"""Every AWS resource's shape, defined once: the library, the local stack and the CDK read it.
Creating the resources locally (for `vhs local up`, the tests, the benchmarks) is the operator
side's: vhs_ops.provisioning."""

# A module a feature, as in infra/: store, staging, ingest, changes, reindex, gc, read_api,
# bulk_import, and local (where the local stack listens); shape holds what they share. What only
# the deployed stacks have (alarm thresholds, the deployed body prefix, bucket versioning) is in
# infra/shapes.py.

from __future__ import annotations

from .bulk_import import BULK_IMPORT, IMPORT_PREFIX, IMPORT_RESULTS_PREFIX, BulkImportShape
from .changes import (
    CHANGES,
    SNS_FIFO_DEDUPLICATION_WINDOW_SECONDS,
    SNS_MAX_DEDUPLICATION_ID,
    SNS_MAX_MESSAGE_BYTES,
    SNS_MAX_MESSAGE_GROUP_ID,
    SNS_PUBLISH_BATCH_ENTRIES,
    STREAM_RETENTION_SECONDS,
    ChangeFeedShape,
)
from .gc import GC, GcShape
from .ingest import (
    DLQ_ALARM,
    INGEST,
    MIN_MAX_RECEIVE_COUNT,
    QUEUE_VISIBILITY_TO_TIMEOUT_RATIO,
    DlqAlarmShape,
    IngestShape,
)
from .local import CONTAINER_ENDPOINT, CONTAINER_HOST, DEFAULT_PORT
from .read_api import LAMBDA_RESPONSE_PAYLOAD_BYTES, READ_API, ReadApiShape
from .reindex import REINDEX, ReindexShape
from .shape import (
    ALARM_PERIOD_SECONDS,
    MAX_SQS_MESSAGE_BYTES,
    MAX_SQS_RETENTION_SECONDS,
    FunctionShape,
)
from .staging import (
    DEAD_LETTER_RECEIPT_PREFIX,
    DEAD_LETTER_STAGING_PREFIX,
    STAGING_EXPIRATION_DAYS,
    STAGING_EXPIRY_RULE_ID,
    STAGING_PREFIX,
    staging_expiry_rule,
)
from .store import (
    BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS,
    BUCKET_ABORT_RULE_ID,
    CONDEMNED_INDEX_KEY,
    CONDEMNED_INDEX_KEY_TYPE,
    CONDEMNED_INDEX_NAME,
    TABLE,
    TABLE_BILLING_MODE,
    TABLE_PARTITION_KEY,
    TABLE_PARTITION_KEY_TYPE,
    TABLE_STREAM_VIEW_TYPE,
    TableShape,
    abort_incomplete_uploads_rule,
)

__all__ = [
    "ALARM_PERIOD_SECONDS",
    "BUCKET_ABORT_INCOMPLETE_MULTIPART_DAYS",
    "BUCKET_ABORT_RULE_ID",
    "BULK_IMPORT",
    "CHANGES",
    "CONDEMNED_INDEX_KEY",
    "CONDEMNED_INDEX_KEY_TYPE",
    "CONDEMNED_INDEX_NAME",
    "CONTAINER_ENDPOINT",
    "CONTAINER_HOST",
    "DEAD_LETTER_RECEIPT_PREFIX",
    "DEAD_LETTER_STAGING_PREFIX",
    "DEFAULT_PORT",
    "DLQ_ALARM",
    "GC",
    "IMPORT_PREFIX",
    "IMPORT_RESULTS_PREFIX",
    "INGEST",
    "LAMBDA_RESPONSE_PAYLOAD_BYTES",
    "MAX_SQS_MESSAGE_BYTES",
    "MAX_SQS_RETENTION_SECONDS",
    "MIN_MAX_RECEIVE_COUNT",
    "QUEUE_VISIBILITY_TO_TIMEOUT_RATIO",
    "READ_API",
    "REINDEX",
    "SNS_FIFO_DEDUPLICATION_WINDOW_SECONDS",
    "SNS_MAX_DEDUPLICATION_ID",
    "SNS_MAX_MESSAGE_BYTES",
    "SNS_MAX_MESSAGE_GROUP_ID",
    "SNS_PUBLISH_BATCH_ENTRIES",
    "STAGING_EXPIRATION_DAYS",
    "STAGING_EXPIRY_RULE_ID",
    "STAGING_PREFIX",
    "STREAM_RETENTION_SECONDS",
    "TABLE",
    "TABLE_BILLING_MODE",
    "TABLE_PARTITION_KEY",
    "TABLE_PARTITION_KEY_TYPE",
    "TABLE_STREAM_VIEW_TYPE",
    "BulkImportShape",
    "ChangeFeedShape",
    "DlqAlarmShape",
    "FunctionShape",
    "GcShape",
    "IngestShape",
    "ReadApiShape",
    "ReindexShape",
    "TableShape",
    "abort_incomplete_uploads_rule",
    "staging_expiry_rule",
]
