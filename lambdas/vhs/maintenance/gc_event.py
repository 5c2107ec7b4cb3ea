"""The garbage collector's event: what an invocation may ask for, checked before anything runs.

`{}` collects every shard; `{"parallel": N}` splits the shards over N invocations (fan-out);
`{"shards": ["00", ...]}` collects those; `{"dry_run": true}` only reports; `resume_after`
continues a shard where a handed-on invocation stopped. An EventBridge scheduled event is read
as `{}`. Any other field, or an event that is no object, is refused: read as "every shard", a
typo (`"shard"`) or another service's event would be a whole collection nobody asked for.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInput
from ..keys import all_shards

# The fields a gc event may have (handed-on invocations included).
EVENT_FIELDS = frozenset({"shards", "parallel", "dry_run", "resume_after"})


def is_scheduled_event(event: Any) -> bool:
    """An EventBridge schedule's own event (the rule passes it when it sets no input)."""
    return (
        isinstance(event, dict)
        and event.get("source") == "aws.events"
        and event.get("detail-type") == "Scheduled Event"
    )


def checked_event(event: Any) -> dict[str, Any]:
    """The gc event `event` is: itself when every field is one of EVENT_FIELDS, {} for a
    scheduled event; else InvalidInput naming the first field that is not."""
    if is_scheduled_event(event):
        return {}
    if not isinstance(event, dict):
        raise InvalidInput("event", f"must be a JSON object, not {type(event).__name__}")
    unknown = sorted(set(event) - EVENT_FIELDS)
    if unknown:
        raise InvalidInput(
            unknown[0],
            f"is not a field of a gc event (its fields: {', '.join(sorted(EVENT_FIELDS))})",
        )
    return event


def shards_of(event: dict[str, Any]) -> list[str]:
    """The event's shards (every shard when it names none), each once, in order."""
    if "shards" not in event:
        return all_shards()
    shards, known = event["shards"], set(all_shards())
    if not isinstance(shards, list) or not all(isinstance(s, str) and s in known for s in shards):
        raise InvalidInput("shards", "must be a list of shard names, two lowercase hex digits")
    return list(dict.fromkeys(shards))


def parallel_of(event: dict[str, Any]) -> int:
    parallel = event.get("parallel", 1)
    limit = len(all_shards())
    if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= limit:
        raise InvalidInput("parallel", f"must be a whole number from 1 to {limit}")
    return parallel


def fanned_out(shards: list[str], parallel: int, dry_run: bool) -> list[dict[str, Any]]:
    """The events of the invocations that `parallel` splits `shards` over: no more than
    there are shards, since an empty group would be an invocation with nothing to do (and,
    read as "every shard", a whole collection again)."""
    groups = [shards[n::parallel] for n in range(min(parallel, len(shards)))]
    return [{"shards": group, "dry_run": dry_run} for group in groups]
