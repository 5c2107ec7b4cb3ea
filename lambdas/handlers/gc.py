"""The garbage-collection Lambda, run on a schedule (EventBridge) by the CDK app.

Event: `{}` collects every shard; `{"parallel": N}` splits the shards over N asynchronous
invocations of this same function (fan-out); `{"shards": ["00", ...]}` collects those;
`{"dry_run": true}` only reports. An invocation that runs short of time hands the shards it
has not reached to a fresh invocation of itself, so a bucket of any size is collected.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import logger_and_metrics, traced
from vhs import settings
from vhs.aws import aws_client
from vhs.keys import all_shards
from vhs.maintenance.gc import DEFAULT_GRACE, GarbageCollector, GcReport, parse_duration
from vhs.settings import GC_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(GC_FUNCTION)

# Stop taking new shards with this much time left: one shard's listing page and deletes.
RESERVE_MS = 120_000


def _continue(context: Any, event: dict[str, Any]) -> None:
    aws_client("lambda").invoke(
        FunctionName=context.invoked_function_arn,
        InvocationType="Event",
        Payload=json.dumps(event).encode(),
    )


@traced
@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    event = event if isinstance(event, dict) else {}
    shards = list(event.get("shards") or all_shards())
    dry_run = bool(event.get("dry_run", False))
    parallel = int(event.get("parallel", 1))
    if parallel > 1:
        groups = [shards[n::parallel] for n in range(parallel)]
        for group in groups:
            _continue(context, {"shards": group, "dry_run": dry_run})
        metrics.add_metric(name="gc_invocations_started", unit=MetricUnit.Count, value=len(groups))
        logger.info("fanned out", extra={"invocations": len(groups), "shards": len(shards)})
        return {"fanned_out": len(groups)}

    configured = settings.get(settings.GC_GRACE)
    grace = parse_duration(configured) if configured else DEFAULT_GRACE
    collector = GarbageCollector(VersionedHybridStore.from_env(), grace=grace, dry_run=dry_run)
    report = GcReport(dry_run=dry_run)
    done = 0
    for shard in shards:
        if context.get_remaining_time_in_millis() < RESERVE_MS:
            break
        report.add(collector.collect_shard(shard))
        done += 1
    remaining = shards[done:]
    if remaining:
        _continue(context, {"shards": remaining, "dry_run": dry_run})
    for name in ("listed", "referenced", "orphaned", "deleted", "skipped", "markers_cleared"):
        metrics.add_metric(name=f"gc_{name}", unit=MetricUnit.Count, value=getattr(report, name))
    metrics.add_metric(
        name="gc_bytes_reclaimed", unit=MetricUnit.Bytes, value=report.bytes_reclaimed
    )
    result = {**report.as_dict(), "continued_with": len(remaining)}
    logger.info("collected", extra=result)
    return result
