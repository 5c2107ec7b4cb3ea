"""Several large parts per record (docs/design.md, "Parts"): the store's contract for parts, on
every backend, and the collector's protocol and crashes between one part's upload and the next.

A part is content-addressed and offloaded on its own (inline when small, by the body's rule),
uploaded only when the current version does not already reference it; the version's hash (its
ordering key and ETag) is its manifest's, so it covers the JSON and every part.
"""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest

from vhs import BodyHashMismatch, InvalidInput, Retention, StoreConfig, VersionedHybridStore
from vhs.bodies.parts import MAX_PARTS, manifest_hash
from vhs.errors import InvalidPart, PartNotFound, PartTooLarge
from vhs.index.codec import BODY_HASH, PARTS
from vhs.index.size import entry_size
from vhs.maintenance.gc import GarbageCollector
from vhs_ops.admin.verify import verify
from vhs_testing.condemnation import SKEW, FakeTime, condemn
from vhs_testing.faults import Crash, Fault, FaultInjector
from vhs_testing.invariants import check_collected, snapshot
from vhs_testing.records import at, large

SCAN = large(11, 200_000)
OCR = b"the quick brown fox " * 1000  # 20 KB, compresses to well under the inline threshold
THUMB = large(12, 30_000)


def count_puts(store):
    """S3 PutObject calls made through `store`'s client, counted with a botocore event hook."""
    calls: list[str] = []
    store.bodies.s3.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: calls.append(params["Key"])
    )
    return calls


def s3_keys(backend) -> set[str]:
    pages = backend.s3.get_paginator("list_objects_v2").paginate(Bucket=backend.bucket_name)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def raw_current(backend, rid: str) -> dict:
    item = backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    )["Item"]
    return item["c"]["L"][0]["M"]


# --- put, get, history ------------------------------------------------------------------------


def test_parts_are_stored_read_lazily_and_covered_by_history(backend):
    store = backend.store()
    rid = backend.id("scan-1")
    first = store.put(rid, {"title": "a"}, updated_at=at(1), parts={"scan": SCAN, "ocr": OCR})
    assert first.outcome == "stored" and first.version == 1
    assert first.body_hash == hashlib.sha256(b'{"title":"a"}').hexdigest()
    assert first.content_hash != first.body_hash  # the version's hash is its manifest's
    assert first.parts["scan"].location == (
        f"s3://{backend.bucket_name}/{store.body_key(rid, hashlib.sha256(SCAN).hexdigest())}"
    )
    assert first.parts["ocr"].location == "inline"
    second = store.put(
        rid,
        {"title": "b"},
        updated_at=at(2),
        parts={"scan": (io.BytesIO(THUMB), "image/tiff"), "ocr": OCR},
    )
    assert second.version == 2

    gets: list[str] = []
    backend.s3.meta.events.register("before-call.s3.GetObject", lambda **_: gets.append("x"))
    record = store.get(rid)
    assert record.json() == {"title": "b"} and sorted(record.parts) == ["ocr", "scan"]
    assert record.parts["scan"].content_type == "image/tiff"
    assert gets == []  # the parts are read only when asked for
    assert record.part("scan") == THUMB and record.part("ocr") == OCR
    assert len(gets) == 1
    with pytest.raises(PartNotFound):
        record.part("thumbnail")

    old = store.get(rid, version=1)
    assert old.json() == {"title": "a"} and old.part("scan") == SCAN and old.part("ocr") == OCR
    history = store.history(rid)
    assert [(h.version, sorted(h.parts)) for h in history] == [
        (1, ["ocr", "scan"]),
        (2, ["ocr", "scan"]),
    ]
    assert history[0].parts["scan"].content_hash == hashlib.sha256(SCAN).hexdigest()
    assert history[1].content_hash == second.content_hash == record.content_hash


def test_a_record_without_parts_keeps_todays_item_and_hash(backend):
    store = backend.store()
    rid = backend.id("plain")
    result = store.put(rid, {"a": 1}, updated_at=at(1), parts={})
    assert result.content_hash == hashlib.sha256(b'{"a":1}').hexdigest()
    assert result.body_hash is None and not result.parts
    current = raw_current(backend, rid)
    assert BODY_HASH not in current and PARTS not in current
    assert store.get(rid).parts == {}


