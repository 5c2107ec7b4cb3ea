"""The read API: a Lambda function URL with IAM auth (docs/read-api.md)."""

from __future__ import annotations

from collections.abc import Iterator

from .shape import ALARM_PERIOD_SECONDS, Check, FunctionShape

# Lambda's response payload limit for a function URL (buffered responses): 6 MB, counted on the
# JSON response the function returns, in which a binary body travels base64-encoded.
LAMBDA_RESPONSE_PAYLOAD_BYTES = 6 * 1024 * 1024


# A read is one GetItem and at most one S3 GET of a body under the response limit: seconds, not
# minutes. 512 MB holds a 4.5 MB body with its base64 copy, with CPU to spare for routing
# (benchmarks/read_api.py prices reads at this size).
class ReadApiShape(FunctionShape, shape="read API", timeout_seconds=10, memory_mb=512):
    # How long a presigned URL for a body too large for the response stays valid.
    presign_seconds: int = 60
    # Alarms: the share of requests answered 5xx over one period, and the p99 latency over
    # `latency_evaluation_periods` periods in a row (one slow minute is not an incident).
    error_rate_percent: float = 1.0
    latency_p99_ms: int = 1000
    latency_evaluation_periods: int = 3
    period_seconds: int = ALARM_PERIOD_SECONDS

    def _checks(self) -> Iterator[Check]:
        # SigV4 presigned URLs may live up to 7 days; a redirect needs seconds.
        yield 1 <= self.presign_seconds <= 3600, "presign_seconds must be 1..3600"
        yield 0 < self.error_rate_percent <= 100, "error_rate_percent must be in (0, 100]"
        yield self.latency_p99_ms >= 1, "latency_p99_ms must be positive"
        yield self.latency_evaluation_periods >= 1, "latency_evaluation_periods must be >= 1"
        yield self.period_seconds % 60 == 0, "period_seconds must be a multiple of 60"


READ_API = ReadApiShape()
