"""The read API on a local port: a Lambda function URL (AuthType AWS_IAM), emulated.

`LocalReadApi` serves HTTP on 127.0.0.1 with the standard library's threaded server and does
what a function URL does in front of the real handler (handlers/read_api.py):

* it checks each request's SigV4 signature (service "lambda", the stack's region) against the
  local stack's fake credentials, recomputed with botocore's signer from the request as it
  arrived; an unsigned, wrongly signed or stale (over 15 minutes) request gets 403
  `{"Message": "Forbidden"}` and never reaches the handler;
* it turns the request into the payload 2.0 event a function URL sends (`rawPath` still
  percent-encoded, `rawQueryString`, lower-cased headers, `requestContext.http`, the body and
  `isBase64Encoded`) and the handler's response back into HTTP (a base64 body decoded);
* one execution environment: invocations run one at a time, as in one Lambda sandbox (the
  Powertools resolver keeps the current event on the app), while the threads keep
  connections apart.

`vhs local up` runs it beside the pipeline and prints its URL (VHS_READ_API_URL); the tests
and benchmarks/read_api.py drive it with signed requests. Nothing here is imported by a
handler: lambdas/ ships it, but Lambda never loads it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from vhs import settings
from vhs.settings import READ_API_FUNCTION

from .event_source import Handler, LocalFunction
from .invoke import LambdaContext
from .stack import LOCAL_CREDENTIALS, function_environment

SERVICE = "lambda"
# SigV4 refuses a request whose X-Amz-Date is further than this from the server's clock.
MAX_CLOCK_SKEW = timedelta(minutes=15)
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<signed>[^,\s]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})"
)
_FORBIDDEN = {"Message": "Forbidden"}
# What a function URL answers when the function fails (raises, or returns no response).
_BAD_GATEWAY = {"Message": "Internal Server Error"}


def signature_problem(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    region: str,
    access_key: str = LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
    secret_key: str = LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    service: str = SERVICE,
    now: datetime | None = None,
) -> str | None:
    """Why the request is not validly signed with SigV4 for `service` in `region` by
    `access_key`, or None when it is. `headers` are lower-cased; `target` is the request
    target as sent (path and query, percent-encoded)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    header = headers.get("authorization", "")
    if not header:
        return "no Authorization header"
    match = _AUTHORIZATION.fullmatch(header.strip())
    if match is None:
        return "the Authorization header is not AWS4-HMAC-SHA256"
    if match["key"] != access_key:
        return f"unknown access key {match['key']!r}"
    if (match["region"], match["service"]) != (region, service):
        return f"signed for {match['service']} in {match['region']}, not {service} in {region}"
    stamp = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "no valid X-Amz-Date header"
    if stamp[:8] != match["date"]:
        return "the credential scope's date is not X-Amz-Date's"
    if abs((now or datetime.now(UTC)) - signed_at) > MAX_CLOCK_SKEW:
        return "the signature has expired (X-Amz-Date is over 15 minutes away)"
    names = match["signed"].split(";")
    if "host" not in names or any(name not in headers for name in names):
        return "a signed header is missing (Host must be signed)"
    declared = headers.get("x-amz-content-sha256")
    if declared not in (None, UNSIGNED_PAYLOAD) and declared != hashlib.sha256(body).hexdigest():
        return "X-Amz-Content-SHA256 is not the body's"
    request = AWSRequest(
        method=method,
        url=f"http://{headers['host']}{target}",
        headers={name: headers[name] for name in names},
        data=body,
    )
    if declared is not None:
        # botocore reads the declared payload hash under this spelling only.
        request.headers["X-Amz-Content-SHA256"] = declared
    request.context["timestamp"] = stamp
    signer = SigV4Auth(
        Credentials(access_key, secret_key, headers.get("x-amz-security-token")), service, region
    )
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    if not hmac.compare_digest(expected, match["signature"]):
        return "the signature does not match"
    return None


