"""Local stacks for integration tests on the session's moto server."""

from __future__ import annotations

import sys
import uuid
from typing import Any

from vhs.local.stack import LocalStack


def fresh_stack(endpoint: str, tag: str, **options: Any) -> LocalStack:
    """A provisioned local stack (table, buckets, queues) that no other test shares: the
    session's moto server outlives every test. `tag` starts each name, to tell them apart in
    the server's log; `options` are LocalStack's (visibility_timeout, extra_env, ...)."""
    suffix = uuid.uuid4().hex[:10]
    return LocalStack(
        endpoint,
        table_name=f"{tag}-{suffix}",
        bucket_name=f"{tag}-b-{suffix}",
        staging_bucket=f"{tag}-s-{suffix}",
        queue_name=f"{tag}-{suffix}",
        **options,
    ).provision()


def forget_loaded_handlers() -> None:
    """Every handler module loaded in this process forgets what it built from the environment
    (its store, its clients), as a cold start would: a test that points them at a fresh stack
    must not meet a client of an earlier test's stack, whose server may be gone."""
    for name, module in list(sys.modules.items()):
        if name.startswith("handlers.") and hasattr(module, "reset"):
            module.reset()
