"""Bills for blocks of work: requests by operation (vhs.local.metering.RequestMeter), and
DynamoDB capacity from the size of each item before and after each request (`CapacityMeter`):
moto reports no ConsumedCapacity. A size comes from the request or response when it says (a
PutItem's item, an UpdateItem's ALL_NEW), from the last size seen for the key, or from a read
with a separate, un-metered client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from vhs.local.metering import RequestMeter

from . import pricing

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
        return pricing.item_size(item.get("Item"))

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        operation, table = model.name, params.get("TableName", "")
        if operation in _CONTROL_PLANE:
            return
        if operation not in pricing.DYNAMODB_WRITES | pricing.DYNAMODB_READS:
            raise NotImplementedError(f"no capacity rule for DynamoDB {operation}")
        if table not in self._schemas:
            schema = self.probe.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        source = params["Item"] if operation == "PutItem" else params["Key"]
        key = (table, repr(sorted((n, str(source[n])) for n in self._schemas[table])))
        pending = _Pending(operation, params, table, key, 0)
        if not self.active:
            if operation in pricing.DYNAMODB_WRITES:  # unbilled write: forget the size
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
        if pending.operation in pricing.DYNAMODB_READS:
            consistent = bool(pending.params.get("ConsistentRead"))
            reads, writes = pricing.read_units(pending.before, consistent=consistent), 0
            size = pending.before
        else:
            succeeded = http_response.status_code < 300
            size = self._after_size(pending, parsed) if succeeded else pending.before
            reads, writes = 0.0, pricing.write_units(pending.before, size, succeeded=succeeded)
        self._sizes[pending.key] = size
        with self._lock:
            self.read_units += reads
            self.write_units += writes

    def _after_size(self, pending: _Pending, parsed: dict[str, Any]) -> int:
        if pending.operation == "DeleteItem":
            return 0
        if pending.operation == "PutItem":
            return pricing.item_size(pending.params["Item"])
        if pending.params.get("ReturnValues") == "ALL_NEW" and "Attributes" in parsed:
            return pricing.item_size(parsed["Attributes"])
        return self._size(pending, cached=False)


class Biller:
    """Requests and capacity of every client of one system, billed together."""

    def __init__(self, probe: Any, s3_clients: list[Any], dynamodb_clients: list[Any]) -> None:
        self.requests = RequestMeter(*s3_clients, *dynamodb_clients)
        self.capacity = CapacityMeter(probe)
        for client in dynamodb_clients:
            self.capacity.attach(client)

    @contextmanager
    def bill(self, operations: int = 1) -> Iterator[pricing.Bill]:
        """Bill the block. The yielded Bill is filled in when the block ends."""
        bill = pricing.Bill(requests={}, operations=operations)
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
