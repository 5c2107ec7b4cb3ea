"""The documented price table, and DynamoDB's capacity rules, as the benchmarks apply them.

Prices are AWS US East (N. Virginia), on demand, as recorded in
/work/shared/notes/anchors.md ("Costs that shape the design"). Capacity follows AWS's rules:

* a write (PutItem, UpdateItem, DeleteItem) consumes 1 write unit per started KB of the
  *larger* of the item before and after it, at least 1; a write whose condition fails still
  consumes units, on the size of the existing item (at least 1); transactions cost double;
* a read (GetItem) consumes 1 read unit per started 4 KB of the *whole* item (a projection does
  not make it cheaper), at least 1 even when there is no item; eventually consistent reads half;
* item size is the sum over attributes of the name's UTF-8 bytes and the value's size;
* storage is billed per GB-month: DynamoDB on every item's size plus 100 bytes, S3 on object
  bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vhs import item as vhs_item

# --- Prices, US dollars per million --------------------------------------------------------------


@dataclass(frozen=True)
class PriceTable:
    s3_put_per_million: float = 5.00  # PUT, COPY, POST, LIST
    s3_get_per_million: float = 0.40  # GET, HEAD and all other reads
    s3_delete_per_million: float = 0.00  # DELETE (and multi-object delete) are free
    dynamodb_write_unit_per_million: float = 0.625
    dynamodb_read_unit_per_million: float = 0.125  # strongly consistent, per 4 KB
    dynamodb_storage_per_gb_month: float = 0.25  # Standard table class; item bytes + 100
    s3_storage_per_gb_month: float = 0.023  # S3 Standard, first 50 TB
    # The read API (issue 14): Lambda on arm64, behind a function URL, which adds nothing.
    lambda_request_per_million: float = 0.20
    lambda_arm_gb_second: float = 0.0000133334  # first 7.5 billion GB-s a month
    function_url_request_per_million: float = 0.00
    http_api_request_per_million: float = 1.00  # API Gateway HTTP API, first 300 million
    rest_api_request_per_million: float = 3.50  # API Gateway REST API, first 333 million
    # Reindex (benchmarks/reindex.py). From AWS's US East pricing pages as recalled for issue
    # 14 (not in anchors.md): check them before quoting a bill.
    step_functions_transition_per_thousand: float = 0.025  # Standard workflows
    sns_fifo_publish_per_million: float = 0.30  # a batch entry bills as a publish (64 KB each)
    sns_fifo_payload_per_gb: float = 0.017  # published payload
    sns_fifo_delivery_per_million: float = 0.01  # to an SQS FIFO subscription
    sns_fifo_delivery_payload_per_gb: float = 0.001
    # The ingest paths' compute and queues (benchmarks/bulk_import.py), US East, on demand:
    # Lambda as above (https://aws.amazon.com/lambda/pricing/); SQS standard queues: $0.40 per
    # million requests, each 64 KB of a payload one request (https://aws.amazon.com/sqs/pricing/);
    # Step Functions: Standard $0.025 per 1,000 state transitions, Express $1.00 per million
    # requests and $0.00001667 per GB-second, memory billed in 64 MB steps
    # (https://aws.amazon.com/step-functions/pricing/).
    sqs_requests_per_million: float = 0.40
    sfn_express_requests_per_million: float = 1.00
    sfn_express_gb_second: float = 0.00001667


PRICES = PriceTable()

# S3 operations by pricing tier. Multi-object delete (DeleteObjects) is an HTTP POST; it is
# counted here as a DELETE, free. Only pynamodb_mate uses it, so this reading can only make
# that peer look cheaper than it is.
S3_PUT_TIER = frozenset(
    {
        "PutObject",
        "CopyObject",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListMultipartUploads",
        "ListParts",
    }
)
S3_GET_TIER = frozenset({"GetObject", "HeadObject", "GetObjectAttributes"})
S3_FREE_TIER = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})

DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
DYNAMODB_READS = frozenset({"GetItem"})

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
# Storage: AWS adds 100 bytes of indexing overhead to every item's size; a GB is 2^30 bytes.
DYNAMODB_ITEM_OVERHEAD = 100
GB = 1024**3


def s3_price_per_million(operation: str, prices: PriceTable = PRICES) -> float:
    """The price of one million S3 requests of `operation`. Unknown operations raise, so a
    new request type can never be priced silently at zero."""
    if operation in S3_PUT_TIER:
        return prices.s3_put_per_million
    if operation in S3_GET_TIER:
        return prices.s3_get_per_million
    if operation in S3_FREE_TIER:
        return prices.s3_delete_per_million
    raise KeyError(f"no S3 price for {operation!r}: add it to a tier in pricing.py")


# --- DynamoDB item size --------------------------------------------------------------------------


# DynamoDB's own size rules, in the item codec (one definition): re-exported for the bills.
item_size = vhs_item.item_size


def write_units(before: int, after: int, *, succeeded: bool, transactional: bool = False) -> int:
    """Write units of one write: the larger of the item before and after (the existing item
    when the condition failed), per started KB, at least 1."""
    size = max(before, after) if succeeded else before
    units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
    return units * 2 if transactional else units


def read_units(size: int, *, consistent: bool) -> float:
    """Read units of one GetItem on an item of `size` bytes (0: no item, still 1 unit)."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def storage_dollars(dynamodb_gb: float, s3_gb: float, prices: PriceTable = PRICES) -> float:
    """Dollars per month for holding `dynamodb_gb` in DynamoDB and `s3_gb` in S3."""
    return (
        dynamodb_gb * prices.dynamodb_storage_per_gb_month + s3_gb * prices.s3_storage_per_gb_month
    )


