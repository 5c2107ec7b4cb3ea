"""Settings: every environment variable VHS reads, each function's handler and service name,
and the builders that write a function's environment.

This is the one place these names are spelled. The library reads them (`from_env`), the CDK
constructs (infra/) and the local stack write them with the builders below, and the CLI's
`--stack` maps stack outputs onto them, so none of these can drift from the others. The
endpoint is not a VHS setting: boto and botocore read the standard AWS_ENDPOINT_URL.

Retention is part of `StoreSettings`, not of any one function: every function that reads or
judges versions (ingest writes and trims, the collector judges what is retained) gets its
environment from the same `StoreSettings`, so they agree by construction.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from .errors import ConfigurationError

# --- the store ----------------------------------------------------------------------------
TABLE_NAME = "VHS_TABLE_NAME"
BUCKET_NAME = "VHS_BUCKET_NAME"
PREFIX = "VHS_PREFIX"
INLINE_THRESHOLD = "VHS_INLINE_THRESHOLD"
RETAIN_VERSIONS = "VHS_RETAIN_VERSIONS"
RETAIN_DAYS = "VHS_RETAIN_DAYS"
# Days a deleted record's earlier versions stay readable (unset: 30, retention.py).
RETAIN_AFTER_DELETE_DAYS = "VHS_RETAIN_AFTER_DELETE_DAYS"
# "false": earlier inline versions are kept whole, and a put is one blind request (store.py).
DELTA_HISTORY = "VHS_DELTA_HISTORY"
# "true": writes pack with zstd, bodies with the newest dictionary trained on the store's
# records (dictionaries.py), deltas against their successor (packing.py). Unset: zlib alone.
DICTIONARIES = "VHS_DICTIONARIES"
# Every variable of StoreSettings (an empty value reads as unset: the library's default).
STORE_VARIABLES = (
    TABLE_NAME,
    BUCKET_NAME,
    PREFIX,
    INLINE_THRESHOLD,
    RETAIN_VERSIONS,
    RETAIN_DAYS,
    RETAIN_AFTER_DELETE_DAYS,
    DELTA_HISTORY,
    DICTIONARIES,
)

# --- ingest -------------------------------------------------------------------------------
QUEUE_URL = "VHS_QUEUE_URL"
DLQ_URL = "VHS_DLQ_URL"
STAGING_BUCKET = "VHS_STAGING_BUCKET"
STAGING_PREFIX = "VHS_STAGING_PREFIX"
MAX_PAYLOAD_BYTES = "VHS_MAX_PAYLOAD_BYTES"
INGEST_CONCURRENCY = "VHS_INGEST_CONCURRENCY"

# --- the change feed ----------------------------------------------------------------------
CHANGE_TOPIC_ARN = "VHS_CHANGE_TOPIC_ARN"
CHANGE_DLQ_URL = "VHS_CHANGE_DLQ_URL"
CHANGE_QUEUE_URL = "VHS_CHANGE_QUEUE_URL"  # the local stack's watch queue
CHANGES_STOP_AT_REMAINING_MS = "VHS_CHANGES_STOP_AT_REMAINING_MS"

# --- reindex ------------------------------------------------------------------------------
REINDEX_STOP_AT_REMAINING_MS = "VHS_REINDEX_STOP_AT_REMAINING_MS"
# The deployed state machine (`vhs reindex --cloud` starts it; --stack maps its output here).
REINDEX_STATE_MACHINE_ARN = "VHS_REINDEX_STATE_MACHINE_ARN"

# --- the garbage collector ----------------------------------------------------------------
GC_GRACE = "VHS_GC_GRACE"

# --- the read API ---------------------------------------------------------------------------
# Seconds a redirect's presigned S3 URL stays valid (a body too large for the response).
READ_API_PRESIGN_SECONDS = "VHS_READ_API_PRESIGN_SECONDS"
# The most bytes a body may take in the function's response, as encoded there (base64, or a
# JSON string): larger bodies are redirected to S3. See vhs/read_api/responses.py for the
# default.
READ_API_RESPONSE_LIMIT = "VHS_READ_API_RESPONSE_LIMIT"
# Where `vhs local up` serves the read API (printed among its export lines).
READ_API_URL = "VHS_READ_API_URL"

# --- bulk import ---------------------------------------------------------------------------
# The bucket and key prefix the import function reads files under, and where it writes its
# plans and reports (docs/import.md).
IMPORT_BUCKET = "VHS_IMPORT_BUCKET"
IMPORT_PREFIX = "VHS_IMPORT_PREFIX"
IMPORT_RESULTS_PREFIX = "VHS_IMPORT_RESULTS_PREFIX"
IMPORT_WRITE_WORKERS = "VHS_IMPORT_WRITE_WORKERS"
IMPORT_CHUNK_LINES = "VHS_IMPORT_CHUNK_LINES"

# --- the local stack ----------------------------------------------------------------------
# The port `vhs local up` serves on when --port is not given (default
# vhs.shapes.local.DEFAULT_PORT).
LOCAL_PORT = "VHS_LOCAL_PORT"
# What a command missing its configuration suggests: a command that loads the local stack's
# environment and returns (starting the stack in the background when none is running here).
LOCAL_ENV_HINT = 'try: eval "$(vhs local up --detach)"'

# --- AWS's own names ---------------------------------------------------------------------
# Attempts per AWS call, the first included, as the AWS SDKs and CLI read it (unset: aws.py's
# default). 1 turns retries off: for tests and scripts against an endpoint that may not answer.
MAX_ATTEMPTS = "AWS_MAX_ATTEMPTS"

# --- Powertools (its own names, set for every function) -----------------------------------
POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
LOG_LEVEL = "LOG_LEVEL"
DEFAULT_METRICS_NAMESPACE = "VHS"


def metrics_namespace() -> str:
    return get(POWERTOOLS_METRICS_NAMESPACE, DEFAULT_METRICS_NAMESPACE)


@dataclass(frozen=True)
class FunctionSpec:
    """A VHS Lambda function: its short name (`vhs invoke NAME`), the handler Lambda calls,
    and the service name its logs, metrics and traces carry."""

    name: str
    handler: str
    service: str

    @property
    def module(self) -> str:
        return self.handler.rpartition(".")[0]


INGEST_FUNCTION = FunctionSpec("ingest", "handlers.ingest.handler", "vhs-ingest")
CHANGES_FUNCTION = FunctionSpec("changes", "handlers.changes.handler", "vhs-changes")
GC_FUNCTION = FunctionSpec("gc", "handlers.gc.handler", "vhs-gc")
READ_API_FUNCTION = FunctionSpec("read-api", "handlers.read_api.handler", "vhs-read-api")
REINDEX_FUNCTION = FunctionSpec("reindex", "handlers.reindex.handler", "vhs-reindex")
BULK_IMPORT_FUNCTION = FunctionSpec("import", "handlers.bulk_import.handler", "vhs-import")
FUNCTIONS = {
    f.name: f
    for f in (
        INGEST_FUNCTION,
        CHANGES_FUNCTION,
        GC_FUNCTION,
        READ_API_FUNCTION,
        REINDEX_FUNCTION,
        BULK_IMPORT_FUNCTION,
    )
}


def get(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    return (os.environ if environ is None else environ).get(name, default)


# The prefixes of every variable a function is configured by: VHS's own, the AWS SDK's
# (endpoint, region, credentials, retries) and Powertools'.
CONFIGURING_PREFIXES = ("VHS_", "AWS_", "POWERTOOLS_")


def configuration_of(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """Every variable that configures a function, as it is now: what a handler's cached
    objects were built from. In Lambda it never changes; in a process that runs handlers
    against several stacks (the local stack's functions, `vhs invoke`, tests) it does."""
    source = os.environ if environ is None else environ
    return tuple(sorted((k, v) for k, v in source.items() if k.startswith(CONFIGURING_PREFIXES)))


def require(*names: str, hint: str = "", environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of `names`, or ConfigurationError naming every one that is unset."""
    values = [get(name, environ=environ) for name in names]
    missing = [name for name, value in zip(names, values, strict=True) if not value]
    if missing:
        raise ConfigurationError(f"set {' and '.join(missing)}" + (f" ({hint})" if hint else ""))
    return values


def whole_number(name: str, default: int | None = None, environ: Mapping | None = None) -> int:
    raw = get(name, environ=environ)
    if not raw:
        if default is None:
            raise ConfigurationError(f"set {name}")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, not {raw!r}") from None


def max_attempts(environ: Mapping[str, str] | None = None) -> int | None:
    """AWS_MAX_ATTEMPTS as a number of attempts (None: unset), or ConfigurationError."""
    raw = get(MAX_ATTEMPTS, environ=environ).strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"{MAX_ATTEMPTS} must be a whole number of attempts, at least 1, not {raw!r}"
        )
    return int(raw)


def _flag(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    raw = get(name, environ=environ)
    if not raw:
        return None
    if raw.lower() not in ("true", "false"):
        raise ConfigurationError(f"{name} must be true or false, not {raw!r}")
    return raw.lower() == "true"


def _optional(values: Mapping[str, object | None]) -> dict[str, str]:
    return {name: str(value) for name, value in values.items() if value not in (None, "")}


@dataclass(frozen=True)
class StoreSettings:
    """Where a store lives and how it keeps versions: what every function that opens the
    store is given. Values may be CloudFormation tokens when infra/ builds them."""

    table_name: str
    bucket_name: str
    prefix: str = ""
    inline_threshold: int | None = None
    retain_versions: int | None = None
    retain_days: float | None = None
    # None: the library's default (30 days); a negative value is refused by Retention.
    retain_after_delete_days: float | None = None
    # None: the library's default (on).
    delta_history: bool | None = None
    # None: the library's default (off).
    dictionaries: bool | None = None

    def environment(self) -> dict[str, str]:
        return {
            TABLE_NAME: self.table_name,
            BUCKET_NAME: self.bucket_name,
            **_optional(
                {
                    PREFIX: self.prefix,
                    INLINE_THRESHOLD: self.inline_threshold,
                    RETAIN_VERSIONS: self.retain_versions,
                    RETAIN_DAYS: self.retain_days,
                    RETAIN_AFTER_DELETE_DAYS: self.retain_after_delete_days,
                    DELTA_HISTORY: None
                    if self.delta_history is None
                    else str(self.delta_history).lower(),
                    DICTIONARIES: None
                    if self.dictionaries is None
                    else str(self.dictionaries).lower(),
                }
            ),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreSettings:
        table, bucket = require(TABLE_NAME, BUCKET_NAME, hint=LOCAL_ENV_HINT, environ=environ)
        days = get(RETAIN_DAYS, environ=environ)
        try:
            retain_days = float(days) if days else None
        except ValueError:
            raise ConfigurationError(f"{RETAIN_DAYS} must be a number, not {days!r}") from None
        return cls(
            retain_after_delete_days=_days(RETAIN_AFTER_DELETE_DAYS, environ),
            table_name=table,
            bucket_name=bucket,
            prefix=get(PREFIX, environ=environ),
            inline_threshold=(
                whole_number(INLINE_THRESHOLD, environ=environ)
                if get(INLINE_THRESHOLD, environ=environ)
                else None
            ),
            retain_versions=(
                whole_number(RETAIN_VERSIONS, environ=environ)
                if get(RETAIN_VERSIONS, environ=environ)
                else None
            ),
            retain_days=retain_days,
            delta_history=_flag(DELTA_HISTORY, environ),
            dictionaries=_flag(DICTIONARIES, environ),
        )

    @property
    def retain_after_delete(self) -> timedelta | None:
        if self.retain_after_delete_days is None:
            return None
        return timedelta(days=self.retain_after_delete_days)

    @property
    def retain_age(self) -> timedelta | None:
        return timedelta(days=self.retain_days) if self.retain_days is not None else None


def _days(name: str, environ: Mapping[str, str] | None) -> float | None:
    raw = get(name, environ=environ)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of days, not {raw!r}") from None


def powertools_environment(
    function: FunctionSpec, *, namespace: str = DEFAULT_METRICS_NAMESPACE, log_level: str = ""
) -> dict[str, str]:
    return _optional(
        {
            POWERTOOLS_SERVICE_NAME: function.service,
            POWERTOOLS_METRICS_NAMESPACE: namespace,
            LOG_LEVEL: log_level,
        }
    )


def ingest_environment(
    store: StoreSettings, *, dlq_url: str, staging_bucket: str, staging_prefix: str = ""
) -> dict[str, str]:
    """The ingest function's own settings, beside the store's."""
    return {
        **store.environment(),
        DLQ_URL: dlq_url,
        STAGING_BUCKET: staging_bucket,
        **_optional({STAGING_PREFIX: staging_prefix}),
    }


def gc_environment(store: StoreSettings, *, grace: str) -> dict[str, str]:
    """The collector's: the store's (with its retention, exactly as ingest has it) and the
    grace period."""
    return {**store.environment(), GC_GRACE: grace}


def changes_environment(
    *, topic_arn: str, bucket_name: str, prefix: str = "", stop_at_remaining_ms: int | None = None
) -> dict[str, str]:
    """The change feed function's: where to publish, and where bodies live (to name them)."""
    return {
        CHANGE_TOPIC_ARN: topic_arn,
        BUCKET_NAME: bucket_name,
        **_optional({PREFIX: prefix, CHANGES_STOP_AT_REMAINING_MS: stop_at_remaining_ms}),
    }


def read_api_environment(
    store: StoreSettings,
    *,
    presign_seconds: int | None = None,
    response_limit: int | None = None,
) -> dict[str, str]:
    """The read API's: the store's (its retention decides which versions are readable, as
    for every other function) and, where given, how long a redirect lasts and how large a
    body may be to come back in the response."""
    return {
        **store.environment(),
        **_optional(
            {READ_API_PRESIGN_SECONDS: presign_seconds, READ_API_RESPONSE_LIMIT: response_limit}
        ),
    }


def reindex_environment(
    store: StoreSettings, *, topic_arn: str, stop_at_remaining_ms: int | None = None
) -> dict[str, str]:
    """The reindex worker's: the table to scan, where bodies live (to name their locations,
    as the change feed does) and the topic to publish replays to. It reads no body and
    judges no retention: only the table, bucket and prefix of the store's settings."""
    return {
        TABLE_NAME: store.table_name,
        **changes_environment(
            topic_arn=topic_arn, bucket_name=store.bucket_name, prefix=store.prefix
        ),
        **_optional({REINDEX_STOP_AT_REMAINING_MS: stop_at_remaining_ms}),
    }


def bulk_import_environment(
    store: StoreSettings,
    *,
    bucket: str,
    prefix: str,
    results_prefix: str,
    staging_bucket: str,
    staging_prefix: str = "",
    write_workers: int | None = None,
    chunk_lines: int | None = None,
) -> dict[str, str]:
    """The import function's: the store's (it writes as ingest writes), where import files
    and results live, and the staging location (a line may point at a staged body, as a
    message may)."""
    return {
        **store.environment(),
        IMPORT_BUCKET: bucket,
        IMPORT_PREFIX: prefix,
        IMPORT_RESULTS_PREFIX: results_prefix,
        STAGING_BUCKET: staging_bucket,
        **_optional(
            {
                STAGING_PREFIX: staging_prefix,
                IMPORT_WRITE_WORKERS: write_workers,
                IMPORT_CHUNK_LINES: chunk_lines,
            }
        ),
    }
