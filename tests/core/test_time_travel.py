"""Time travel and diffs on every backend: `get(id, as_of=)` / `source_as_of=` (the version
current at a moment, by the store's clock or the source's), `diff(id, a, b)` (a JSON Patch
for JSON records, sizes and hashes otherwise), their typed errors and their requests.
Generated histories against the reference model: tests/system/test_reference_model.py."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import jsonpatch
import pytest

from vhs import InvalidInput, InvalidTimestamp, RecordNotFound, Retention
from vhs.errors import RecordDeleted, VersionNotRetained
from vhs_ops.local.metering import RequestMeter
from vhs_testing.condemnation import FakeTime
from vhs_testing.records import at, large

START = 1_800_000_000


def moment(seconds: float) -> datetime:
    """The store's clock (FakeTime) `seconds` after START, as a datetime."""
    return datetime.fromtimestamp(START + seconds, UTC)


def timed_store(backend, **options):
    fake = FakeTime(START)
    return backend.store(clock=fake.clock, **options), fake


def canonical_hash(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, separators=(",", ":")).encode()).hexdigest()


def big_json(seed: int) -> dict:
    """A JSON record too large to be inline: its body goes to S3."""
    return {"seed": seed, "text": large(seed, 30_000).hex()}


def test_as_of_by_the_stores_clock_and_by_the_sources(backend):
    store, fake = timed_store(backend)
    rid = backend.id("travel")
    store.put(rid, {"n": 1}, updated_at=at(10))  # v1, written at 0
    fake.now += 5
    # v2 and v3 in the same second (5) and at the same updated_at: the one with the higher
    # hash comes second, so it is a new version rather than stale.
    second, third = sorted(({"n": 2}, {"n": 3}), key=canonical_hash)
    store.put(rid, second, updated_at=at(20))
    store.put(rid, third, updated_at=at(20))
    fake.now += 5
    store.delete(rid, deleted_at=at(30))  # v4, written at 10
    fake.now += 5
    store.put(rid, b"again", updated_at=at(40), content_type="text/plain")  # v5, at 15

    def by_clock(seconds: float) -> int:
        return store.get(rid, as_of=moment(seconds)).version

    assert [by_clock(s) for s in (0, 4.9, 5, 5.5, 9, 15, 99)] == [1, 1, 3, 3, 3, 5, 5]
    assert store.get(rid, as_of=moment(5)).json() == third  # the later of one second's two
    assert store.get(rid, as_of=moment(15)).body == b"again"
    with pytest.raises(RecordNotFound) as before:
        store.get(rid, as_of=moment(-1))
    assert type(before.value) is RecordNotFound and "no version by" in str(before.value)
    for seconds in (10, 14):
        with pytest.raises(RecordDeleted) as deleted:
            store.get(rid, as_of=moment(seconds))
        assert (deleted.value.version, deleted.value.deleted_at) == (4, at(30).isoformat())

    def by_source(when: datetime | str) -> int:
        return store.get(rid, source_as_of=when).version

    assert [by_source(at(m)) for m in (10, 19, 20, 41)] == [1, 1, 3, 5]
    assert by_source("2026-01-01T00:19:59.999999Z") == 1  # an RFC 3339 string, to the µs
    with pytest.raises(RecordDeleted):
        store.get(rid, source_as_of=at(35))
    with pytest.raises(RecordNotFound) as early:
        store.get(rid, source_as_of=at(9))
    assert type(early.value) is RecordNotFound
    # locate answers the same without reading the body (the read API's presigned URLs).
    assert store.locate(rid, as_of=moment(5)).version == 3
    with pytest.raises(RecordNotFound):
        store.get(backend.id("never-written"), as_of=moment(0))


