"""`vhs verify`: every retained pointer leads to the body it promises.

Corruption is injected the way it happens in real life, by writing to S3 and DynamoDB behind
the store's back, and each injected problem must be found exactly once; a clean store must
yield nothing. Runs on every backend (in-process moto, moto's server, and live AWS when
enabled).
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import time
import zlib
from typing import Any

import pytest

from vhs import Retention, VersionedHybridStore
from vhs_ops.admin.findings import Finding, FindingKind, VerifyProgress
from vhs_ops.admin.verify import Verifier, verify
from vhs_testing.backends import Backend

T = "2026-11-01T00:00:00Z"


def at(n: int) -> str:
    return f"2026-11-{n:02d}T00:00:00Z"


def big(seed: int, size: int = 20_000) -> bytes:
    """Incompressible bytes: stored in S3, not inline."""
    return random.Random(seed).randbytes(size)


def key_of(store: VersionedHybridStore, id: str, data: bytes) -> str:
    return store.body_key(id, hashlib.sha256(data).hexdigest())


def overwrite(backend: Backend, store: VersionedHybridStore, key: str, data: bytes, **kw) -> None:
    """Replace an object's bytes behind the store's back, keeping its metadata."""
    head = backend.s3.head_object(Bucket=store.bucket_name, Key=key)
    backend.s3.put_object(
        Bucket=store.bucket_name, Key=key, Body=data, Metadata=head["Metadata"], **kw
    )


def check(backend: Backend, store: VersionedHybridStore, data: dict[str, Any], **kw: Any):
    """Verify the whole table; on live AWS, whose table other runs share, only our ids."""
    ids = list(data["ids"].values()) if backend.name == "live" else None
    return verify(store, ids=ids, **kw)


def kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return sorted((str(f.kind), f.id) for f in findings)


@pytest.fixture
def populated(backend: Backend) -> tuple[Backend, VersionedHybridStore, dict[str, Any]]:
    """A store with inline and S3 bodies, several versions, a shared body and a delete."""
    store = backend.store()
    ids = {name: backend.id(name) for name in ("small", "large", "mixed", "shared", "gone")}
    bodies: dict[str, Any] = {}
    store.put(ids["small"], {"title": "Moby-Dick"}, updated_at=at(1))
    store.put(ids["small"], {"title": "Moby Dick"}, updated_at=at(2))
    bodies["large"] = big(1)
    store.put(ids["large"], bodies["large"], updated_at=at(1))
    bodies["mixed_v1"] = big(2)
    store.put(ids["mixed"], bodies["mixed_v1"], updated_at=at(1))
    store.put(ids["mixed"], {"now": "inline"}, updated_at=at(2))
    bodies["shared"] = big(3)
    store.put(ids["shared"], bodies["shared"], updated_at=at(1))  # v1
    store.put(ids["shared"], {"between": True}, updated_at=at(2))  # v2
    store.put(ids["shared"], bodies["shared"], updated_at=at(3))  # v3: the same object as v1
    store.put(ids["gone"], big(4), updated_at=at(1))
    store.delete(ids["gone"], deleted_at=at(2))
    return backend, store, {"ids": ids, "bodies": bodies}


def test_a_clean_store_has_no_findings_and_everything_is_counted(populated):
    backend, store, data = populated
    seen: list[VerifyProgress] = []
    report = check(backend, store, data, progress=seen.append)
    assert report.ok and report.findings == [] and report.by_kind == {}
    if backend.name != "live":  # live tables hold other tests' items too
        assert report.items == 5
        # small: 2 inline; large: 1 s3; mixed: 1 s3 + 1 inline; shared: 2 s3 (one object)
        # + 1 inline; gone: 1 s3 + 1 delete
        assert (report.versions, report.inline, report.s3, report.deletes) == (10, 4, 5, 1)
        assert report.s3_objects == 4
        assert seen[-1].items == 5 and seen[-1].versions == 10 and seen[-1].findings == 0
    # The store uploads with ChecksumSHA256, so a HEAD confirms every body's content.
    assert report.unconfirmed == 0
    assert check(backend, store, data, deep=True).ok


def test_each_injected_corruption_is_found_exactly_once(populated):
    backend, store, data = populated
    ids, bodies = data["ids"], data["bodies"]
    s3, bucket = backend.s3, store.bucket_name

    # S3: other bytes of another size (the metadata kept): the size gives it away.
    overwrite(backend, store, key_of(store, ids["large"], bodies["large"]), b"not the body")
    # S3: delete a retained version's object (v1 of "mixed", held in the history).
    s3.delete_object(Bucket=bucket, Key=key_of(store, ids["mixed"], bodies["mixed_v1"]))
    # S3: the metadata names another id (content untouched).
    shared_key = key_of(store, ids["shared"], bodies["shared"])
    s3.copy_object(
        Bucket=bucket,
        Key=shared_key,
        CopySource={"Bucket": bucket, "Key": shared_key},
        Metadata={"vhs-id": base64.urlsafe_b64encode(b"someone-else").decode()},
        MetadataDirective="REPLACE",
        ChecksumAlgorithm="SHA256",
    )
    # DynamoDB: the current inline body of "small" replaced by another (valid zlib) body.
    backend.dynamodb.update_item(
        TableName=store.table_name,
        Key={"id": {"S": ids["small"]}},
        UpdateExpression="SET c[0].b = :b, c[0].z = :z",
        ExpressionAttributeValues={
            ":b": {"B": zlib.compress(b'{"title":"Billy Budd"}')},
            ":z": {"S": "zlib"},
        },
    )

    report = check(backend, store, data)
    assert kinds(report.findings) == sorted(
        [
            ("size_mismatch", ids["large"]),
            ("dangling", ids["mixed"]),
            ("metadata_mismatch", ids["shared"]),
            ("hash_mismatch", ids["small"]),
        ]
    )
    assert report.findings_total == 4 and not report.ok
    by_id = {f.id: f for f in report.findings}
    assert by_id[ids["mixed"]].version == 1  # a retained, not current, version
    assert by_id[ids["mixed"]].location.startswith(f"s3://{bucket}/")
    assert by_id[ids["shared"]].versions == (1, 3)  # one object, two pointers: one finding
    assert "someone-else" in by_id[ids["shared"]].detail
    assert by_id[ids["small"]].version == 2
    assert by_id[ids["small"]].location.startswith("dynamodb://")


def test_other_bytes_of_the_same_size(populated):
    """S3's stored SHA-256 catches a rewrite that kept the size; without one only a deep
    verification (which reads and hashes the body) can, and the report says so."""
    backend, store, data = populated
    ids, bodies = data["ids"], data["bodies"]
    large_key = key_of(store, ids["large"], bodies["large"])
    overwrite(
        backend, store, large_key, os.urandom(len(bodies["large"])), ChecksumAlgorithm="SHA256"
    )
    report = check(backend, store, data)
    assert kinds(report.findings) == [("hash_mismatch", ids["large"])]
    assert "checksum" in report.findings[0].detail

    # Rewritten without a SHA-256 checksum: HEAD sees the right size and cannot tell.
    overwrite(
        backend, store, large_key, os.urandom(len(bodies["large"])), ChecksumAlgorithm="CRC32"
    )
    shallow = check(backend, store, data)
    assert shallow.ok and shallow.unconfirmed == 1
    deep = check(backend, store, data, deep=True)
    assert kinds(deep.findings) == [("hash_mismatch", ids["large"])]
    assert "hashes to" in deep.findings[0].detail
    assert deep.unconfirmed == 0


def test_a_corrupt_retained_inline_body_and_an_unparseable_item(backend):
    store = backend.store()
    id, junk = backend.id("hist"), backend.id("junk")
    store.put(id, {"n": 1}, updated_at=at(1))
    store.put(id, {"n": 2}, updated_at=at(2))
    backend.dynamodb.update_item(
        TableName=store.table_name,
        Key={"id": {"S": id}},
        UpdateExpression="SET p[0].b = :b, p[0].z = :z",
        ExpressionAttributeValues={":b": {"B": b"\x78\x9cnot zlib at all"}, ":z": {"S": "zlib"}},
    )
    backend.dynamodb.put_item(
        TableName=store.table_name,
        Item={"id": {"S": junk}, "v": {"N": "1"}, "c": {"L": [{"M": {"t": {"S": T}}}]}},
    )
    report = verify(store, ids=[id, junk])
    assert kinds(report.findings) == sorted([("hash_mismatch", id), ("unparseable", junk)])
    inline = next(f for f in report.findings if f.id == id)
    assert inline.version == 1 and "does not decode" in inline.detail


def test_only_retained_versions_are_checked(backend):
    """A version retention no longer keeps may have lost its body to the collector: that is
    not a finding. Items with only the collector's markers are not findings either."""
    store = backend.store(retention=Retention(versions=1))
    id, marked = backend.id("r"), backend.id("marked")
    old = big(10)
    store.put(id, old, updated_at=at(1))
    store.put(id, big(11), updated_at=at(2))
    store.put(id, big(12), updated_at=at(3))  # version 1 is no longer retained
    backend.s3.delete_object(Bucket=store.bucket_name, Key=key_of(store, id, old))
    store.index.condemn(marked, ["0" * 64], time.time() + 300, None)
    report = verify(store, ids=[id, marked])
    assert report.ok, report.findings
    assert (report.items, report.unversioned, report.versions, report.s3) == (2, 1, 2, 2)


