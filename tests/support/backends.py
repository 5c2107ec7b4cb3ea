"""The AWS backends every contract test runs against.

* ``inprocess``: moto's in-process mock (`mock_aws`);
* ``server``: moto's server over HTTP on 127.0.0.1, one child process per test session;
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

from vhs import VersionedHybridStore, resources
from vhs.local import DEFAULT_REGION, LOCAL_CREDENTIALS, client

BACKENDS = ["inprocess", "server", "live"]


def live_enabled() -> bool:
    return os.environ.get("VHS_TEST_LIVE") == "1"


@dataclass
class Backend:
    name: str
    s3: Any
    dynamodb: Any
    endpoint: str | None
    table_name: str
    bucket_name: str
    namespace: str = ""  # prepended to ids so live runs never collide
    region: str = DEFAULT_REGION
    stores: list[VersionedHybridStore] = field(default_factory=list)

    def id(self, name: str) -> str:
        return f"{self.namespace}{name}"

    def store(self, **options: Any) -> VersionedHybridStore:
        options.setdefault("prefix", f"t{uuid.uuid4().hex[:8]}" if self.name == "live" else "")
        store = VersionedHybridStore(
            self.table_name,
            self.bucket_name,
            s3_client=options.pop("s3_client", self.s3),
            dynamodb_client=options.pop("dynamodb_client", self.dynamodb),
            **options,
        )
        self.stores.append(store)
        return store

    def new_client(self, service: str) -> Any:
        """Another client for the same backend (its own connection pool and event hooks)."""
        if self.name == "inprocess":
            return boto3.client(service, region_name=self.region)
        return client(service, self.endpoint, self.region)


def _fresh_names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:12]
    return f"vhs-test-{suffix}", f"vhs-test-{suffix}"


@contextlib.contextmanager
def open_backend(name: str, server_endpoint: str | None) -> Iterator[Backend]:
    if name == "inprocess":
        import moto

        with moto.mock_aws(), atomic_inprocess_dynamodb():
            s3 = boto3.client("s3", region_name=DEFAULT_REGION)
            dynamodb = boto3.client("dynamodb", region_name=DEFAULT_REGION)
            table, bucket = _fresh_names()
            resources.create_store_resources(
                dynamodb, s3, table_name=table, bucket_name=bucket, region=DEFAULT_REGION
            )
            yield Backend(name, s3, dynamodb, None, table, bucket)
    elif name == "server":
        assert server_endpoint
        s3 = client("s3", server_endpoint)
        dynamodb = client("dynamodb", server_endpoint)
        table, bucket = _fresh_names()
        resources.create_store_resources(
            dynamodb, s3, table_name=table, bucket_name=bucket, region=DEFAULT_REGION
        )
        yield Backend(name, s3, dynamodb, server_endpoint, table, bucket)
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
    a condition only one should (see vhs/motoserver.py, which does the same for the server).
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