# --- Bills ---------------------------------------------------------------------------------------


@dataclass
class Bill:
    """What a block of work made AWS do, and what that costs."""

    requests: dict[str, int]  # operation name -> count (S3 and DynamoDB)
    write_units: float = 0.0
    read_units: float = 0.0
    operations: int = 1  # how many logical operations the bill covers

    def dollars(self, prices: PriceTable = PRICES) -> float:
        s3 = sum(
            count * s3_price_per_million(op, prices) / 1e6
            for op, count in self.requests.items()
            if op not in DYNAMODB_WRITES | DYNAMODB_READS
        )
        dynamodb = (
            self.write_units * prices.dynamodb_write_unit_per_million
            + self.read_units * prices.dynamodb_read_unit_per_million
        ) / 1e6
        return s3 + dynamodb

    def per_million(self, prices: PriceTable = PRICES) -> float:
        """Dollars per million of the logical operations this bill covers."""
        return self.dollars(prices) / self.operations * 1e6

    def per_operation(self, name: str) -> float:
        return self.requests.get(name, 0) / self.operations


def price_rows(prices: PriceTable = PRICES) -> list[tuple[str, str, str]]:
    """The price table as (item, price, rule) rows for the report."""
    return [
        (
            "S3 PUT, COPY, POST, LIST (incl. multipart parts)",
            f"${prices.s3_put_per_million:.2f} per million",
            "per request",
        ),
        ("S3 GET, HEAD", f"${prices.s3_get_per_million:.2f} per million", "per request"),
        (
            "S3 DELETE, DeleteObjects, AbortMultipartUpload",
            "free",
            "DeleteObjects (a POST) counted as a DELETE: favours pynamodb_mate, its only user",
        ),
        (
            "DynamoDB write unit",
            f"${prices.dynamodb_write_unit_per_million:.3f} per million",
            "1 per started KB of the larger of the item before and after, min 1; a failed "
            "condition is charged on the existing item; transactions x2",
        ),
        (
            "DynamoDB read unit",
            f"${prices.dynamodb_read_unit_per_million:.3f} per million",
            "1 per started 4 KB of the whole item (projections do not reduce it), min 1 even "
            "for no item; eventually consistent x0.5",
        ),
        (
            "DynamoDB storage",
            f"${prices.dynamodb_storage_per_gb_month:.3f} per GB-month",
            f"item size + {DYNAMODB_ITEM_OVERHEAD} bytes of overhead per item",
        ),
        (
            "S3 storage (Standard)",
            f"${prices.s3_storage_per_gb_month:.3f} per GB-month",
            "object bytes",
        ),
    ]
