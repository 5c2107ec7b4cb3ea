"""Every system the benchmarks measure, each with a table and bucket of its own, as
docs/benchmarks.md describes them. `put` says what the system did ("stored", "unchanged",
"stale"...); `exists` tells a peer with separate create and update calls which to use. A
record is a JSON value, or bytes for an opaque body (stored as they are); `body` gives the
bytes a system stores for a record, which its `get` returns."""

from __future__ import annotations

import copy
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import pynamodb_mate.api as pm
from botocore import xform_name
from botocore.exceptions import ClientError
from pynamodb_mate.patterns.large_attribute.api import LargeAttributeMixin, split_s3_uri

from vhs import StoreConfig, VersionedHybridStore, shapes
from vhs.index.layouts import Layout
from vhs.maintenance.gc import GarbageCollector
from vhs_ops import provisioning
from vhs_ops.admin.dictionaries import TrainReport, train_dictionary
from vhs_ops.local.stack import DEFAULT_REGION, LOCAL_CREDENTIALS

from .pricing import Biller
from .workload import Samples, canonical

GC_AHEAD = 24 * 3600  # past the collector's lease and marker expiry (minutes)


# An operation the benchmarks measure, as each system is asked to do it: `prepare` sets the
# system up (a version written first, say) and returns the action measured.
Action = Callable[[], Any]
Prepare = Callable[["System", str, Samples], Action]


@dataclass(frozen=True)
class Operation:
    name: str
    prepare: Prepare
    repeats: int = 1  # actions billed together, reported per action
    timed: bool = True  # in the wall-time table too
    floor: dict[str, int] | None = None  # the request floor, where one is set
    floor_note: str = ""  # why the floor differs from the raw floor's requests, if it does


class System(Protocol):
    name: str
    biller: Biller
    ordered: bool  # whether an older `updated_at` loses to a newer one (a stale put is refused)

    def body(self, record: Any) -> bytes: ...

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str: ...

    def get(self, id: str) -> bytes: ...

    def delete(self, id: str, deleted_at: datetime) -> None: ...


def stored_form(record: Any) -> bytes:
    """The bytes VHS and its peers store for `record`: bytes as they are, JSON canonical."""
    return bytes(record) if isinstance(record, bytes | bytearray) else canonical(record)


def plain_table(name: str) -> dict[str, Any]:
    """CreateTable's parameters for a table keyed by `id`, on demand, with no stream."""
    key = {"KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
           "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}]}  # fmt: skip
    return {"TableName": name, "BillingMode": "PAY_PER_REQUEST", **key}


def put_if(dynamodb: Any, table: str, item: dict[str, Any], condition: str, values: dict) -> bool:
    """PutItem `item` if `condition` holds (one request either way): False if refused."""
    try:
        dynamodb.put_item(TableName=table, Item=item, ConditionExpression=condition,
                          ExpressionAttributeValues=values)  # fmt: skip
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return False
    return True


def new_store(s3: Any, dynamodb: Any, name: str, **options: Any) -> VersionedHybridStore:
    """A table and a bucket called `name`, made as the stack makes them, and a store on them."""
    provisioning.create_store_resources(dynamodb, s3, table_name=name, bucket_name=name,
                                     region=DEFAULT_REGION)  # fmt: skip
    return VersionedHybridStore(
        name, name, StoreConfig(**options), s3_client=s3, dynamodb_client=dynamodb
    )


class OwnTableAndBucket:
    """A system of bare boto3 calls: a table of VHS's shape (keyed by `id`, with a stream, as
    every table in the run has) and a bucket named as it, and a biller over its two clients."""

    ordered = True
    body = staticmethod(stored_form)

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str) -> None:
        self.s3, self.dynamodb, self.table, self.bucket = s3, dynamodb, table, table
        dynamodb.create_table(**shapes.TABLE.create_table_kwargs(table))
        s3.create_bucket(Bucket=table)
        self.biller = Biller(probe, [s3], [dynamodb])

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.dynamodb.delete_item(TableName=self.table, Key={"id": {"S": id}})


