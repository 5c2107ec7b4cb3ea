"""The kind of event each function takes, checked before `vhs invoke` runs its handler.

In AWS an event source only ever sends a function its own kind of event, so the handlers do
not check the kind: the garbage collector reads an event that names no shards as "collect
every shard", and the ingest handler reads an SQS record's fields. Run by hand, a wrong file
is one typo away; `vhs invoke` refuses it with one line naming both kinds instead of running a
real collection or failing on a missing field. Only the kind is checked: the values (a
`{"parallel": 0}`, a malformed message) are the handler's to judge, as in AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vhs import settings
from vhs.maintenance.gc_event import EVENT_FIELDS as GC_FIELDS
from vhs.maintenance.gc_event import is_scheduled_event

from ..errors import WrongEvent


def _records_from(source: str) -> Callable[[Any], bool]:
    def check(event: Any) -> bool:
        records = event.get("Records") if isinstance(event, dict) else None
        return (
            isinstance(records, list)
            and bool(records)
            and all(isinstance(r, dict) and r.get("eventSource") == source for r in records)
        )

    return check


def _gc(event: Any) -> bool:
    return is_scheduled_event(event) or (isinstance(event, dict) and set(event) <= GC_FIELDS)


def _function_url(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and isinstance(event.get("requestContext"), dict)
        and "http" in event["requestContext"]
        and "rawPath" in event
    )


def _with(*alternatives: tuple[str, ...]) -> Callable[[Any], bool]:
    def check(event: Any) -> bool:
        return isinstance(event, dict) and any(set(keys) <= set(event) for keys in alternatives)

    return check


# By function name: the check and what the kind is called.
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    settings.INGEST_FUNCTION.name: (
        _records_from("aws:sqs"),
        "an SQS event (Records with eventSource aws:sqs)",
    ),
    settings.CHANGES_FUNCTION.name: (
        _records_from("aws:dynamodb"),
        "a DynamoDB stream event (Records with eventSource aws:dynamodb)",
    ),
    settings.GC_FUNCTION.name: (
        _gc,
        "a gc event ({}, or only shards, parallel, dry_run and resume_after) or a scheduled event",
    ),
    settings.READ_API_FUNCTION.name: (_function_url, "a function URL request (payload format 2.0)"),
    settings.REINDEX_FUNCTION.name: (
        _with(("plan",), ("segment", "run")),
        "a reindex plan or segment event",
    ),
    settings.BULK_IMPORT_FUNCTION.name: (
        _with(("plan",), ("Items",)),
        "an import plan or a batch of chunks (Items)",
    ),
}


def describe(event: Any) -> str:
    """What `event` looks like, in a few words."""
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__.replace('NoneType', 'null')}, not an object"
    records = event.get("Records")
    if isinstance(records, list) and records:
        sources = sorted({str(r.get("eventSource")) for r in records if isinstance(r, dict)})
        return f"an event whose Records come from {', '.join(sources) or 'no eventSource'}"
    if "detail-type" in event:
        return f"an EventBridge event ({event['detail-type']})"
    if _function_url(event):
        return "a function URL request"
    return "an object with " + (", ".join(sorted(event)) if event else "no fields")


def check_event(function: str, event: Any) -> None:
    """Raise WrongEvent unless `event` is the kind `function` takes (a function of no known
    kind, such as a module path, takes any)."""
    if function not in KINDS:
        return
    fits, kind = KINDS[function]
    if not fits(event):
        raise WrongEvent(f"it takes {kind}; this is {describe(event)}")
