"""Run the ingest handler on an event file in this process, and SIGKILL the process the moment
one AWS call of the handler has been answered: a Lambda environment that dies between two
phases of a write, where no `finally` or `except` can run.

    python tests/harness/vhs_testing/kill_after.py EVENT.json s3.PutObject

The environment configures the handler as the function's would (vhs_ops.local.stack.LocalStack's
function_env). Exits 3 if the call never happened, so a test can tell a kill from a miss.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from vhs_ops.local.invoke import LambdaContext, load_handler


def main() -> None:
    event_path, operation = sys.argv[1], sys.argv[2]
    service, name = operation.split(".")
    handler = load_handler("ingest")
    worker = sys.modules[handler.__module__].ingestor()
    clients = {"s3": worker.store.bodies.s3, "dynamodb": worker.store.index.dynamodb}

    def kill(**_: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    clients[service].meta.events.register(f"after-call.{service}.{name}", kill)
    event = json.loads(Path(event_path).read_text())
    handler(event, LambdaContext(function_name="vhs-local-ingest"))
    sys.exit(3)


if __name__ == "__main__":
    main()
