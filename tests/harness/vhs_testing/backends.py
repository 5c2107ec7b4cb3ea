"""The AWS backends every contract test runs against.

* ``inprocess``: moto's in-process mock (`mock_aws`);
* ``server``: moto's server over HTTP on 127.0.0.1, one child process per test session;
* ``dynalite``: DynamoDB from dynalite (npm; vhs_testing/dynalite.py), an implementation that is
  atomic without our help, and S3 from the session's moto server;
* ``live``: real AWS, only with VHS_TEST_LIVE=1 and VHS_TABLE_NAME / VHS_BUCKET_NAME naming an
  existing table and bucket. Never in CI.

Each test gets fresh, uniquely named resources (or, live, a unique S3 prefix and id
namespace), so tests never see each other's data.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

from vhs import StoreConfig, VersionedHybridStore
from vhs_ops import provisioning
from vhs_ops.local.moto_dynamodb import direct_responses
from vhs_ops.local.stack import DEFAULT_REGION, LOCAL_CREDENTIALS, client
from vhs_testing.dictionaries import ZLIB_CODEC, ZSTD_CODEC, publish_to
from vhs_testing.layouts import COMPACT, MIXED, alternate_layouts

BACKENDS = ["inprocess", "server", "dynalite", "live"]


def live_enabled() -> bool:
    return os.environ.get("VHS_TEST_LIVE") == "1"


@dataclass
class Backend:
    name: str
    s3: Any
    dynamodb: Any
    endpoint: str | None  # every service's, DynamoDB's too unless dynamodb_endpoint is set
    table_name: str
    bucket_name: str
    namespace: str = ""  # prepended to ids so live runs never collide
    region: str = DEFAULT_REGION
    dynamodb_endpoint: str | None = None
    stores: list[VersionedHybridStore] = field(default_factory=list)
    layouts: str = COMPACT  # MIXED: stores whose writes alternate layouts (vhs_testing.layouts)
    # ZSTD_CODEC: stores that write with a dictionary, published (vhs_testing.dictionaries)
    codec: str = ZLIB_CODEC

    def id(self, name: str) -> str:
        return f"{self.namespace}{name}"

    def store(self, **options: Any) -> VersionedHybridStore:
        options.setdefault("prefix", f"t{uuid.uuid4().hex[:8]}" if self.name == "live" else "")
        if self.codec == ZSTD_CODEC:
            options.setdefault("dictionaries", True)
        s3_client = options.pop("s3_client", self.s3)
        dynamodb_client = options.pop("dynamodb_client", self.dynamodb)
        store = VersionedHybridStore(
            self.table_name,
            self.bucket_name,
            StoreConfig(**options),
            s3_client=s3_client,
            dynamodb_client=dynamodb_client,
        )
        if self.layouts == MIXED:
            alternate_layouts(store)
        if self.codec == ZSTD_CODEC:
            publish_to(store)
        self.stores.append(store)
        return store

    def new_client(self, service: str) -> Any:
        """Another client for the same backend (its own connection pool and event hooks)."""
        if self.name == "inprocess":
            return boto3.client(service, region_name=self.region)
        return client(service, self._endpoint_of(service), self.region)

    def _endpoint_of(self, service: str) -> str | None:
        if service == "dynamodb" and self.dynamodb_endpoint:
            return self.dynamodb_endpoint
        return self.endpoint

    def address(self) -> BackendAddress:
        """What another process needs to reach the same resources with clients of its own."""
        if self.name == "inprocess":
            raise ValueError("in-process moto lives in one process: use a server backend")
        return BackendAddress(
            self.name,
            self.endpoint,
            self.dynamodb_endpoint,
            self.table_name,
            self.bucket_name,
            self.namespace,
            self.region,
        )


@dataclass(frozen=True)
class BackendAddress:
    """A Backend without its clients: it pickles, so a spawned process can connect()."""

    name: str
    endpoint: str | None
    dynamodb_endpoint: str | None
    table_name: str
    bucket_name: str
    namespace: str
    region: str

    def connect(self) -> Backend:
        backend = Backend(
            self.name,
            None,
            None,
            self.endpoint,
            self.table_name,
            self.bucket_name,
            self.namespace,
            self.region,
            self.dynamodb_endpoint,
        )
        backend.s3, backend.dynamodb = backend.new_client("s3"), backend.new_client("dynamodb")
        return backend


def _fresh_names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:12]
    return f"vhs-test-{suffix}", f"vhs-test-{suffix}"


@contextlib.contextmanager
def open_backend(
    name: str, server_endpoint: str | None, dynamodb_endpoint: str | None = None
) -> Iterator[Backend]:
    """Fresh resources on backend `name`: `server_endpoint` is moto's server (for "server" and
    "dynalite"), `dynamodb_endpoint` dynalite's (for "dynalite")."""
    if name == "inprocess":
        import moto

        with moto.mock_aws(), atomic_inprocess_dynamodb(), direct_responses():
            s3 = boto3.client("s3", region_name=DEFAULT_REGION)
            dynamodb = boto3.client("dynamodb", region_name=DEFAULT_REGION)
            table, bucket = _fresh_names()
            provisioning.create_store_resources(
                dynamodb, s3, table_name=table, bucket_name=bucket, region=DEFAULT_REGION
            )
            yield Backend(name, s3, dynamodb, None, table, bucket)
    elif name in ("server", "dynalite"):
        if not server_endpoint or (name == "dynalite") != bool(dynamodb_endpoint):
            raise ValueError(f"backend {name!r} needs moto's endpoint, and dynalite's for dynalite")
        s3 = client("s3", server_endpoint)
        dynamodb = client("dynamodb", dynamodb_endpoint or server_endpoint)
        table, bucket = _fresh_names()
        provisioning.create_store_resources(
            dynamodb, s3, table_name=table, bucket_name=bucket, region=DEFAULT_REGION
        )
        yield Backend(
            name, s3, dynamodb, server_endpoint, table, bucket, dynamodb_endpoint=dynamodb_endpoint
        )
    else:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "")
        yield Backend(
            name,
            boto3.client("s3", region_name=region or None),
            boto3.client("dynamodb", region_name=region or None),
            os.environ.get("AWS_ENDPOINT_URL"),
            os.environ["VHS_TABLE_NAME"],
            os.environ["VHS_BUCKET_NAME"],
            namespace=f"vhs-test-{uuid.uuid4().hex[:8]}-",
            region=region,
        )


def fake_credentials() -> dict[str, str]:
    return {**LOCAL_CREDENTIALS, "AWS_DEFAULT_REGION": DEFAULT_REGION}


@contextlib.contextmanager
def atomic_inprocess_dynamodb() -> Iterator[None]:
    """Make in-process moto apply one DynamoDB request at a time, as DynamoDB does.

    moto checks a condition and then writes, with no lock, so concurrent threads can both pass
    a condition only one should (see vhs_ops/local/motoserver.py, which does the same for the
    server).
    Tests that write concurrently in-process need the real semantics.
    """
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.Lock()
    original = DynamoHandler._dispatch

    def atomic(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    DynamoHandler._dispatch = atomic  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoHandler._dispatch = original  # type: ignore[method-assign]
