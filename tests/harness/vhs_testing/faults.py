"""Fault injection at the HTTP layer of boto3 clients.

`FaultInjector` numbers the API calls made through some clients in the order they start (one
number per call, however many HTTP attempts its retries take), and can inject one fault into
the call with a given number. It sits where botocore hands a signed request to its HTTP
session (`client._endpoint.http_session.send`), so everything above it, botocore's retries
included, runs for real, and everything below it (the server) really does or does not see the
request:

* ``unreachable``: every attempt fails before the request leaves (a refused connection), so
  the SDK's retries run out and the call raises `EndpointConnectionError`;
* ``lost_response``: the first attempt reaches the server and is processed, then the client
  sees a read timeout, so the SDK sends the same request again (the ambiguous outcome of
  Iceberg #7151);
* ``throttled``: the first attempt is answered with a throttling error without reaching the
  server (the SDK backs off and retries);
* ``crash_before`` / ``crash_after``: the process "dies" just before the request is sent, or
  just after the server processed it: `Crash`, a BaseException, unwinds everything, as a kill
  would, and nothing of the SDK retries it.

Numbering uses botocore's ``before-call`` event, which fires once per call in the calling
thread (also in the worker threads of a multipart upload), so the same code records the call
sequence against in-process moto, where no HTTP is sent at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

FAULT_KINDS = ("unreachable", "lost_response", "throttled", "crash_before", "crash_after")
# The kinds after which the operation must still succeed, transparently.
TRANSPARENT = frozenset({"lost_response", "throttled"})


class Crash(BaseException):
    """The process died here. A BaseException, so no `except Exception` handler stops it."""


@dataclass(frozen=True)
class Fault:
    kind: str
    call: int  # 0-based, in the order calls start

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")


class _RawBody:
    """Just enough of a urllib3 response for botocore to read a synthetic body."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, *_: Any, **__: Any) -> Iterable[bytes]:
        yield self.data

    def read(self, *_: Any, **__: Any) -> bytes:
        data, self.data = self.data, b""
        return data


def throttling_response(service: str, protocol: str, url: str) -> AWSResponse:
    """What a service answers a caller over its request rate, in the service's protocol:
    DynamoDB's and SQS's JSON, SNS's query XML, S3's 503 SlowDown."""
    if protocol == "json":
        kind = "ThrottlingException" if service == "dynamodb" else "RequestThrottled"
        body = json.dumps(
            {"__type": f"com.amazonaws.{service}#{kind}", "message": "Rate exceeded."}
        ).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "fault"}
        return AWSResponse(url, 400, headers, _RawBody(body))
    if protocol == "query":
        body = (
            b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
            b"<Message>Rate exceeded</Message></Error><RequestId>fault</RequestId></ErrorResponse>"
        )
        return AWSResponse(url, 400, {"Content-Type": "text/xml"}, _RawBody(body))
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
        b"<Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>"
    )
    return AWSResponse(url, 503, {"Content-Type": "application/xml"}, _RawBody(body))


class _Session:
    """Wraps a client's HTTP session; every attempt of every call goes through `send`."""

    def __init__(self, inner: Any, injector: FaultInjector) -> None:
        self.inner = inner
        self.injector = injector

    def send(self, request: Any) -> Any:
        return self.injector._send(self.inner, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FaultInjector:
    """Records the calls made through `clients`; injects `fault` (if any) into one of them."""

    def __init__(self, clients: Iterable[Any], fault: Fault | None = None) -> None:
        self.fault = fault
        self.calls: list[str] = []  # operation name of each call, in the order they started
        self.attempts: list[int] = []  # HTTP attempts per call (0 where nothing is sent)
        self.injected = 0  # how many attempts the fault changed
        self._lock = threading.Lock()
        self._local = threading.local()
        self._clients = list(clients)
        for client in self._clients:
            client.meta.events.register("before-call", self._on_call)
            endpoint = client._endpoint
            if fault is not None:
                endpoint.http_session = _Session(endpoint.http_session, self)

    def _on_call(self, model: Any = None, **_: Any) -> None:
        with self._lock:
            self._local.call = len(self.calls)
            self._local.service = model.service_model.endpoint_prefix
            self._local.protocol = model.service_model.protocol
            self.calls.append(model.name)
            self.attempts.append(0)

    def _send(self, session: Any, request: Any) -> Any:
        index = self._local.call
        with self._lock:
            self.attempts[index] += 1
            attempt = self.attempts[index]
        fault = self.fault
        if fault is None or fault.call != index:
            return session.send(request)
        kind = fault.kind
        if kind == "unreachable":
            self._count()
            raise EndpointConnectionError(endpoint_url=request.url, error="connection refused")
        if attempt > 1:
            return session.send(request)
        self._count()
        if kind == "crash_before":
            raise Crash(f"killed before call {index} ({self.calls[index]})")
        if kind == "throttled":
            return throttling_response(self._local.service, self._local.protocol, request.url)
        session.send(request)  # the server processes it, then the response is lost
        if kind == "lost_response":
            raise ReadTimeoutError(endpoint_url=request.url, error="response lost")
        raise Crash(f"killed after call {index} ({self.calls[index]}) was processed")

    @property
    def sdk_attempts(self) -> int:
        """How many HTTP attempts the SDK makes of one call before it gives up."""
        return self._clients[0].meta.config.retries["total_max_attempts"]

    def _count(self) -> None:
        with self._lock:
            self.injected += 1

    def close(self) -> None:
        for client in self._clients:
            client.meta.events.unregister("before-call", self._on_call)
            session = client._endpoint.http_session
            if isinstance(session, _Session):
                client._endpoint.http_session = session.inner
