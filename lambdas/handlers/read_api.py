"""The read API Lambda: records over HTTP, behind a Lambda function URL (AuthType AWS_IAM).

The routes, their answers and the OpenAPI document are vhs.read_api's (its design notes are
there); this module only wires them: the store, built once per environment, the logger and
the metrics.
"""

from __future__ import annotations

from typing import Any

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.read_api.routes import ServedWith, serve
from vhs.settings import READ_API_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(READ_API_FUNCTION)


@per_environment
def store() -> VersionedHybridStore:
    return VersionedHybridStore.from_env()


served_with = ServedWith(store=store, logger=logger, metrics=metrics)


@instrumented(logger, metrics, capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return serve(event, context, served_with)