def test_a_part_whose_object_is_damaged_is_refused_on_read(backend):
    store = backend.store()
    rid = backend.id("damaged")
    result = store.put(rid, {"a": 1}, updated_at=at(1), parts={"scan": SCAN})
    key = result.parts["scan"].location.split("/", 3)[3]
    backend.s3.put_object(Bucket=backend.bucket_name, Key=key, Body=b"not the scan")
    record = store.get(rid)  # the JSON is fine
    with pytest.raises(BodyHashMismatch):
        record.part("scan")


# --- uploaded only when it changed --------------------------------------------------------------


def test_an_update_of_the_json_alone_uploads_nothing(backend):
    store = backend.store()
    rid = backend.id("json-only")
    puts = count_puts(store)
    store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN, "thumb": THUMB})
    assert len(puts) == 2
    result = store.put(rid, {"v": 2}, updated_at=at(2), parts={"scan": SCAN, "thumb": THUMB})
    assert result.outcome == "stored" and len(puts) == 2
    # One part changed: only it goes up.
    store.put(rid, {"v": 2}, updated_at=at(3), parts={"scan": SCAN, "thumb": large(13, 30_000)})
    assert len(puts) == 3 and puts[-1].endswith(hashlib.sha256(large(13, 30_000)).hexdigest())
    # A duplicate and a stale put upload nothing either.
    store.put(rid, {"v": 2}, updated_at=at(3), parts={"scan": SCAN, "thumb": large(13, 30_000)})
    stale = store.put(rid, {"v": 0}, updated_at=at(0), parts={"scan": large(14)})
    assert stale.outcome == "stale" and len(puts) == 3
    assert store.get(rid).part("thumb") == large(13, 30_000)


def test_an_unchanged_inline_part_is_held_once_however_many_versions_share_it(backend):
    store = backend.store()
    rid = backend.id("shared")
    for n in range(1, 5):
        store.put(rid, {"v": n}, updated_at=at(n), parts={"ocr": OCR})
    store.put(rid, {"v": 5}, updated_at=at(5), parts={"ocr": OCR + b"!"})
    raw = backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    )["Item"]
    entries = [*raw["p"]["L"], *raw["c"]["L"]]
    with_bytes = [e["M"]["pt"]["M"]["ocr"]["M"].get("b") is not None for e in entries]
    # Versions 1-3 share version 4's bytes; 4 holds them (5 changed the part); 5 its own.
    assert with_bytes == [False, False, False, True, True]
    for n in range(1, 5):
        assert store.get(rid, version=n).part("ocr") == OCR
    assert store.get(rid).part("ocr") == OCR + b"!"
    assert verify(store, deep=True).ok


# --- order --------------------------------------------------------------------------------------


def test_the_version_hash_covers_every_part_whatever_order_they_come_in(backend):
    store = backend.store()
    one = {"scan": SCAN, "ocr": OCR, "thumb": THUMB}
    other = dict(reversed(list(one.items())))
    a = store.put(backend.id("o1"), {"x": 1}, updated_at=at(1), parts=one)
    b = store.put(backend.id("o2"), {"x": 1}, updated_at=at(1), parts=other)
    assert a.content_hash == b.content_hash
    # A change to any part, or to a part's content type, is another version.
    c = store.put(backend.id("o3"), {"x": 1}, updated_at=at(1), parts={**one, "ocr": OCR + b"."})
    d = store.put(
        backend.id("o4"), {"x": 1}, updated_at=at(1), parts={**one, "ocr": (OCR, "text/plain")}
    )
    assert len({a.content_hash, c.content_hash, d.content_hash}) == 3


