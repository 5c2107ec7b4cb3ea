"""AWS's prices and DynamoDB's capacity rules (docs/benchmarks.md, "Method" and "Price table"),
and bills for blocks of work (`Biller`): moto reports no ConsumedCapacity."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from vhs.index import size as vhs_item_size
from vhs_ops.local.metering import RequestMeter


@dataclass(frozen=True)
class PriceTable:
    """US dollars: per million requests, per GB-month, per GB-second. Sources: the project's
    cost notes; Lambda, SQS and Step Functions from aws.amazon.com/<service>/pricing."""

    s3_put_per_million: float = 5.00  # PUT, COPY, POST, LIST
    s3_get_per_million: float = 0.40  # GET, HEAD and all other reads
    s3_delete_per_million: float = 0.00  # DELETE (and multi-object delete) are free
    dynamodb_write_unit_per_million: float = 0.625
    dynamodb_read_unit_per_million: float = 0.125  # strongly consistent, per 4 KB
    dynamodb_storage_per_gb_month: float = 0.25  # Standard table class; item bytes + 100
    s3_storage_per_gb_month: float = 0.023  # S3 Standard, first 50 TB
    lambda_request_per_million: float = 0.20
    lambda_arm_gb_second: float = 0.0000133334  # first 7.5 billion GB-s a month
    # Reindex: as recalled from AWS's US East pricing pages: check them before quoting a bill.
    step_functions_transition_per_thousand: float = 0.025  # Standard workflows
    sns_fifo_publish_per_million: float = 0.30  # a batch entry bills as a publish (64 KB each)
    sns_fifo_payload_per_gb: float = 0.017
    sns_fifo_delivery_per_million: float = 0.01  # to an SQS FIFO subscription
    sns_fifo_delivery_payload_per_gb: float = 0.001
    sqs_requests_per_million: float = 0.40  # standard queues, each 64 KB of a payload one


PRICES = PriceTable()
# S3 operations by pricing tier. DeleteObjects (a POST) counts as a DELETE, free: only
# pynamodb_mate uses it, so this reading can only make that peer look cheaper.
S3_TIERS = {
    "s3_put_per_million": {"PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart",
                           "UploadPartCopy", "CompleteMultipartUpload", "ListObjects",
                           "ListObjectsV2", "ListObjectVersions", "ListMultipartUploads",
                           "ListParts"},
    "s3_get_per_million": {"GetObject", "HeadObject", "GetObjectAttributes"},
    "s3_delete_per_million": {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"},
}  # fmt: skip
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
DYNAMODB_READS = frozenset({"GetItem"})
DYNAMODB_OPERATIONS = DYNAMODB_WRITES | DYNAMODB_READS
DYNAMODB_ITEM_OVERHEAD = 100  # bytes AWS adds to every item's size for storage
GB = 1024**3
item_size = vhs_item_size.item_size  # DynamoDB's size rules (one definition)


def s3_price_per_million(operation: str) -> float:
    """Unknown operations raise: a new request type is never priced silently at zero."""
    for tier, operations in S3_TIERS.items():
        if operation in operations:
            return getattr(PRICES, tier)
    raise KeyError(f"no S3 price for {operation!r}: add it to a tier in pricing.py")


def write_units(before: int, after: int, *, succeeded: bool) -> int:
    """Per started KB of the larger of the item before and after (failed: before), at least 1."""
    return max(1, math.ceil((max(before, after) if succeeded else before) / 1024))


def read_units(size: int, *, consistent: bool) -> float:
    """One GetItem on an item of `size` bytes (0: no item, still 1 unit); half if eventual."""
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


@dataclass
class Bill:
    """What a block of work made AWS do, and what that costs."""

    requests: dict[str, int]  # operation name -> count (S3 and DynamoDB)
    write_units: float = 0.0
    read_units: float = 0.0
    operations: int = 1  # how many logical operations the bill covers

    def dollars(self) -> float:
        s3 = sum(
            count * s3_price_per_million(op) / 1e6
            for op, count in self.requests.items()
            if op not in DYNAMODB_OPERATIONS
        )
        dynamodb = self.write_units * PRICES.dynamodb_write_unit_per_million
        dynamodb += self.read_units * PRICES.dynamodb_read_unit_per_million
        return s3 + dynamodb / 1e6

    def per_million(self) -> float:
        return self.dollars() / self.operations * 1e6

    def per_operation(self, name: str) -> float:
        return self.requests.get(name, 0) / self.operations


PRICE_ROWS = [
    ("S3 PUT, COPY, POST, LIST (incl. multipart parts)",
     f"${PRICES.s3_put_per_million:.2f} per million", "per request"),
    ("S3 GET, HEAD", f"${PRICES.s3_get_per_million:.2f} per million", "per request"),
    ("S3 DELETE, DeleteObjects, AbortMultipartUpload", "free",
     "DeleteObjects (a POST) counted as a DELETE: favours pynamodb_mate, its only user"),
    ("DynamoDB write unit", f"${PRICES.dynamodb_write_unit_per_million:.3f} per million",
     "1 per started KB of the larger of the item before and after, min 1; a failed "
     "condition is charged on the existing item; transactions x2"),
    ("DynamoDB read unit", f"${PRICES.dynamodb_read_unit_per_million:.3f} per million",
     "1 per started 4 KB of the whole item (projections do not reduce it), min 1 even for "
     "no item; eventually consistent x0.5"),
    ("DynamoDB storage", f"${PRICES.dynamodb_storage_per_gb_month:.3f} per GB-month",
     f"item size + {DYNAMODB_ITEM_OVERHEAD} bytes of overhead per item"),
    ("S3 storage (Standard)", f"${PRICES.s3_storage_per_gb_month:.3f} per GB-month",
     "object bytes"),
]  # fmt: skip


_CONTROL_PLANE = frozenset({"DescribeTable", "CreateTable", "ListTables", "DeleteTable"})


@dataclass
class _Pending:
    operation: str
    params: dict[str, Any]
    table: str
    key: tuple[str, str]  # the table, and the item's key as text
    before: int


@dataclass
class CapacityMeter:
    """Charges DynamoDB capacity for the requests made through the clients it is attached to."""

    probe: Any  # an un-metered DynamoDB client on the same endpoint
    write_units: float = 0.0
    read_units: float = 0.0
    active: bool = False
    _schemas: dict[str, list[str]] = field(default_factory=dict)
    _sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    _pending: dict[int, _Pending] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _size(self, pending: _Pending, *, cached: bool = True) -> int:
        if cached and pending.key in self._sizes:
            return self._sizes[pending.key]
        key = {name: pending.params["Item" if pending.operation == "PutItem" else "Key"][name]
               for name in self._schemas[pending.table]}  # fmt: skip
        item = self.probe.get_item(TableName=pending.table, Key=key, ConsistentRead=True)
        return item_size(item.get("Item"))

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        operation, table = model.name, params.get("TableName", "")
        if operation in _CONTROL_PLANE:
            return
        if operation not in DYNAMODB_OPERATIONS:
            raise NotImplementedError(f"no capacity rule for DynamoDB {operation}")
        if table not in self._schemas:
            schema = self.probe.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        source = params["Item"] if operation == "PutItem" else params["Key"]
        key = (table, repr(sorted((n, str(source[n])) for n in self._schemas[table])))
        pending = _Pending(operation, params, table, key, 0)
        if not self.active:
            if operation in DYNAMODB_WRITES:  # unbilled write: forget the size
                self._sizes.pop(key, None)
            return
        pending.before = self._size(pending)
        with self._lock:
            self._pending[threading.get_ident()] = pending

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            pending = self._pending.pop(threading.get_ident(), None)
        if pending is None or not self.active:
            return
        if pending.operation in DYNAMODB_READS:
            consistent = bool(pending.params.get("ConsistentRead"))
            reads, writes = read_units(pending.before, consistent=consistent), 0
            size = pending.before
        else:
            succeeded = http_response.status_code < 300
            size = self._after_size(pending, parsed) if succeeded else pending.before
            reads, writes = 0.0, write_units(pending.before, size, succeeded=succeeded)
        self._sizes[pending.key] = size
        with self._lock:
            self.read_units += reads
            self.write_units += writes

    def _after_size(self, pending: _Pending, parsed: dict[str, Any]) -> int:
        if pending.operation == "DeleteItem":
            return 0
        if pending.operation == "PutItem":
            return item_size(pending.params["Item"])
        if pending.params.get("ReturnValues") == "ALL_NEW" and "Attributes" in parsed:
            return item_size(parsed["Attributes"])
        return self._size(pending, cached=False)


class Biller:
    """Requests and capacity of every client of one system, billed together."""

    def __init__(self, probe: Any, s3_clients: list[Any], dynamodb_clients: list[Any]) -> None:
        self.requests = RequestMeter(*s3_clients, *dynamodb_clients)
        self.capacity = CapacityMeter(probe)
        for client in dynamodb_clients:
            self.capacity.attach(client)

    @contextmanager
    def bill(self, operations: int = 1) -> Iterator[Bill]:
        """Bill the block. The yielded Bill is filled in when the block ends."""
        bill = Bill(requests={}, operations=operations)
        self.capacity.write_units = self.capacity.read_units = 0.0
        self.capacity.active = True
        try:
            with self.requests.measure() as counts:
                yield bill
        finally:
            self.capacity.active = False
        bill.requests = dict(counts)
        bill.write_units = self.capacity.write_units
        bill.read_units = self.capacity.read_units
