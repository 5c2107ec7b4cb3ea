"""The local stack: moto's server on 127.0.0.1 with the store's resources, the embedded default.

`vhs local up` uses it, and so do the integration tests and the benchmarks. The server runs
as a child process (so its state is never shared with an in-process `mock_aws`), and the
resources are created from the same shapes (vhs.shapes) that the CDK app deploys: the table
and the body bucket, and for the ingest pipeline the staging bucket (claim-check payloads and
staged bodies, expiring), the ingest queue, its dead-letter queue with the deployed redrive
policy, and the DLQ alarm. runners.py runs the pipeline on it. The environments it
writes are built with vhs.settings, as the CDK app builds the deployed functions'.
"""

from __future__ import annotations

import contextlib
import json
import socket

# subprocess only starts moto's server: this interpreter, fixed arguments (bandit B404, B603).
import subprocess  # nosec B404
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Self

from vhs import settings, shapes
from vhs.settings import FunctionSpec
from vhs_ops import provisioning

from ..errors import LocalStackError
from .owner import owner_of, port_holder

DEFAULT_REGION = "us-east-1"
# moto's documented fake credentials: they only ever reach the local server.
_FAKE_SECRET = "testing"  # nosec B105
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": _FAKE_SECRET}
DEFAULT_TABLE = "vhs-local-records"
DEFAULT_BUCKET = "vhs-local-bodies"
DEFAULT_STAGING_BUCKET = "vhs-local-staging"
DEFAULT_QUEUE = "vhs-local-ingest"
DEFAULT_FUNCTION = "vhs-local-ingest"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ChildServer:
    """An HTTP server in a child process, bound to 127.0.0.1 unless told another address
    (`bind`). Subclasses name the command and a path that answers once the server is ready."""

    name = "server"
    probe_path = "/"
    # A session of its own, out of reach of a terminal's Ctrl-C, for a server that exits
    # with its parent by itself (it would otherwise be left behind when its parent dies).
    own_session = False

    def __init__(self, port: int = 0, *, bind: str = "127.0.0.1") -> None:
        self.port = port or free_port()
        self.bind = bind
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log: Any = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def held_by_another(self) -> str | None:
        """Who else answers on this server's port, in words, or None when it is ours. A
        server that cannot bind the port exits, but another one there answers the probe
        first: without this, a stack would take that one for its own."""
        return None

    def start(self, timeout: float = 30.0) -> str:
        command = self.command()
        # Servers log every request. A pipe nobody reads fills up (64 KB) and then blocks the
        # server for good, so the log goes to a file, read only if start fails.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(  # nosec B603
            command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=self.own_session
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                error = self.log.read().decode(errors="replace")
                self.stop()
                raise LocalStackError(f"{self.name} exited: {error.strip()[-500:]}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                # The URL is always http://127.0.0.1:<port>, built above (bandit B310).
                urllib.request.urlopen(f"{self.endpoint}{self.probe_path}", timeout=1).close()  # nosec B310
                holder = self.held_by_another()
                if holder is not None:
                    self.stop()
                    raise LocalStackError(holder)
                return self.endpoint
            time.sleep(0.05)
        self.stop()
        raise LocalStackError(f"{self.name} did not answer on {self.endpoint} in {timeout}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log:
            self.log.close()
        self.process = None
        self.log = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MotoServer(ChildServer):
    """moto's server (with atomic DynamoDB requests: see motoserver.py) in a child process,
    bound to 127.0.0.1 unless `bind` says otherwise (`vhs local up --host 0.0.0.0`, for
    containers). `atomic_dynamodb=False` runs moto's own server, unchanged: only for
    measuring what the middleware prevents (benchmarks/atomicity.py); `sqs_index=False`
    leaves moto's SQS scanning every message per call (moto_sqs.py), only for measuring what
    the index saves (benchmarks/volume.py)."""

    name = "moto server"
    probe_path = "/moto-api/"
    # A terminal's Ctrl-C reaches the process group of the command that started it, and the
    # server must outlive that command's shutdown (its threads' last requests), not die first
    # and leave them retrying a closed port (make demo took 30 s and three tracebacks). It
    # exits with its parent (motoserver.py), so it is never left behind.
    own_session = True

    def __init__(
        self,
        port: int = 0,
        *,
        atomic_dynamodb: bool = True,
        bind: str = "127.0.0.1",
        sqs_index: bool = True,
        owner: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(port, bind=bind)
        self.atomic_dynamodb = atomic_dynamodb
        self.sqs_index = sqs_index
        self.owner = {**owner, "port": self.port} if owner else {}

    def command(self) -> list[str]:
        module = "vhs_ops.local.motoserver" if self.atomic_dynamodb else "moto.server"
        as_is = [] if self.sqs_index or not self.atomic_dynamodb else ["--moto-sqs"]
        owner = ["--owner", json.dumps(self.owner)] if self.atomic_dynamodb else []
        return [
            sys.executable, "-m", module, "-H", self.bind, "-p", str(self.port), *as_is, *owner
        ]  # fmt: skip

    def start(self, timeout: float = 30.0) -> str:
        # A port already held is refused naming its holder, before a server is started.
        holder = port_holder(self.port)
        if holder is not None:
            raise LocalStackError(holder)
        return super().start(timeout)

    def held_by_another(self) -> str | None:
        if not self.atomic_dynamodb or self.process is None:
            return None  # moto's own server names no owner
        owner = owner_of(self.endpoint)
        if owner is not None and owner.get("server_pid") == self.process.pid:
            return None
        return port_holder(self.port) or f"port {self.port} was taken while the stack started"


def endpoint_environment(endpoint: str, region: str) -> dict[str, str]:
    """What points boto (and so VHS) at the local server."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": region, **LOCAL_CREDENTIALS}


def function_environment(function: FunctionSpec) -> dict[str, str]:
    """Powertools' settings for a function run locally (tracing off: there is no X-Ray
    daemon locally)."""
    return {
        **settings.powertools_environment(function, namespace="VHS/local", log_level="INFO"),
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def client(service: str, endpoint: str | None, region: str = DEFAULT_REGION, **kw: Any) -> Any:
    """A boto3 client for `endpoint` (None: AWS), with the store's retry settings."""
    import boto3

    from vhs.aws import default_config

    if endpoint:
        kw.setdefault("aws_access_key_id", LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"])
        kw.setdefault("aws_secret_access_key", LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
    return boto3.client(
        service, endpoint_url=endpoint, region_name=region, config=default_config(), **kw
    )


@dataclass
class LocalStack:
    """The store's resources on a moto server, and the environment that points at them."""

    endpoint: str
    region: str = DEFAULT_REGION
    table_name: str = DEFAULT_TABLE
    bucket_name: str = DEFAULT_BUCKET
    prefix: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)
    # The ingest pipeline's resources (pipeline=False: the store's table and bucket only).
    pipeline: bool = True
    staging_bucket: str = DEFAULT_STAGING_BUCKET
    queue_name: str = DEFAULT_QUEUE
    function_name: str = DEFAULT_FUNCTION
    # Test-only: the ingest queue's visibility timeout, so a retried message comes back in
    # seconds rather than the deployed 6 minutes. None: the deployed shape's.
    visibility_timeout: int | None = None
    queue_url: str = field(default="", init=False)
    queue_arn: str = field(default="", init=False)
    dlq_url: str = field(default="", init=False)
    dlq_arn: str = field(default="", init=False)

    @property
    def dlq_name(self) -> str:
        return f"{self.queue_name}-dlq"

    @property
    def alarm_name(self) -> str:
        return f"{self.dlq_name}-not-empty"

    def provision(self) -> LocalStack:
        dynamodb = client("dynamodb", self.endpoint, self.region)
        s3 = client("s3", self.endpoint, self.region)
        existing = dynamodb.list_tables().get("TableNames", [])
        if self.table_name not in existing:
            provisioning.create_table(dynamodb, self.table_name)
        buckets = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if self.bucket_name not in buckets:
            provisioning.create_bucket(s3, self.bucket_name, self.region)
        if self.pipeline:
            if self.staging_bucket == self.bucket_name:
                raise LocalStackError("staging needs a bucket of its own: its objects expire")
            if self.staging_bucket not in buckets:
                provisioning.create_staging_bucket(s3, self.staging_bucket, self.region)
            self._provision_queues()
        return self

    def _provision_queues(self) -> None:
        from .alarms import put_dlq_alarm

        sqs = client("sqs", self.endpoint, self.region)
        # CreateQueue is idempotent for the same attributes: a second provision finds them.
        self.queue_url, self.dlq_url = provisioning.create_ingest_queues(
            sqs,
            queue_name=self.queue_name,
            dlq_name=self.dlq_name,
            visibility_timeout=self.visibility_timeout,
        )
        for url, name in ((self.queue_url, "queue_arn"), (self.dlq_url, "dlq_arn")):
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            setattr(self, name, arn["Attributes"]["QueueArn"])
        cloudwatch = client("cloudwatch", self.endpoint, self.region)
        put_dlq_alarm(cloudwatch, alarm_name=self.alarm_name, dlq_name=self.dlq_name)

    def env(self) -> dict[str, str]:
        """What a producer or a `vhs` command needs (printed by `vhs local up`)."""
        store = settings.StoreSettings(self.table_name, self.bucket_name, self.prefix)
        values = {**endpoint_environment(self.endpoint, self.region), **store.environment()}
        if self.pipeline and self.queue_url:
            values[settings.QUEUE_URL] = self.queue_url
            values.update(
                settings.ingest_environment(
                    store, dlq_url=self.dlq_url, staging_bucket=self.staging_bucket
                )
            )
            # Present even when empty, as it is locally: `make demo` reads it.
            values[settings.STAGING_PREFIX] = shapes.STAGING_PREFIX
        values.update(self.extra_env)
        return values

    def function_env(self) -> dict[str, str]:
        """The ingest function's environment, as the CDK app sets it."""
        return {**self.env(), **function_environment(settings.INGEST_FUNCTION)}


@contextlib.contextmanager
def local_stack(port: int = 0, **options: Any) -> Iterator[LocalStack]:
    """Start moto's server, provision the store, and stop the server on exit."""
    with MotoServer(port) as server:
        yield LocalStack(server.endpoint, **options).provision()