class VhsSystem:
    """The store under test with its defaults (delta history unless `delta_history` is False),
    its items laid out in `layout` (the text layout: the layout before, for comparison), and
    any other VersionedHybridStore options in `store_options`."""

    ordered = True
    body = staticmethod(stored_form)

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, table: str, name: str = "VHS",
                 delta_history: bool = True, layout: Layout = Layout.COMPACT,
                 **store_options: Any) -> None:  # fmt: skip
        self.name, self.table, self.bucket = name, table, table
        self.options = {"prefix": "bench", "delta_history": delta_history, **store_options}
        self.store = new_store(s3, dynamodb, table, **self.options)
        self.store.index.layout = layout
        self.biller = Biller(probe, [s3], [dynamodb])

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool,
            parts: dict[str, bytes] | None = None) -> str:  # fmt: skip
        return str(self.store.put(id, record, updated_at=updated_at, parts=parts).outcome)

    def get(self, id: str) -> bytes:
        record = self.store.get(id)
        return b"".join([record.body, *(record.part(name) for name in record.parts)])

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.store.delete(id, deleted_at=deleted_at)

    def train_dictionary(self, s3: Any, dynamodb: Any) -> TrainReport:
        """`vhs dictionary train` on this system's table, on un-metered clients (a one-off scan
        an operator runs, not a put's cost); the store writes with what it publishes from its
        next put (which reads the pointer, billed, as a writer does every REFRESH_SECONDS)."""
        trainer = VersionedHybridStore(self.table, self.bucket, StoreConfig(**self.options),
                                       s3_client=s3, dynamodb_client=dynamodb)  # fmt: skip
        trained = train_dictionary(trainer)
        self.store.dictionaries.refresh()
        return trained

    def collect_garbage(self, s3: Any, dynamodb: Any) -> None:
        """VHS's garbage collector, twice, as its schedule would run it, on un-metered clients."""
        store = VersionedHybridStore(self.table, self.bucket, StoreConfig(**self.options),
                                     s3_client=s3, dynamodb_client=dynamodb)  # fmt: skip
        # Only the shards that hold objects (keys are `prefix/shard/...`).
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        shards = {e["Key"].split("/")[1] for page in listed for e in page.get("Contents", [])}
        for ahead in (GC_AHEAD, 2 * GC_AHEAD):
            clock = lambda ahead=ahead: time.time() + ahead  # noqa: E731
            report = GarbageCollector(store, grace=timedelta(0), clock=clock).run(sorted(shards))
            if not report.ok:
                raise RuntimeError(f"{self.name}: the garbage collector failed: {report}")


def pynamodb_model(table: str, endpoint: str, large: tuple[str, ...], **plain: Any) -> Any:
    """A pynamodb Model with LargeAttributeMixin on the local `endpoint`: a hash key, an
    `update_at` time, `large` attributes (their S3 URIs) and `plain` ones."""
    meta = type("Meta", (), {
        "table_name": table, "region": DEFAULT_REGION, "host": endpoint,
        "billing_mode": pm.constants.PAY_PER_REQUEST_BILLING_MODE,
        # Not in the docs' example: every table in the run has a stream, as VHS's does.
        "stream_view_type": "NEW_AND_OLD_IMAGES",
        "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    })  # fmt: skip
    attributes = {name: pm.UnicodeAttribute(null=True) for name in large} | plain
    return type(pm.Model)("Document", (pm.Model, LargeAttributeMixin), {
        "Meta": meta, "pk": pm.UnicodeAttribute(hash_key=True),
        "update_at": pm.UTCDateTimeAttribute(), **attributes,
    })  # fmt: skip


class PynamodbMateStore:
    """`large`: its large attributes (with parts other than the body, the JSON is `record`)."""

    name = "pynamodb_mate"
    ordered = False  # no ordering: a stale put is applied like any update
    body = staticmethod(stored_form)

    def __init__(self, s3: Any, endpoint: str, probe: Any, *, table: str,
                 large: tuple[str, ...] = ("body",)) -> None:  # fmt: skip
        self.s3, self.table, self.bucket, self.large = s3, table, table, large
        plain = {} if large == ("body",) else {"record": pm.UnicodeAttribute()}
        self.model = pynamodb_model(table, endpoint, large, **plain)
        self.model.create_table(wait=True)
        s3.create_bucket(Bucket=table)
        # pynamodb makes its own botocore client: meter that one.
        self.biller = Biller(probe, [s3], [self.model._get_connection().connection.client])

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool,
            parts: dict[str, bytes] | None = None) -> str:  # fmt: skip
        attributes = {"record": canonical(record).decode()} if parts else {}
        common = {"s3_client": self.s3, "pk": id, "sk": None, "bucket": self.bucket,
                  "kvs": parts or {"body": self.body(record)}, "prefix": "bench/",
                  "update_at": updated_at}  # fmt: skip
        if not exists:
            self.model.create_large_attribute_item(
                **common, attributes={"update_at": updated_at, **attributes},
                clean_up_when_failed=True,
            )  # fmt: skip
        else:
            actions = [getattr(self.model, k).set(v) for k, v in attributes.items()]
            self.model.update_large_attribute_item(
                **common, update_actions=[self.model.update_at.set(updated_at), *actions],
                clean_up_when_succeeded=True, clean_up_when_failed=True,
            )  # fmt: skip
        return "stored"

    def get(self, id: str) -> bytes:
        document = self.model.get(id)
        bodies = [split_s3_uri(getattr(document, name)) for name in self.large]
        return b"".join(self.s3.get_object(Bucket=b, Key=k)["Body"].read() for b, k in bodies)

    def delete(self, id: str, deleted_at: datetime) -> None:
        self.model.delete_large_attribute_item(
            s3_client=self.s3, pk=id, sk=None, attributes=["body"], clean_up_when_succeeded=True
        )


class Wellcome2018Store(OwnTableAndBucket):
    """CRC-32 stands in for the original's MurmurHash3; the version is `updated_at` in µs."""

    name = "Wellcome 2018"

    def _row(self, id: str) -> dict[str, Any] | None:
        return self.dynamodb.get_item(TableName=self.table, Key={"id": {"S": id}}).get("Item")

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        body, row = self.body(record), self._row(id)
        if row is not None and self._body(row) == body:
            return "unchanged"
        key = f"{id[-2:][::-1]}/{id}/{zlib.crc32(body):08x}"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        version = {"N": str(int(updated_at.timestamp() * 1_000_000))}
        item = {"id": {"S": id}, "version": version, "s3key": {"S": key}}
        condition = "attribute_not_exists(id) OR version < :v"
        if not put_if(self.dynamodb, self.table, item, condition, {":v": version}):
            return "stale (orphan body left in S3)"
        return "stored"

    def _body(self, row: dict[str, Any]) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=row["s3key"]["S"])["Body"].read()

    def get(self, id: str) -> bytes:
        return self._body(self._row(id) or {})


