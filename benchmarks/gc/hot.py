"""The GC benchmark's hot id (issue 11): one record id with thousands of orphaned bodies beside
its current version, collected by successive passes of the collector, each a process of its
own whose clock is past the previous pass's condemnation's expiry, as scheduled runs would be.

Before issue 11 every condemned body added an attribute of its own to the item: 5,600 orphans
of one id took the item past DynamoDB's 400 KB, after which every condemnation and every put
to the id failed, and the collector exited 1 with 823 orphans left. A condemnation now names
at most `vhs.item.MAX_CONDEMNED` bodies more at a time, in one set; until issue 25 a run
stopped there, so the id took one pass per MAX_CONDEMNED. A run now goes on condemning the id
while it has orphans (up to `vhs.item.MAX_CONDEMNED_HELD` named at once): the benchmark
checks that one pass collects them all within the collector's time budget (the GC Lambda's
timeout less the time its handler keeps in reserve).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from handlers.gc import RESERVE_MS
from vhs import resources
from vhs.codec import Body
from vhs.item import ITEM_LIMIT, condemnation_of, item_size
from vhs.keys import shard_of
from vhs.local.stack import client
from vhs.store import VersionedHybridStore

from . import workload
from .gc_dataset import SEED, Record, catalogue_body, seed_objects
from .gc_process import CLOCK_AHEAD, REGION, InProcessServer, run_child
from .report import Progress

HOT_ORPHANS = 5_600
HOT_ID = "b9999999-hot"
DYNAMODB_ITEM_LIMIT = ITEM_LIMIT
# How far past a condemnation's expiry the next pass's clock is.
MARGIN = 60.0
# Passes beyond the one that should collect every orphan, before giving up.
SPARE_PASSES = 3
# What one invocation of the GC Lambda may spend collecting before it hands on.
BUDGET_SECONDS = resources.GC.function_timeout_seconds - RESERVE_MS / 1000


@dataclass
class HotResult:
    orphans: int
    item_before: int  # the item's size before the first pass (bytes)
    passes: list[dict[str, Any]]  # per pass: the child's result, and the item and bucket after
    problems: list[str]

    @property
    def seconds(self) -> float:
        return sum(p["seconds"] for p in self.passes)

    @property
    def requests(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for each in self.passes:
            total.update(each["requests"])
        return total

    @property
    def largest_item(self) -> int:
        """The item's largest size while condemned (after a pass: within one, the
        condemnation only grows, and the next pass clears it before condemning again)."""
        return max((p["item_bytes"] for p in self.passes if p["condemned"]), default=0)

    @property
    def deleted(self) -> int:
        return sum(p["report"]["deleted"] for p in self.passes)

    @property
    def left(self) -> int:
        return self.passes[-1]["orphans_left"] if self.passes else self.orphans

    def as_dict(self) -> dict[str, Any]:
        return {
            "orphans": self.orphans,
            "passes": self.passes,
            "seconds": self.seconds,
            "requests": dict(self.requests),
            "item_bytes_before": self.item_before,
            "largest_item_bytes": self.largest_item,
            "item_limit_bytes": DYNAMODB_ITEM_LIMIT,
            "deleted": self.deleted,
            "orphans_left": self.left,
            "problems": self.problems,
        }


def measure_hot_id(server: InProcessServer, orphans: int, progress: Progress) -> HotResult:
    """A store holding one id's current version (through store.put) and `orphans` bodies of
    the same id that no version references (a crashed writer's uploads, put straight into
    moto's backend), collected pass after pass until none is left."""
    dynamodb, s3 = client("dynamodb", server.endpoint), client("s3", server.endpoint)
    name = "vhs-gc-hot"
    resources.create_store_resources(dynamodb, s3, table_name=name, bucket_name=name, region=REGION)
    store = VersionedHybridStore(
        name, name, s3_client=s3, dynamodb_client=dynamodb, inline_threshold=0
    )
    current, crashed = hot_bodies(orphans)
    seeded = Record(HOT_ID, [], crashed=crashed)
    store.put(HOT_ID, current.data, updated_at=seeded.stamp(1), content_type=current.content_type)
    seed_objects([seeded], store)
    keep = {store.body_key(HOT_ID, current.sha256)}
    progress(f"hot id: {orphans:,} orphans and its current version; collecting pass by pass")

    def item() -> dict[str, Any]:
        return dynamodb.get_item(
            TableName=name, Key={"id": {"S": HOT_ID}}, ConsistentRead=True
        ).get("Item", {})

    result = HotResult(orphans, item_size(item()), [], [])
    ahead = CLOCK_AHEAD
    bucket = InProcessServer.s3_backend().get_bucket(name)
    for number in range(1, 1 + SPARE_PASSES + 1):
        done = run_child(
            server.endpoint,
            name,
            name,
            mode="collect",
            trace=False,
            shards=[shard_of(HOT_ID)],
            clock_ahead=ahead,
        )
        raw = item()
        standing = condemnation_of(raw)
        left = set(bucket.keys.keys())
        done.update(
            pass_number=number,
            item_bytes=item_size(raw),
            condemned=len(standing.bodies) if standing else 0,
            orphans_left=len(left - keep),
        )
        result.passes.append(done)
        report = done["report"]
        progress(
            f"hot id: pass {number} deleted {report['deleted']:,} in {done['seconds']:.1f}s, "
            f"{done['orphans_left']:,} left; item {done['item_bytes']:,} bytes"
        )
        if report["failed"] or report["failed_shards"]:
            result.problems.append(f"hot id: pass {number} failed: {report}")
        if not left - keep:
            break
        # The next scheduled run: past this condemnation's expiry (lease + marker expiry).
        ahead += done["expiry"] + MARGIN
    result.problems += check_hot(result, store, current, keep, set(bucket.keys.keys()))
    InProcessServer.drop_bucket(name)
    dynamodb.delete_table(TableName=name)
    return result


def check_hot(
    result: HotResult, store: Any, current: Body, keep: set[str], left: set[str]
) -> list[str]:
    problems = []
    if left != keep:
        problems.append(
            f"hot id: {len(left - keep)} orphans left after {len(result.passes)} passes, "
            f"{len(keep - left)} referenced objects missing"
        )
    if len(result.passes) != 1 or not result.passes or result.passes[0]["orphans_left"]:
        problems.append(f"hot id: {len(result.passes)} passes, not one, collected it")
    if result.passes and result.passes[0]["seconds"] > BUDGET_SECONDS:
        problems.append(
            f"hot id: the pass took {result.passes[0]['seconds']:.0f} s, over the "
            f"collector's budget of {BUDGET_SECONDS:.0f} s"
        )
    if result.deleted != result.orphans:
        problems.append(f"hot id: deleted {result.deleted}, expected {result.orphans}")
    if result.largest_item >= DYNAMODB_ITEM_LIMIT:
        problems.append(f"hot id: the item reached {result.largest_item:,} bytes")
    if store.get(HOT_ID).body != current.data:
        problems.append("hot id: its current version reads back wrong")
    return problems


def hot_bodies(orphans: int) -> tuple[Body, list[Body]]:
    """The current version's body and `orphans` others of the hot id: catalogue records of
    about 250 bytes, as in the sizes' data set."""
    writer = workload._Writer(random.Random(SEED))

    def body(version: int) -> Body:
        return catalogue_body(writer, HOT_ID, version)

    return body(1), [body(n) for n in range(2, orphans + 2)]
