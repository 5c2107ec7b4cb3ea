"""The local stack applies each DynamoDB request atomically, as DynamoDB does.

moto alone does not: it checks a condition and then writes, with no lock, so concurrent
identical puts can all be "stored" (docs/design.md, Known limits). vhs_ops.local.motoserver and
vhs_testing.backends.atomic_inprocess_dynamodb serialise DynamoDB requests; this is the proof.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.mark.parametrize("backend_name", ["inprocess", "server"])
def test_concurrent_identical_puts_store_exactly_one_version(request, backend_name):
    backend = request.getfixturevalue(backend_name)
    store = backend.store()
    for trial in range(15):
        rid = backend.id(f"race-{trial}")
        with ThreadPoolExecutor(8) as pool:
            results = list(
                pool.map(
                    lambda _, rid=rid: store.put(
                        rid, {"same": True}, updated_at="2026-01-01T00:00:00Z"
                    ),
                    range(8),
                )
            )
        assert [r.outcome for r in results].count("stored") == 1
        assert {r.version for r in results} == {1}
        assert [v.version for v in store.history(rid)] == [1]


def test_concurrent_conflicting_puts_end_at_the_highest_key(server):
    store = server.store()
    rid = server.id("contended")
    stamps = [f"2026-01-01T00:00:{n:02d}Z" for n in range(16)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda s: store.put(rid, {"at": s}, updated_at=s), stamps))
    assert store.get(rid).json() == {"at": stamps[-1]}
    stored = [r for r in results if r.outcome == "stored"]
    history = store.history(rid)
    # Every stored write got its own version, numbered without gaps.
    assert sorted(r.version for r in stored) == list(range(1, len(stored) + 1))
    assert [v.updated_at for v in history] == sorted(v.updated_at for v in history)
