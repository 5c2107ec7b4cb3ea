"""Coalescing in the ingest handler: the messages of one batch for one id are reduced to their
winner before anything is written, and every other message gets exactly the outcome it would
get written one by one right after the winner (vhs/ingest/coalesce.py)."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from typing import Any

import pytest
from test_ingest_handler import (
    REGION,
    STAGING,
    P,
    handler_module,
    message_event,
    stack,  # noqa: F401  (the fixture)
)

from vhs import VersionedHybridStore
from vhs.index.codec import time_value
from vhs.index.layouts import Layout
from vhs.ingest.batch import _ingest_one, ingest_batch
from vhs.ingest.coalesce import losers, read_candidate
from vhs.ingest.ingestor import Ingestor
from vhs.ordering import OrderKey
from vhs.timestamps import parse_timestamp
from vhs_ops import provisioning

IDS = [f"hot-{n}" for n in range(4)]
VALUES = [{"v": n} for n in range(3)]


def batch(seed: int, size: int = 10) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """Messages over a few ids: repeated and equal timestamps, the same records again,
    deletes, and staged bodies (one missing) with a timestamp no other message of their id
    has (two staged bodies at one time race, and the store, not the batch, orders them)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    staged: dict[str, bytes] = {}
    used: set[tuple[str, int]] = set()
    for n in range(size):
        rid = rng.choice(IDS)
        kind = rng.choice(["record", "record", "record", "deleted", "staged"])
        if kind == "staged":
            free = [m for m in range(30, 40) if (rid, m) not in used]
            minute = rng.choice(free)
        else:
            minute = rng.choice([m for m in range(1, 4) if (rid, m + 30) not in used])
        used.add((rid, minute))
        stamp = f"2026-01-01T00:{minute:02d}:00Z"
        if kind == "record":
            messages.append({"id": rid, "updated_at": stamp, "record": rng.choice(VALUES)})
        elif kind == "deleted":
            messages.append({"id": rid, "updated_at": stamp, "deleted": True})
        else:
            key = f"{P}staged-{seed}-{n}"
            if rng.random() < 0.8:
                staged[key] = f"staged body {rng.randrange(2)}".encode()
            location = f"s3://{STAGING}/{key}"
            messages.append({"id": rid, "updated_at": stamp, "record_location": location})
    return messages, staged


def sort_key(message: dict[str, Any], staged: dict[str, bytes], index: int) -> tuple:
    """Sorted on this, highest first: the highest key first and equal keys in batch order,
    "winner first", the order coalescing stands for."""
    stamp = parse_timestamp(message["updated_at"])
    if message.get("deleted"):
        key = OrderKey.of(stamp, "~", None)
    elif "record" in message:
        data = json.dumps(message["record"], separators=(",", ":"), sort_keys=True).encode()
        key = OrderKey.of(stamp, hashlib.sha256(data).hexdigest(), None)
    else:
        data = staged.get(message["record_location"].split("/", 3)[3], b"")
        key = OrderKey.of(stamp, hashlib.sha256(data).hexdigest(), "application/octet-stream")
    return (key, -index)


def reference_store(dynamodb: Any, s3: Any, name: str) -> VersionedHybridStore:
    provisioning.create_store_resources(
        dynamodb, s3, table_name=name, bucket_name=f"{name}-bodies", region=REGION
    )
    return VersionedHybridStore(name, f"{name}-bodies", s3_client=s3, dynamodb_client=dynamodb)


def state(store: VersionedHybridStore, rid: str) -> tuple[Any, ...] | None:
    try:
        history = store.history(rid)
    except LookupError:
        return None
    latest = history[-1]
    return (latest.deleted, latest.content_hash, latest.updated_at)


