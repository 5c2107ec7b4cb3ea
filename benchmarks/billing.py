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
_CacheKey = tuple[str, tuple[tuple[str, str, str], ...]]


@dataclass
class _Pending:
    operation: str
    params: dict[str, Any]
    table: str
    key: dict[str, Any]
    before: int


def _cache_key(table: str, key: dict[str, Any]) -> _CacheKey:
    return table, tuple(
        sorted((n, t, str(v)) for n, value in key.items() for t, v in value.items())
    )


@dataclass
class CapacityMeter:
    """Charges DynamoDB capacity for the requests made through the clients it is attached to."""

    probe: Any  # an un-metered DynamoDB client on the same endpoint
    write_units: float = 0.0
    read_units: float = 0.0
    active: bool = False
    _schemas: dict[str, list[str]] = field(default_factory=dict)
    _sizes: dict[_CacheKey, int] = field(default_factory=dict)
    _pending: dict[int, _Pending] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        self.write_units = 0.0
        self.read_units = 0.0

    def _key(self, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        table = params["TableName"]
        if table not in self._schemas:
            schema = self.probe.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        source = params["Item"] if operation == "PutItem" else params["Key"]
        return table, {name: source[name] for name in self._schemas[table]}

    def _size(self, table: str, key: dict[str, Any]) -> int:
        cached = self._sizes.get(_cache_key(table, key))
        if cached is not None:
            return cached
        item = self.probe.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return pricing.item_size(item)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        operation = model.name
        if operation in _CONTROL_PLANE:
            return
        if operation not in pricing.DYNAMODB_WRITES | pricing.DYNAMODB_READS:
            raise NotImplementedError(f"no capacity rule for DynamoDB {operation}")
        table, key = self._key(operation, params)
        if not self.active:
            if operation in pricing.DYNAMODB_WRITES:  # unbilled write: forget the size
                self._sizes.pop(_cache_key(table, key), None)
            return
        pending = _Pending(operation, params, table, key, self._size(table, key))
        with self._lock:
            self._pending[threading.get_ident()] = pending

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            pending = self._pending.pop(threading.get_ident(), None)
        if pending is None or not self.active:
            return
        if pending.operation in pricing.DYNAMODB_READS:
            units = pricing.read_units(
                pending.before, consistent=bool(pending.params.get("ConsistentRead"))
            )
            self._remember(pending, pending.before)
            with self._lock:
                self.read_units += units
            return
        succeeded = http_response.status_code < 300
        after = self._after_size(pending, parsed) if succeeded else pending.before
        units = pricing.write_units(pending.before, after, succeeded=succeeded)
        self._remember(pending, after)
        with self._lock:
            self.write_units += units

    def _after_size(self, pending: _Pending, parsed: dict[str, Any]) -> int:
        if pending.operation == "DeleteItem":
            return 0
        if pending.operation == "PutItem":
            return pricing.item_size(pending.params["Item"])
        if pending.params.get("ReturnValues") == "ALL_NEW" and "Attributes" in parsed:
            return pricing.item_size(parsed["Attributes"])
        self._sizes.pop(_cache_key(pending.table, pending.key), None)
        return self._size(pending.table, pending.key)

    def _remember(self, pending: _Pending, size: int) -> None:
        self._sizes[_cache_key(pending.table, pending.key)] = size


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
        self.capacity.reset()
        self.capacity.active = True
        try:
            with self.requests.measure() as counts:
                yield bill
        finally:
            self.capacity.active = False
        bill.requests = dict(counts)
        bill.write_units = self.capacity.write_units
        bill.read_units = self.capacity.read_units