def test_named_ids_that_do_not_exist_are_reported(backend):
    store = backend.store()
    present, absent = backend.id("here"), backend.id("nowhere")
    store.put(present, {"x": 1}, updated_at=T)
    report = verify(store, ids=[present, absent])
    assert kinds(report.findings) == [("not_found", absent)]
    assert report.items == 1


def test_a_pointer_released_while_verifying_is_not_reported(server):
    """The collector deletes a body the moment retention releases it (here: between the scan
    and the HEAD). The verifier re-reads the item before it calls the pointer dangling."""
    store = server.store(retention=Retention(versions=0))
    id = server.id("racing")
    body = big(20)
    store.put(id, body, updated_at=at(1))
    key = key_of(store, id, body)
    s3 = server.new_client("s3")
    fired: list[str] = []

    def writer_and_collector_get_there_first(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == key and not fired:
            fired.append(key)
            store.put(id, {"small": "now"}, updated_at=at(2))  # v1 no longer retained
            s3.delete_object(Bucket=store.bucket_name, Key=key)  # and collected

    events = store.bodies.s3.meta.events
    events.register("provide-client-params.s3.HeadObject", writer_and_collector_get_there_first)
    try:
        report = verify(store)
    finally:
        events.unregister(
            "provide-client-params.s3.HeadObject", writer_and_collector_get_there_first
        )
    assert fired and report.ok and report.raced == 1


def test_findings_stream_to_the_callback_beyond_the_kept_ones(inprocess):
    store = inprocess.store()
    for n in range(5):
        id = inprocess.id(f"d{n}")
        body = big(100 + n)
        store.put(id, body, updated_at=T)
        inprocess.s3.delete_object(Bucket=store.bucket_name, Key=key_of(store, id, body))
    streamed: list[Finding] = []
    report = Verifier(store, max_findings=2, segments=3, workers=2, page_size=2).run(
        on_finding=streamed.append
    )
    assert report.findings_total == 5 and len(report.findings) == 2
    assert sorted(f.id for f in streamed) == sorted(inprocess.id(f"d{n}") for n in range(5))
    assert {f.kind for f in streamed} == {FindingKind.DANGLING}
    assert report.as_dict()["by_kind"] == {"dangling": 5}
