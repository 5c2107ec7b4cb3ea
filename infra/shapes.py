"""The shapes only the deployed stacks have, with no local counterpart: the alarm thresholds,
the body prefix of a deployed bucket, bucket versioning and access logs. What the local stack
creates too is in `vhs.shapes`, the one definition both read."""

from __future__ import annotations

from dataclasses import dataclass

from vhs.shapes import ALARM_PERIOD_SECONDS

# The deployed body bucket keeps bodies under this prefix (VHS_PREFIX), so the ingest role's
# object permissions name it.
DEPLOYED_BODY_PREFIX = "bodies"
# Deployed buckets are versioned; a body the garbage collector deletes stays recoverable
# for this many days (a safety net against a collector that runs too early).
BUCKET_NONCURRENT_VERSION_DAYS = 30
ACCESS_LOG_EXPIRATION_DAYS = 365


@dataclass(frozen=True)
class AlarmThresholds:
    """The deployed alarms' thresholds (the dead-letter alarm's are `vhs.shapes.DLQ_ALARM`,
    which the local stack evaluates too)."""

    # The oldest message waiting longer than this means ingest is falling behind.
    oldest_message_age_seconds: int = 900
    oldest_message_period_seconds: int = 60
    # Function errors (a failed invocation, not a partial batch failure), throttles and
    # DynamoDB throttled requests: the sum over one period.
    function_errors: int = 1
    function_throttles: int = 1
    dynamodb_throttled_requests: int = 1
    period_seconds: int = ALARM_PERIOD_SECONDS


ALARMS = AlarmThresholds()
