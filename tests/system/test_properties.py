"""Property: random puts and deletes for a few ids, delivered in random order with duplicates,
end in the state a simple in-memory model predicts (vhs_testing/model.py).

Timestamps come from a small set so that ties are common: a put and a delete at the same time
(the delete wins), two puts at the same time (the higher sha256 of the canonical body wins),
the same body at the same time under two content types (the higher content type wins), and the
same body at two times (only updated_at moves, if the content type is the same too). Bodies are
small JSON records, which are inline, and bytes over the inline threshold, which go to S3.
Content types are the default (JSON or octet-stream), application/json given explicitly (stored
as absent, like the default), and types on either side of it.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vhs import RecordNotFound, Retention
from vhs_testing.backends import Backend, open_backend
from vhs_testing.model import JSON, Delete, ModelStore, Put, Write, claimed, winner

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMES = [T0 + timedelta(seconds=s) for s in range(4)]
IDS = ["alpha", "beta", "gamma/δ"]
INLINE_THRESHOLD = 64
OUTCOMES = {Put: {"stored", "stale", "unchanged"}, Delete: {"deleted", "stale", "unchanged"}}


def _large(seed: int) -> bytes:
    """Incompressible bytes over 16 x the inline threshold: always an S3 body."""
    return random.Random(seed).randbytes(INLINE_THRESHOLD * 16 + 1 + seed)


# A small pool makes equal content at different times (and so `unchanged`) common.
POOL = [{"n": 0}, {"n": 1}, {"n": 1, "s": "é"}, [1, 2, 3], "x" * 200, _large(1), _large(2)]

records = st.one_of(
    st.sampled_from(POOL),
    st.dictionaries(st.sampled_from("abc"), st.integers(-3, 3), max_size=3),
    st.binary(min_size=INLINE_THRESHOLD * 16 + 1, max_size=INLINE_THRESHOLD * 16 + 64),
)
times = st.sampled_from(TIMES)
# None: the default. Either side of "application/json", which the item stores as absent.
content_types = st.sampled_from(
    [None, None, JSON, "application/cbor", "text/plain", "application/vnd.api+json"]
)


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[Write], list[Write]]:
    """(distinct writes, the order they arrive in with some of them duplicated)."""
    ids = IDS[: draw(st.integers(2, 3))]
    put = st.builds(_put, st.sampled_from(ids), records, times, content_types)
    delete = st.builds(Delete, st.sampled_from(ids), times)
    writes = draw(st.lists(st.one_of(put, put, put, delete), min_size=1, max_size=14))
    # Some puts again, at the same time, under another (or the same) content type: ties that
    # only the content type breaks, which independent draws would rarely make.
    puts = [w for w in writes if isinstance(w, Put)]
    if puts:
        retyped = st.builds(_retyped, st.sampled_from(puts), content_types)
        writes += draw(st.lists(retyped, max_size=4))
    duplicates = draw(st.lists(st.sampled_from(writes), max_size=5))
    arrival = draw(st.permutations(writes + duplicates))
    return writes, arrival


def _put(id: str, record: object, at: datetime, content_type: str | None) -> Put:
    # Bytes that may claim JSON must be JSON; all bytes are made so, so that one body under
    # two content types (a tie only the type breaks) is one body whichever types are drawn.
    return Put(id, claimed(record, JSON), at, content_type)


def _retyped(put: Put, content_type: str | None) -> Put:
    return Put(put.id, put.record, put.at, content_type)


def _apply(store, namespace: str, write: Write):
    if isinstance(write, Put):
        return store.put(
            namespace + write.id, write.record, updated_at=write.at, content_type=write.content_type
        )
    return store.delete(namespace + write.id, deleted_at=write.at)


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    """One in-process moto for every example: each example's ids are its own (a namespace
    per example), so no example sees another's items or bodies, and none pays moto's start and
    the table's creation (about 0.3 s, more than half of an example)."""
    with open_backend("inprocess", None) as opened:
        yield opened


NAMESPACES = (f"example-{n}/" for n in itertools.count())


@settings(
    max_examples=60,
    deadline=None,
    # The module's backend is shared on purpose (its fixture says why).
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(delivery=deliveries(), retain=st.sampled_from([0, 1, 5]))
def test_any_arrival_order_with_duplicates_ends_in_the_modelled_state(
    backend: Backend, delivery, retain
):
    writes, arrival = delivery
    model = ModelStore(retain)
    namespace = next(NAMESPACES)
    store = backend.store(inline_threshold=INLINE_THRESHOLD, retention=Retention(retain))
    seen_version: dict[str, int] = {}
    for write in arrival:
        result = _apply(store, namespace, write)
        before = seen_version.get(write.id, 0)
        # Each outcome is one the operation may report, and consistent with the version.
        assert result.outcome in OUTCOMES[type(write)], write
        if result.outcome in ("stored", "deleted"):
            assert result.version == before + 1, write
        else:
            assert result.version == before, write
        seen_version[write.id] = result.version
        if isinstance(write, Put):
            assert result.content_hash == write.content_hash
        # The sequential model predicts the exact outcome and version.
        assert (result.outcome, result.version) == model.apply(write), write

    for id in IDS:
        _check_final_state(store, model, namespace, id, [w for w in writes if w.id == id])


def _check_final_state(
    store, model: ModelStore, namespace: str, id: str, writes: list[Write]
) -> None:
    best = winner(writes)
    stored_id = namespace + id
    # The order-independent claim: the highest (updated_at, hash, content type) write is current.
    if best is None or isinstance(best, Delete):
        with pytest.raises(RecordNotFound):
            store.get(stored_id)
    else:
        record = store.get(stored_id)
        assert record.body == best.body
        assert record.updated_at == best.at
        assert record.content_type == best.type
        assert record.content_hash == best.content_hash == hashlib.sha256(record.body).hexdigest()
    if best is None:
        with pytest.raises(RecordNotFound):
            store.history(stored_id)
        return

    history = store.history(stored_id)
    numbers = [info.version for info in history]
    # Versions are a contiguous run ending at the current one, in strictly increasing order.
    assert numbers == list(range(numbers[-1] - len(numbers) + 1, numbers[-1] + 1))
    order_keys = [
        (info.updated_at, info.content_hash or "~", info.content_type or JSON) for info in history
    ]
    assert order_keys == sorted(set(order_keys))
    assert order_keys[-1] == best.order_key
    # And they are exactly the versions the model keeps.
    expected = model.history(id)
    got = [(i.version, i.updated_at, i.content_hash, i.deleted, i.content_type) for i in history]
    assert got == [
        (v.number, v.at, None if v.deleted else v.content_hash, v.deleted, v.content_type)
        for v in expected
    ]
    for version in expected:
        if not version.deleted:
            assert store.get(stored_id, version.number).body == version.body