def test_as_of_a_trimmed_or_purged_version_says_not_retained(backend):
    store, fake = timed_store(backend, retention=Retention(versions=1))
    rid = backend.id("trimmed")
    for n in range(4):  # versions 1-4, ten seconds apart: only 3 and 4 are retained
        store.put(rid, {"n": n}, updated_at=at(n))
        fake.now += 10
    assert [v.version for v in store.history(rid)] == [3, 4]
    for seconds in (-1, 0, 15):  # before version 1 is not retained either: 1 is gone
        with pytest.raises(VersionNotRetained, match="keeps versions 3 to 4"):
            store.get(rid, as_of=moment(seconds))
    assert store.get(rid, as_of=moment(20)).json() == {"n": 2}
    store.delete(rid, deleted_at=at(9), purge=True)  # version 5, at 40
    with pytest.raises(VersionNotRetained, match="purged"):
        store.get(rid, as_of=moment(35))
    with pytest.raises(RecordDeleted):
        store.get(rid, as_of=moment(40))


def test_a_version_is_current_from_the_latest_write_time_up_to_it(inprocess):
    """A writer whose clock lags cannot make its version current before the one it replaced."""
    store, fake = timed_store(inprocess)
    store.put("skew", {"n": 1}, updated_at=at(1))  # written at 0
    fake.now -= 30
    store.put("skew", {"n": 2}, updated_at=at(2))  # its writer says -30
    with pytest.raises(RecordNotFound, match="no version by"):  # not version 2 before 1
        store.get("skew", as_of=moment(-30))
    assert [store.get("skew", as_of=moment(s)).version for s in (0, 1)] == [2, 2]


def test_bad_moments_are_refused_before_any_request(backend):
    store = backend.store()
    meter = RequestMeter(backend.s3, backend.dynamodb)
    with meter.measure() as counts:
        with pytest.raises(InvalidInput, match="source_as_of"):
            store.get("x", as_of=at(0), source_as_of=at(0))
        with pytest.raises(InvalidInput, match="as_of: give a version or a time"):
            store.get("x", 1, as_of=at(0))
        with pytest.raises(InvalidTimestamp) as naive:
            store.get("x", as_of=datetime(2026, 1, 1))
        assert naive.value.field == "as_of"
        with pytest.raises(InvalidTimestamp):
            store.locate("x", source_as_of="yesterday")
        with pytest.raises(InvalidInput, match="b: must be a whole number"):
            store.diff("x", 1, 0)
    meter.close()
    assert dict(counts) == {}


def test_diff_of_json_versions_is_a_patch_that_applies(backend):
    store = backend.store()
    rid = backend.id("diff-json")
    small = {"title": "Moby-Dick", "tags": ["whale", "sea"], "year": 1851}
    store.put(rid, small, updated_at=at(1))
    store.put(rid, {**small, "tags": ["whale", "ship", "sea"], "year": 1851.0}, updated_at=at(2))
    store.put(rid, big_json(1), updated_at=at(3))  # S3
    store.put(rid, big_json(2), updated_at=at(4))  # S3
    for a, b in [(1, 2), (2, 1), (2, 3), (3, 4), (1, 4), (4, 4)]:
        diff = store.diff(rid, a, b)
        old, new = (store.get(rid, n).json() for n in (a, b))
        assert diff.kind == "json" and (diff.old.version, diff.new.version) == (a, b)
        assert json.dumps(jsonpatch.apply_patch(old, diff.patch)) == json.dumps(new)
        assert diff.body_changed == (a != b)
    assert store.diff(rid, 1, 2).patch == [
        {"op": "add", "path": "/tags/1", "value": "ship"},
        {"op": "replace", "path": "/year", "value": 1851.0},
    ]
    answer = store.diff(rid, 1, 2).as_json()
    assert json.loads(json.dumps(answer)) == answer  # JSON as it is
    assert answer["from"]["updated_at"] == at(1).isoformat()
    assert set(answer) == {
        *("id", "from", "to", "kind", "body_changed", "patch", "parts"),
        *("patch_omitted", "reason"),
    }
    assert answer["patch_omitted"] is answer["reason"] is None


