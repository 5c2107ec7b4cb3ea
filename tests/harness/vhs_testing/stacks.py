"""Local stacks for integration tests on the session's moto server."""

from __future__ import annotations

import uuid
from typing import Any

from vhs_ops.local.stack import LocalStack


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