@pytest.mark.parametrize("seed", range(6))
def test_a_coalesced_batch_ends_as_written_one_by_one_winner_first(stack, seed):  # noqa: F811
    module = handler_module()
    messages, staged = batch(seed)
    for key, data in staged.items():
        stack.s3.put_object(Bucket=STAGING, Key=key, Body=data)
    records = message_event(*messages)["Records"]
    worker = module.ingestor()
    calls: Counter[str] = Counter()
    fetched: list[str] = []

    for client in (worker.store.index.dynamodb, worker.s3):
        client.meta.events.register(
            "before-call.*.*", lambda model, **_: calls.update([model.name]), unique_id="count"
        )
    worker.s3.meta.events.register(
        "provide-client-params.s3.GetObject",
        lambda params, **_: fetched.append(params["Key"]),
        unique_id="fetched",
    )
    coalesced = ingest_batch(worker, records)

    one_by_one = Ingestor(
        reference_store(stack.dynamodb, stack.s3, f"reference-{seed}"),
        sqs_client=stack.sqs,
        dlq_url=stack.dlq_url,
        staging=worker.staging,
        s3_client=stack.s3,
    )
    order = sorted(
        range(len(records)), key=lambda n: sort_key(messages[n], staged, n), reverse=True
    )
    expected = {n: _ingest_one(one_by_one, records[n]) for n in order}

    assert [(r.outcome, r.version) for r in coalesced] == [
        (expected[n].outcome, expected[n].version) for n in range(len(records))
    ]
    for rid in IDS:
        assert state(worker.store, rid) == state(one_by_one.store, rid), rid
    # Nothing is written or downloaded for a message its winner decides: one conditional
    # write per id, and no staged body fetched for a loser whose winner was stored.
    candidates = [read_candidate(n, r, worker.first_read(r)) for n, r in enumerate(records)]
    beaten = {
        loser: winner
        for loser, winner in losers(c for c in candidates if c is not None).items()
        if coalesced[winner].outcome != "invalid"
    }
    assert calls["UpdateItem"] == len({r.record_id for r in coalesced if r.outcome != "invalid"})
    for n in beaten:
        if "record_location" in messages[n]:
            assert messages[n]["record_location"].split("/", 3)[3] not in fetched
    assert len(beaten) >= 2  # (the batches do coalesce)


def test_ten_messages_for_one_id_make_one_write(stack):  # noqa: F811
    module = handler_module()
    worker = module.ingestor()
    writes: list[str] = []
    worker.store.index.dynamodb.meta.events.register(
        "before-call.dynamodb.UpdateItem", lambda **_: writes.append("w"), unique_id="writes"
    )
    messages = [
        {"id": "hot", "updated_at": f"2026-01-01T00:00:{n:02d}Z", "record": {"n": n}}
        for n in range(10)
    ]
    random.Random(1).shuffle(messages)
    results = ingest_batch(worker, message_event(*messages)["Records"])
    assert Counter(r.outcome for r in results) == {"stored": 1, "stale": 9}
    assert len(writes) == 1
    assert worker.store.get("hot").json() == {"n": 9}
    assert [v.version for v in worker.store.history("hot")] == [1]


def test_a_winner_that_fails_takes_no_loser_with_it(stack):  # noqa: F811
    """The winner's write fails (it will be retried): its losers are coalesced again among
    themselves and written, not failed with it."""
    module = handler_module()
    worker = module.ingestor()
    latest = parse_timestamp("2026-01-01T00:03:00Z")

    def fail_the_winner(params: dict[str, Any], **_: Any) -> None:
        if params["ExpressionAttributeValues"][":t"] == time_value(latest, Layout.COMPACT):
            raise RuntimeError("the winner's write fails")

    worker.store.index.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", fail_the_winner, unique_id="fail"
    )
    messages = [
        {"id": "x", "updated_at": f"2026-01-01T00:0{minute}:00Z", "record": {"m": minute}}
        for minute in (1, 3, 2)
    ]
    results = ingest_batch(worker, message_event(*messages)["Records"])
    assert isinstance(results[1], RuntimeError)
    assert [results[0].outcome, results[2].outcome] == ["stale", "stored"]
    assert worker.store.get("x").json() == {"m": 2}


def test_the_demo_reports_a_coalesced_duplicate_without_a_version(stack):  # noqa: F811
    """A duplicate coalesced into its twin wrote nothing, so its log line names no version:
    `make demo` says it was coalesced, never `unchanged (vNone)`."""
    import logging

    from vhs_ops.local.demo import _outcome

    lines: list[dict[str, Any]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append({**record.__dict__, "message": record.getMessage()})

    log = logging.getLogger("test-demo-outcomes")
    log.addHandler(Capture())
    log.setLevel(logging.INFO)
    message = {"id": "twin", "updated_at": "2026-01-01T00:00:00Z", "record": {"n": 1}}
    ingest_batch(handler_module().ingestor(), message_event(message, message)["Records"], log=log)
    assert sorted(_outcome(line) for line in lines) == ["stored (v1)", "unchanged (coalesced)"]
