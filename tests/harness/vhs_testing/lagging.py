"""Out-of-date reads, as DynamoDB may give them: a client whose eventually consistent reads
answer from a snapshot taken earlier.

DynamoDB's eventually consistent GetItem and BatchGetItem may return an item as it was before
recent writes; moto and dynalite always return the latest. `LaggingDynamoDB` wraps a real
client (every other call goes through unchanged): after `lag(table, ids)`, a GetItem or
BatchGetItem of those ids without `ConsistentRead` answers with the items as they were then,
until `catch_up()`. Strongly consistent reads and every write still go to the backend, as on
DynamoDB. This simulates AWS; the store's code runs unchanged on top of it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

KEY = "id"  # the table's partition key (shapes.TABLE)


class LaggingDynamoDB:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._snapshot: dict[tuple[str, str], dict[str, Any] | None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    @property
    def lagging(self) -> bool:
        return self._snapshot is not None

    def lag(self, table: str, ids: Iterable[str]) -> None:
        """From now on, eventually consistent reads of `ids` see them as they are now."""
        self._snapshot = {}
        for id in ids:
            item = self._client.get_item(
                TableName=table, Key={KEY: {"S": id}}, ConsistentRead=True
            ).get("Item")
            self._snapshot[(table, id)] = item

    def catch_up(self) -> None:
        self._snapshot = None

    def _stale(self, table: str, key: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        if self._snapshot is None:
            return False, None
        where = (table, key[KEY]["S"])
        if where not in self._snapshot:
            return False, None
        return True, copy.deepcopy(self._snapshot[where])

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        if not kwargs.get("ConsistentRead"):
            stale, item = self._stale(kwargs["TableName"], kwargs["Key"])
            if stale:
                return {"Item": _project(item, kwargs)} if item else {}
        return self._client.get_item(**kwargs)

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        responses: dict[str, list[dict[str, Any]]] = {}
        remaining: dict[str, Any] = {}
        for table, request in kwargs["RequestItems"].items():
            fresh = []
            for key in request["Keys"]:
                stale, item = (
                    self._stale(table, key) if not request.get("ConsistentRead") else (False, None)
                )
                if not stale:
                    fresh.append(key)
                elif item:
                    responses.setdefault(table, []).append(_project(item, request))
            if fresh:
                remaining[table] = {**request, "Keys": fresh}
        result: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": {}}
        if remaining:
            answered = self._client.batch_get_item(**{**kwargs, "RequestItems": remaining})
            for table, items in answered.get("Responses", {}).items():
                responses.setdefault(table, []).extend(items)
            result["UnprocessedKeys"] = answered.get("UnprocessedKeys", {})
        return result


def _project(item: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The top-level attributes a ProjectionExpression names (all without one)."""
    expression = request.get("ProjectionExpression")
    if not expression:
        return item
    names = request.get("ExpressionAttributeNames", {})
    wanted = set()
    for path in expression.split(","):
        path = path.strip()
        if "." in path or "[" in path:
            raise NotImplementedError(f"projection of a nested path {path!r}")
        wanted.add(names.get(path, path))
    return {name: value for name, value in item.items() if name in wanted}