def test_ties_between_versions_with_parts_do_not_depend_on_arrival_order(backend):
    store = backend.store()
    versions = [
        ({"x": 1}, {"scan": SCAN, "ocr": OCR}),
        ({"x": 1}, {"scan": THUMB, "ocr": OCR}),
        ({"x": 1}, {"ocr": OCR, "scan": SCAN, "extra": b"e"}),
    ]
    finals = []
    for name, order in (("t1", versions), ("t2", list(reversed(versions)))):
        rid = backend.id(name)
        for record, parts in order:
            store.put(rid, record, updated_at=at(1), parts=parts)
        current = store.get(rid)
        finals.append((current.content_hash, sorted(current.parts)))
    assert finals[0] == finals[1]
    expected = max(
        manifest_hash(
            hashlib.sha256(b'{"x":1}').hexdigest(),
            "application/json",
            [_Part(n, v) for n, v in parts.items()],
        )
        for _, parts in versions
    )
    assert finals[0][0] == expected


class _Part:
    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.content_hash = hashlib.sha256(data).hexdigest()
        self.content_type = "application/octet-stream"


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "field"),
    [
        ({"Scan": b"x"}, "parts"),
        ({"": b"x"}, "parts"),
        ({"a/b": b"x"}, "parts"),
        ({".hidden": b"x"}, "parts"),
        ({"x" * 64: b"x"}, "parts"),
        ({f"p{i}": b"x" for i in range(MAX_PARTS + 1)}, "parts"),
        ({"scan": {"not": "bytes"}}, "parts.scan"),
        ({"scan": "text"}, "parts.scan"),
        ({"scan": (b"x", "")}, "parts.scan.content_type"),
        ({"scan": (b"x",)}, "parts.scan"),
        (["scan"], "parts"),
    ],
)
def test_bad_parts_are_refused_before_anything_is_written(parts, field):
    with pytest.raises(InvalidPart) as raised:
        offline_store().put("bad", {"a": 1}, updated_at=at(1), parts=parts)
    assert isinstance(raised.value, InvalidInput) and raised.value.field == field


def test_a_part_over_the_size_limit_is_refused():
    with pytest.raises(PartTooLarge) as raised:
        offline_store(max_body_size=1000).put(
            "big", {"a": 1}, updated_at=at(1), parts={"scan": b"x" * 1001}
        )
    assert raised.value.field == "parts.scan" and raised.value.limit == 1000


def test_parts_whose_metadata_the_retention_leaves_no_room_for_are_refused():
    # 211 held entries of up to 1 KB fill the item budget (docs/design.md, "Parts"): each
    # entry may take 1,481 bytes by DynamoDB's rules, and 16 parts' names and hashes, even
    # with every part moved to S3, need more.
    store = offline_store(inline_threshold=1024, retention=Retention(140))
    assert store.entry_budget < 1500
    parts = {f"scan-page-{i:02d}": b"x" for i in range(MAX_PARTS)}
    with pytest.raises(InvalidPart) as raised:
        store.put("crowded", {"a": 1}, updated_at=at(1), parts=parts)
    assert raised.value.field == "parts" and "retention" in raised.value.reason


def test_inline_parts_move_to_s3_to_keep_a_version_within_its_share_of_the_item(inprocess):
    store = inprocess.store(inline_threshold=1024, retention=Retention(140))
    # Each fits the threshold alone, and the three fit it together; with their content types
    # (counted as DynamoDB counts them) they do not fit the entry's share of the item.
    long_type = "application/x-" + "t" * 200
    parts = {f"p{i}": (large(30 + i, 300), long_type) for i in range(3)}
    result = store.put("roomy", {"a": 1}, updated_at=at(1), parts=parts)
    locations = [p.location == "inline" for p in result.parts.values()]
    assert locations.count(True) < 3 and store.get("roomy").part("p2") == parts["p2"][0]
    assert entry_size(store.index.read("roomy").current) <= store.entry_budget


class _NoRequests:
    """A client that fails the test if the store sends it anything."""

    def __getattr__(self, name: str):
        raise AssertionError(f"a request ({name}) was made for bad input")


def offline_store(**options) -> VersionedHybridStore:
    return VersionedHybridStore(
        "table",
        "bucket",
        StoreConfig(**options),
        s3_client=_NoRequests(),
        dynamodb_client=_NoRequests(),
    )


# --- deletes, retention and the collector -------------------------------------------------------


def collect(store, backend, clock) -> None:
    collector = GarbageCollector(store, grace=timedelta(0), clock=clock)
    report = collector.run()
    assert report.ok


