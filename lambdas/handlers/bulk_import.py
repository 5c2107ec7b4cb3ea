"""The bulk import Lambda: the worker of the Import stack's Distributed Map (docs/import.md).

Two events, one per state of the state machine: a plan (``{"plan": {...}, "execution":
NAME}``) and a batch of chunks (the ItemBatcher's ``{"Items": [...], "BatchInput": {...}}``).
What each does is vhs.ingest.bulk_steps' (`plan`, `import_chunks`); this module only wires
them: the ingestor, built once per environment, the logger and the metrics.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics, per_environment
from vhs.errors import InvalidInput
from vhs.ingest.bulk_steps import import_chunks, plan
from vhs.ingest.ingestor import Ingestor
from vhs.ingest.staging import StagingLocation
from vhs.settings import BULK_IMPORT_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(BULK_IMPORT_FUNCTION)


@per_environment
def ingestor() -> Ingestor:
    store = VersionedHybridStore.from_env()
    return Ingestor(
        store, sqs_client=None, dlq_url="", staging=StagingLocation.from_env(), s3_client=None
    )


def _count(name: str, value: int) -> None:
    metrics.add_metric(name=f"import_{name}", unit=MetricUnit.Count, value=value)


@instrumented(logger, metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "plan" in event:
        return plan(event, ingestor, logger)
    if "Items" in event:
        return import_chunks(event, ingestor, logger, _count)
    raise InvalidInput("event", "neither a plan nor a batch of chunks")
