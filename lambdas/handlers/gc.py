"""The garbage-collection Lambda, run on a schedule (EventBridge) by the CDK app.

Event: `{}` collects every shard; `{"parallel": N}` splits the shards over N asynchronous
invocations of this same function (fan-out); `{"shards": ["00", ...]}` collects those;
`{"dry_run": true}` only reports. An invocation that runs short of time hands the shards it
has not reached to a fresh invocation of itself, so a bucket of any size is collected. An
EventBridge scheduled event is read as `{}`. Any other field, or an event that is no object, is
refused before anything runs: read as "every shard", a typo (`"shard"`) or another service's
event would be a whole collection nobody asked for (vhs.maintenance.gc_event reads the event).
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from handlers.observability import instrumented, logger_and_metrics
from vhs import settings
from vhs.aws import aws_client
from vhs.maintenance.gc import DEFAULT_GRACE, RESERVE_MS, GarbageCollector, parse_duration
from vhs.maintenance.gc_event import checked_event, fanned_out, parallel_of, shards_of
from vhs.settings import GC_FUNCTION
from vhs.store import VersionedHybridStore

logger, metrics = logger_and_metrics(GC_FUNCTION)

# The report's counts, each a metric gc_<name>.
COUNTED = (
    "listed",
    "referenced",
    "orphaned",
    "deleted",
    "skipped",
    "deferred",
    "markers_cleared",
    "failed",
)


def _continue(context: Any, event: dict[str, Any]) -> None:
    """Hand `event` on to a fresh invocation of this function. Locally (`vhs invoke`), the
    context runs it in-process once this invocation returns."""
    invoke_async = getattr(context, "invoke_async", None)
    if invoke_async is not None:
        invoke_async(event)
        return
    aws_client("lambda").invoke(
        FunctionName=context.invoked_function_arn,
        InvocationType="Event",
        Payload=json.dumps(event).encode(),
    )


@instrumented(logger, metrics)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    event = checked_event(event)
    shards = shards_of(event)
    dry_run = bool(event.get("dry_run", False))
    parallel = parallel_of(event)
    if parallel > 1 and len(shards) > 1:
        groups = fanned_out(shards, parallel, dry_run)
        for group in groups:
            _continue(context, group)
        metrics.add_metric(name="gc_invocations_started", unit=MetricUnit.Count, value=len(groups))
        logger.info("fanned out", extra={"invocations": len(groups), "shards": len(shards)})
        return {"fanned_out": len(groups)}

    configured = settings.get(settings.GC_GRACE)
    grace = parse_duration(configured) if configured else DEFAULT_GRACE
    collector = GarbageCollector(VersionedHybridStore.from_env(), grace=grace, dry_run=dry_run)
    report, remaining, resume_after = collector.run_until(
        shards,
        start_after=event.get("resume_after"),
        should_stop=lambda: context.get_remaining_time_in_millis() < RESERVE_MS,
    )
    if remaining:
        continuation: dict[str, Any] = {"shards": remaining, "dry_run": dry_run}
        if resume_after is not None:
            continuation["resume_after"] = resume_after
        _continue(context, continuation)
    for name in COUNTED:
        metrics.add_metric(name=f"gc_{name}", unit=MetricUnit.Count, value=getattr(report, name))
    metrics.add_metric(
        name="gc_bytes_reclaimed", unit=MetricUnit.Bytes, value=report.bytes_reclaimed
    )
    metrics.add_metric(
        name="gc_failed_shards", unit=MetricUnit.Count, value=len(report.failed_shards)
    )
    result = {**report.as_dict(), "continued_with": len(remaining)}
    if report.ok:
        logger.info("collected", extra=result)
    else:  # the GcFailures alarm watches gc_failed and gc_failed_shards
        logger.error("collected, with failures", extra=result)
    return result
