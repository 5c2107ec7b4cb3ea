"""Lambda events for the ingest handler: the fixtures in events/, SQS events made of message
bodies, and the handler's module as Lambda loads it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from vhs_ops.local.invoke import load_handler

EVENTS = Path(__file__).resolve().parents[3] / "events"


def handler_module() -> Any:
    import sys

    load_handler("ingest")
    return sys.modules["handlers.ingest"]


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text())


def message_event(*bodies: Any) -> dict[str, Any]:
    """An SQS event holding these message bodies (dicts are JSON-encoded)."""
    template = load("sqs-small-record")["Records"][0]
    records = []
    for n, body in enumerate(bodies):
        record = copy.deepcopy(template)
        record["messageId"] = f"message-{n}"
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        records.append(record)
    return {"Records": records}