def test_parts_of_versions_retention_dropped_are_collected(backend):
    fake = FakeTime()
    store = backend.store(retention=Retention(1), clock=fake.clock)
    rid = backend.id("retained")
    store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN})
    store.put(rid, {"v": 2}, updated_at=at(2), parts={"scan": THUMB})
    store.put(rid, {"v": 3}, updated_at=at(3), parts={"scan": large(15)})
    fake.now += 3600
    collect(store, backend, fake.clock)
    state = snapshot(backend, store, [rid])
    check_collected(state)
    assert state.objects == {
        store.body_key(rid, hashlib.sha256(p).hexdigest()) for p in (THUMB, large(15))
    }
    assert store.get(rid, version=2).part("scan") == THUMB
    # A part shared by a retained version is kept however many versions dropped it.
    assert verify(store).ok


def test_a_purge_leaves_no_part_behind(backend):
    fake = FakeTime()
    store = backend.store(clock=fake.clock)
    rid = backend.id("purged")
    store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN, "thumb": THUMB})
    store.put(rid, large(16), updated_at=at(2), parts={"scan": SCAN})
    store.delete(rid, deleted_at=at(3))
    fake.now += 3600
    collect(store, backend, fake.clock)
    assert len(s3_keys(backend)) == 3  # a plain delete keeps the history readable
    assert store.get(rid, version=1).part("thumb") == THUMB
    store.delete(rid, deleted_at=at(3), purge=True)
    fake.now += 3600
    collect(store, backend, fake.clock)
    assert s3_keys(backend) == set()


def test_verify_checks_every_part(backend):
    store = backend.store()
    rid = backend.id("verified")
    result = store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN, "ocr": OCR})
    report = verify(store, deep=True)
    assert report.ok and report.s3_objects == 1 and report.versions == 1
    backend.s3.delete_object(
        Bucket=backend.bucket_name, Key=result.parts["scan"].location.split("/", 3)[3]
    )
    report = verify(store)
    assert [f.kind for f in report.findings] == ["dangling"]


# --- the collector's protocol: a part not uploaded again ----------------------------------------


def test_a_part_condemned_between_the_read_and_the_write_is_uploaded_again(inprocess):
    """The writer reads the item, finds the scan referenced by the current version and plans
    not to upload it; before its write, another writer's version drops the scan from
    retention and the collector condemns it and deletes it. The write must not point at the
    deleted object: it uploads the scan again, after the condemnation's deadline."""
    backend = inprocess
    fake = FakeTime()
    store = backend.store(
        clock=fake.clock, clock_skew=timedelta(seconds=SKEW), retention=Retention(0)
    )
    store.writer.sleep = fake.sleep
    other = backend.store(clock=fake.clock, retention=Retention(0))
    rid = backend.id("condemned-part")
    store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN})
    scan_hash = hashlib.sha256(SCAN).hexdigest()
    key = store.body_key(rid, scan_hash)

    read = store.index.read_for_write

    def read_then_race(id: str, **options) -> dict:
        raw = read(id, **options)
        other.put(rid, {"v": 2}, updated_at=at(2), parts={"scan": THUMB})
        condemn(backend, rid, scan_hash, fake.now + 300)
        backend.s3.delete_object(Bucket=backend.bucket_name, Key=key)
        store.index.read_for_write = read  # only the first read races
        return raw

    store.index.read_for_write = read_then_race
    puts = count_puts(store)
    result = store.put(rid, {"v": 3}, updated_at=at(3), parts={"scan": SCAN})
    assert result.outcome == "stored" and result.version == 3
    assert fake.slept and fake.slept[-1] >= 300 + SKEW  # it waited the deadline out
    assert puts and puts[-1] == key  # and uploaded the scan again
    assert store.get(rid).part("scan") == SCAN


