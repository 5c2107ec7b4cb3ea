"""dynalite (npm, pinned in package.json): a second DynamoDB implementation for the tests.

moto is not atomic on its own (vhs_ops/local/motoserver.py makes it so), so a test that passes
only on moto could be passing on our lock rather than on DynamoDB's semantics. dynalite
applies each write under a per-item lock, as DynamoDB does, and is an independent
implementation of the expression language, so the store's tests run on it too.

Where it differs from DynamoDB in ways that touch VHS:

* no ReturnValuesOnConditionCheckFailure: a failed condition returns no item, so the index
  reads the item after a failed condition (vhs/index/table.py);
* no streams: CreateTable accepts a StreamSpecification and ignores it (the change feed is
  tested on moto only);
* table names must be at least 3 characters (as in DynamoDB; moto accepts shorter ones).

`npm ci` installs it (make setup). In-memory mode needs no install script: dynalite's on-disk
store, classic-level, loads a prebuilt binary shipped in the package.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from vhs_ops.errors import LocalStackError
from vhs_ops.local.stack import ChildServer

ROOT = Path(__file__).resolve().parents[3]
CLI = ROOT / "node_modules" / "dynalite" / "cli.js"


class DynaliteServer(ChildServer):
    """dynalite in memory, in a child process on 127.0.0.1. Tables are ACTIVE at once (not
    after dynalite's default 500 ms), so creating one per test costs nothing."""

    name = "dynalite"
    probe_path = "/"  # answers "healthy: dynamodb.us-east-1.amazonaws.com", as DynamoDB does

    def command(self) -> list[str]:
        node = shutil.which("node")
        if node is None or not CLI.is_file():
            raise LocalStackError(
                f"dynalite is not installed ({CLI} missing, or no node on PATH): "
                "run `make setup` (npm ci installs the version pinned in package.json)"
            )
        return [
            node,
            str(CLI),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--createTableMs",
            "0",
            "--deleteTableMs",
            "0",
            "--updateTableMs",
            "0",
        ]