def test_diff_of_opaque_versions_says_what_differs_with_sizes_and_hashes(backend):
    store = backend.store()
    rid = backend.id("diff-opaque")
    scan, ocr = large(5), b"page one"
    store.put(rid, b"v1", updated_at=at(1), content_type="text/plain", parts={"scan": scan})
    store.put(rid, b"v1", updated_at=at(2), content_type="text/plain",
              parts={"scan": scan, "ocr": ocr})  # fmt: skip
    store.put(rid, large(6), updated_at=at(3), parts={"ocr": b"page two"})
    one_two = store.diff(rid, 1, 2)
    assert (one_two.kind, one_two.body_changed, one_two.patch) == ("opaque", False, None)
    assert {n: c.change for n, c in one_two.parts.items()} == {"ocr": "added", "scan": "same"}
    two_three = store.diff(rid, 2, 3)
    assert two_three.body_changed
    assert (two_three.old.size, two_three.new.size) == (2, len(large(6)))
    assert two_three.new.body_hash == hashlib.sha256(large(6)).hexdigest()
    assert two_three.old.content_hash != two_three.old.body_hash  # with parts: the manifest's
    assert {n: c.change for n, c in two_three.parts.items()} == {
        "ocr": "changed",
        "scan": "removed",
    }
    ocr_change = two_three.parts["ocr"]
    assert ocr_change.old == {
        "content_hash": hashlib.sha256(ocr).hexdigest(),
        "size": len(ocr),
        "content_type": "application/octet-stream",
    }
    assert ocr_change.new["content_hash"] == hashlib.sha256(b"page two").hexdigest()
    assert two_three.parts["scan"].new is None


def test_diff_of_a_version_not_retained_or_a_delete_is_a_typed_error(backend):
    store = backend.store(retention=Retention(versions=1))
    rid = backend.id("diff-gone")
    for n in range(3):
        store.put(rid, {"n": n}, updated_at=at(n))
    store.delete(rid, deleted_at=at(9))
    with pytest.raises(VersionNotRetained, match="version 1 not found: not retained"):
        store.diff(rid, 1, 3)
    with pytest.raises(RecordNotFound, match="that version is a delete"):
        store.diff(rid, 3, 4)
    with pytest.raises(RecordNotFound):
        store.diff(backend.id("diff-unknown"), 1, 2)
    with pytest.raises(VersionNotRetained):  # get(version=) raises the same type
        store.get(rid, 1)


def test_requests_per_as_of_read_and_per_diff(backend):
    """As-of: one GetItem of the whole item (history included), plus the body's GetObject
    when it is in S3. Diff: one GetItem, plus one GetObject per JSON body in S3 when the two
    bodies differ; nothing more for opaque bodies or equal ones."""
    store = backend.store()
    small, big, raw = (backend.id(n) for n in ("cost-small", "cost-big", "cost-raw"))
    for n in (1, 2):
        store.put(small, {"n": n}, updated_at=at(n))
        store.put(big, big_json(n), updated_at=at(n))
        store.put(raw, large(n), updated_at=at(n))
    now = datetime.now(UTC) + timedelta(days=1)
    meter = RequestMeter(backend.s3, backend.dynamodb)
    cases = [
        ("as-of get, inline", lambda: store.get(small, as_of=now), {"GetItem": 1}),
        ("as-of get, S3", lambda: store.get(big, as_of=now), {"GetItem": 1, "GetObject": 1}),
        ("source-as-of get", lambda: store.get(small, source_as_of=at(1)), {"GetItem": 1}),
        ("as-of locate", lambda: store.locate(big, as_of=now), {"GetItem": 1}),
        ("diff, JSON inline", lambda: store.diff(small, 1, 2), {"GetItem": 1}),
        ("diff, JSON in S3", lambda: store.diff(big, 1, 2), {"GetItem": 1, "GetObject": 2}),
        ("diff, same version", lambda: store.diff(big, 2, 2), {"GetItem": 1}),
        ("diff, opaque in S3", lambda: store.diff(raw, 1, 2), {"GetItem": 1}),
    ]
    for name, operation, expected in cases:
        with meter.measure() as counts:
            operation()
        assert dict(counts) == expected, name
    meter.close()