def signed_headers(
    method: str,
    url: str,
    *,
    region: str,
    access_key: str = LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
    secret_key: str = LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    session_token: str | None = None,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    service: str = SERVICE,
) -> dict[str, str]:
    """The headers of a request to a function URL signed as a consumer signs it (botocore's
    SigV4Auth): `headers` plus Host, X-Amz-Date and Authorization. `url` is sent as it is, its
    path percent-encoded by the caller."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
    SigV4Auth(Credentials(access_key, secret_key, session_token), service, region).add_auth(request)
    return dict(request.headers.items())


def function_url_event(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    region: str,
    access_key: str,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """The payload 2.0 event a function URL sends for this request (`headers` lower-cased,
    repeated headers joined with commas as a function URL joins them)."""
    raw_path, _, raw_query = target.partition("?")
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": dict(headers),
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "local",
            "authorizer": {"iam": {"accessKey": access_key, "accountId": "000000000000"}},
            "domainName": headers.get("host", ""),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": False,
    }
    if raw_query:
        from urllib.parse import parse_qsl

        event["queryStringParameters"] = dict(parse_qsl(raw_query, keep_blank_values=True))
    if "cookie" in headers:
        event["cookies"] = [c.strip() for c in headers["cookie"].split(";")]
    if body:
        event["body"] = base64.b64encode(body).decode()
        event["isBase64Encoded"] = True
    return event


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def http_response(response: Any) -> HttpResponse:
    """What a function URL makes of the handler's response: a dict with statusCode is the
    response (its body base64-decoded when isBase64Encoded), anything else is a 200 JSON
    body."""
    if not isinstance(response, dict) or "statusCode" not in response:
        return HttpResponse(
            200, [("Content-Type", "application/json")], json.dumps(response).encode()
        )
    raw = response.get("body") or ""
    body = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode()
    headers = [(name, str(value)) for name, value in (response.get("headers") or {}).items()]
    headers += [("Set-Cookie", cookie) for cookie in response.get("cookies") or ()]
    return HttpResponse(int(response["statusCode"]), headers, body)


@dataclass
class LocalReadApi(LocalFunction):
    """The read API on the local stack: the real handler behind an emulated function URL,
    served on `host`:`port` (0: a free port). `extra_env` adds to the function's environment
    (VHS_READ_API_RESPONSE_LIMIT, say)."""

    stack: Any  # local.LocalStack
    port: int = 0
    host: str = "127.0.0.1"
    function_log: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    handler: Handler | None = None
    module: Any = field(default=None, init=False)
    server: ThreadingHTTPServer | None = field(default=None, init=False)
    _exit: contextlib.ExitStack | None = field(default=None, init=False)
    _invoking: threading.Lock = field(default_factory=threading.Lock, init=False)

    @property
    def url(self) -> str:
        if self.server is None:
            raise RuntimeError("the read API is not running: start() it, or use `with`")
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """The function's environment, as the CDK app sets it (and the local endpoint)."""
        store = settings.StoreSettings(
            self.stack.table_name, self.stack.bucket_name, self.stack.prefix
        )
        return {
            **self.stack.env(),
            **settings.read_api_environment(store),
            **function_environment(READ_API_FUNCTION),
            **self.extra_env,
        }

    def _start(self, running: contextlib.ExitStack) -> None:
        handler = self._load(running, READ_API_FUNCTION, self.environment(), self.function_log)
        api = self

        class Serve(_FunctionUrlRequest):
            def invoke(self, event: dict[str, Any]) -> Any:
                context = LambdaContext(
                    function_name="vhs-read-api", log_group_name="/aws/lambda/vhs-read-api"
                )
                with api._invoking:
                    return handler(event, context)

            region = self.stack.region

        self.server = ThreadingHTTPServer((self.host, self.port), Serve)
        self.server.daemon_threads = True
        thread = threading.Thread(
            target=self.server.serve_forever, name="read-api", kwargs={"poll_interval": 0.1}
        )
        thread.start()

        def stop() -> None:
            if self.server is not None:
                self.server.shutdown()
                self.server.server_close()
            thread.join()
            self.server = None

        running.callback(stop)


class _FunctionUrlRequest(BaseHTTPRequestHandler):
    """One HTTP request, through the function URL's checks to the handler and back."""

    protocol_version = "HTTP/1.1"
    region = "us-east-1"
    # Headers and body leave in two writes: with Nagle's algorithm on, a small body waits for
    # the client's delayed ACK of the headers (40 ms a response).
    disable_nagle_algorithm = True

    def invoke(self, event: dict[str, Any]) -> Any:
        raise NotImplementedError

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the console is for the export lines; the function's log has the requests

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        problem = signature_problem(self.command, self.path, headers, body, region=self.region)
        if problem is not None:
            self._send(
                HttpResponse(
                    403,
                    [("Content-Type", "application/json"), ("X-Vhs-Local-Auth", problem)],
                    json.dumps(_FORBIDDEN).encode(),
                )
            )
            return
        event = function_url_event(
            self.command,
            self.path,
            headers,
            body,
            region=self.region,
            access_key=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            source_ip=self.client_address[0],
        )
        try:
            response = http_response(self.invoke(event))
        except Exception:
            response = HttpResponse(
                502, [("Content-Type", "application/json")], json.dumps(_BAD_GATEWAY).encode()
            )
        self._send(response)

    def _send(self, response: HttpResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def __getattr__(self, name: str) -> Any:
        # http.server dispatches to do_<METHOD>; a function URL passes every method on, the ones
        # HTTP names and the ones a client invents (QUERY, say), so every one is served.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)