def test_a_standing_condemnation_of_a_reused_part_makes_the_writer_upload_it(inprocess):
    """The belt to the braces above: a reused part the collector condemned after the current
    version was written is refused by the write's condition (as an upload's would be)."""
    backend = inprocess
    fake = FakeTime()
    store = backend.store(clock=fake.clock, clock_skew=timedelta(seconds=SKEW))
    store.writer.sleep = fake.sleep
    rid = backend.id("reused-condemned")
    store.put(rid, {"v": 1}, updated_at=at(1), parts={"scan": SCAN})
    scan_hash = hashlib.sha256(SCAN).hexdigest()
    condemn(backend, rid, scan_hash, fake.now + 300)
    puts = count_puts(store)
    result = store.put(rid, {"v": 2}, updated_at=at(2), parts={"scan": SCAN})
    assert result.outcome == "stored"
    assert fake.slept == [300 + SKEW + 1]
    assert puts == [store.body_key(rid, scan_hash)]


# --- crashes between the upload of one part and the next ----------------------------------------

PARTS3 = {"a": large(21, 5000), "b": large(22, 5000), "c": large(23, 5000)}


def test_a_crash_between_part_uploads_leaves_only_orphans(server, no_backoff):
    """Parts go up one after another, then one DynamoDB write: a crash after part k of n
    leaves objects nothing references (the collector's), never a pointer to a missing one;
    a restarted writer then completes the put."""
    reader = server.store(inline_threshold=64)
    reader.put("a", {"v": 1}, updated_at=at(1), parts={"a": large(20, 5000)})
    before = snapshot(server, reader, ["a"])
    # GetItem, PutObject x3, UpdateItem: crash just after each call in turn.
    for index in range(5):
        s3, dynamodb = server.new_client("s3"), server.new_client("dynamodb")
        injector = FaultInjector([s3, dynamodb], Fault("crash_after", index))
        writer = server.store(inline_threshold=64, s3_client=s3, dynamodb_client=dynamodb)
        with pytest.raises(Crash):
            writer.put("a", {"v": 2}, updated_at=at(2), parts=PARTS3)
        injector.close()
        assert injector.calls == ["GetItem", *["PutObject"] * 3, "UpdateItem"][: index + 1]
        state = snapshot(server, reader, ["a"])
        assert state.retained <= state.objects, "a retained version points at a missing part"
        committed = index == 4
        if not committed:
            assert state.held == before.held
            assert reader.get("a").part("a") == large(20, 5000)
            assert len(state.orphans) == min(index, 3)  # the parts that went up
        else:
            assert reader.get("a").part("c") == PARTS3["c"]
        # Leave the store as it was for the next crash point (the orphans stay for the GC).
        if committed:
            break
    result = server.store(inline_threshold=64).put("a", {"v": 2}, updated_at=at(2), parts=PARTS3)
    assert result.outcome == "unchanged" and result.version == 2
    assert all(reader.get("a").part(n) == v for n, v in PARTS3.items())


# --- the change feed ----------------------------------------------------------------------------


def test_a_notification_lists_the_parts_and_only_when_there_are_parts(inprocess):
    from vhs.changes.feed import changes_from_images

    store = inprocess.store()
    store.put("p", {"v": 1}, updated_at=at(1), parts={"scan": SCAN, "ocr": (OCR, "text/plain")})
    store.put("q", {"v": 1}, updated_at=at(1))
    images = {
        rid: inprocess.dynamodb.get_item(TableName=inprocess.table_name, Key={"id": {"S": rid}})[
            "Item"
        ]
        for rid in ("p", "q")
    }
    bucket = inprocess.bucket_name
    [with_parts] = changes_from_images(None, images["p"], bucket=bucket).changes
    message = with_parts.message()
    assert message["content_hash"] == store.get("p").content_hash
    assert message["parts"] == {
        "ocr": {
            "content_hash": hashlib.sha256(OCR).hexdigest(),
            "size": len(OCR),
            "content_type": "text/plain",
            "location": "inline",
            "path": "/records/p/versions/1/parts/ocr",
        },
        "scan": {
            "content_hash": hashlib.sha256(SCAN).hexdigest(),
            "size": len(SCAN),
            "content_type": "application/octet-stream",
            "location": f"s3://{bucket}/{store.body_key('p', hashlib.sha256(SCAN).hexdigest())}",
            "path": "/records/p/versions/1/parts/scan",
        },
    }
    [plain] = changes_from_images(None, images["q"], bucket=bucket).changes
    assert "parts" not in plain.message()