class RawFloor(OwnTableAndBucket):
    name = "raw floor"
    INLINE_LIMIT = 350 * 1024  # below DynamoDB's 400 KB item limit with room to spare

    @staticmethod
    def body(record: Any) -> bytes:
        """Bytes as they are; JSON as it comes, unsorted: the floor does no work it need not."""
        if isinstance(record, bytes | bytearray):
            return bytes(record)
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()

    def put(self, id: str, record: Any, updated_at: datetime, *, exists: bool) -> str:
        body = self.body(record)
        stamp = updated_at.isoformat()
        item: dict[str, Any] = {"id": {"S": id}, "t": {"S": stamp}}
        if len(body) <= self.INLINE_LIMIT:
            item["b"] = {"B": body}
        else:  # one key per version: a refused put never overwrites the current body
            self.s3.put_object(Bucket=self.bucket, Key=f"{id}/{stamp}", Body=body)
            item["k"] = {"S": f"{id}/{stamp}"}
        condition = "attribute_not_exists(id) OR t < :t"
        stored = put_if(self.dynamodb, self.table, item, condition, {":t": {"S": stamp}})
        return "stored" if stored else "refused"

    def get(self, id: str) -> bytes:
        key = {"id": {"S": id}}
        item = self.dynamodb.get_item(TableName=self.table, Key=key, ConsistentRead=True)["Item"]
        if "b" in item:
            return bytes(item["b"]["B"])
        return self.s3.get_object(Bucket=self.bucket, Key=item["k"]["S"])["Body"].read()


class RawVhsRequests:
    """Replays, timed, the requests a VHS store of its own sent for the operation, untimed."""

    name = "raw, VHS's requests"

    def __init__(self, s3: Any, dynamodb: Any, probe: Any, *, scratch: tuple[Any, Any],
                 table: str) -> None:  # fmt: skip
        self.clients = {"s3": s3, "dynamodb": dynamodb}
        new_store(s3, dynamodb, table)  # the replay's table and bucket
        self.table = self.bucket = table
        self.source = VhsSystem(*scratch, probe, table=f"{table}-src")
        self.recorded: list[tuple[str, str, dict[str, Any]]] | None = None
        for client in scratch:
            client.meta.events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self.recorded is not None:
            service = model.service_model.service_name
            self.recorded.append((service, model.name, copy.deepcopy(params)))

    def prepare_operation(self, operation: Operation, id: str, samples: Samples) -> Any:
        self.recorded = []
        action = operation.prepare(self.source, id, samples)
        self._replay(self.recorded)
        self.recorded = []
        action()
        requests, self.recorded = self.recorded, None
        return lambda: self._replay(requests)

    def _replay(self, requests: list[tuple[str, str, dict[str, Any]]]) -> None:
        for service, operation, params in requests:
            params = dict(params)
            params |= {"TableName": self.table} if "TableName" in params else {}
            params |= {"Bucket": self.bucket} if "Bucket" in params else {}
            try:
                response = getattr(self.clients[service], xform_name(operation))(**params)
            except ClientError as error:  # a refused write is part of a duplicate or stale put
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue
            if "Body" in response:
                response["Body"].read()
