"""The zstd codec and its dictionaries (vhs/bodies/packing.py, vhs/bodies/dictionaries.py,
vhs_ops/admin/dictionaries.py; docs/design.md, "Dictionaries").

What is checked: each write keeps the smallest form at hand; a dictionary is content-addressed,
immutable, found by every reader and cached across stores in a process; new writes move to the
newest; every older body stays readable, through a later dictionary too; decoding is bounded
by the entry's recorded size; a missing dictionary is a typed error, never wrong bytes; the
collector never deletes one; a store without dictionaries writes and reads as it always did,
with no request more; and `vhs dictionary train` and `list`."""

from __future__ import annotations

import json
import random
import time
import uuid
import zlib
from collections import Counter
from typing import Any

import pytest

from vhs import BodyHashMismatch, Retention
from vhs.bodies.dictionaries import CURRENT, FOLDER, REFRESH_SECONDS, DictionaryStore
from vhs.bodies.packing import (
    DELTA,
    ZLIB,
    ZSTD,
    ZSTD_DELTA,
    Dictionary,
    compress,
    compress_against,
    decompress,
    pack,
    train,
)
from vhs.errors import DanglingPointer
from vhs.maintenance.gc import GarbageCollector
from vhs_testing.backends import Backend
from vhs_testing.cli import assert_documented
from vhs_testing.dictionaries import catalogue_record, publish_to, trained_dictionary
from vhs_testing.records import at


def record(n: int, seed: int = 1) -> dict[str, Any]:
    return catalogue_record(n, random.Random(seed * 1000 + n))


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def raw_entry(backend: Backend, rid: str, index: int | None = None) -> dict[str, Any]:
    item = backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]
    return item["c"]["L"][0]["M"] if index is None else item["p"]["L"][index]["M"]


class S3Calls:
    def __init__(self, s3: Any) -> None:
        self.counts: Counter[str] = Counter()
        s3.meta.events.register("before-call.s3", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[model.name] += 1


# --- the codec ------------------------------------------------------------------------------


def test_each_form_is_kept_only_where_it_is_the_smallest() -> None:
    dictionary = trained_dictionary()
    body = canonical(record(7))
    zlib_form = zlib.compress(body, 6)
    packed = compress(body, dictionary)
    assert (packed.codec, packed.dictionary) == (ZSTD, dictionary.id)
    assert len(packed.data) < len(zlib_form) < len(body)
    assert decompress(packed.data, ZSTD, len(body), dictionary=dictionary) == body
    # Without a dictionary, zlib; what compresses to nothing smaller, as it is.
    assert compress(body) == (zlib_form, ZLIB, None)
    noise = random.Random(3).randbytes(200)
    assert compress(noise, dictionary) == (noise, None, None)


def test_a_delta_is_the_smaller_of_zlibs_and_zstds_against_the_successor() -> None:
    old, new = canonical(record(1)), canonical({**record(1), "v": 99})
    zlib_only = compress_against(old, new)
    assert zlib_only.codec == DELTA
    either = compress_against(old, new, with_zstd=True)
    assert len(either.data) <= len(zlib_only.data)
    assert decompress(either.data, either.codec, len(old), successor=new) == old
    # Against another successor it decodes to other bytes (the reader's hash check refuses).
    other = canonical(record(2))
    zstd_form = compress_against(old, new, with_zstd=True)
    if zstd_form.codec == ZSTD_DELTA:
        with pytest.raises(ValueError):
            assert decompress(zstd_form.data, ZSTD_DELTA, len(old), successor=other) != old


def test_decoding_stops_at_the_recorded_size() -> None:
    dictionary = trained_dictionary()
    bomb = b"{" + b" " * 5_000_000 + b"}"
    packed = pack(bomb, ZSTD, dictionary)
    assert len(packed.data) < 1000
    assert len(decompress(packed.data, ZSTD, 100, dictionary=dictionary)) == 101
    assert decompress(packed.data, ZSTD, len(bomb), dictionary=dictionary) == bomb


def test_a_dictionary_is_named_by_its_content() -> None:
    dictionary = trained_dictionary()
    assert Dictionary(dictionary.content).id == dictionary.id
    assert Dictionary(dictionary.content, dictionary.id) == dictionary
    with pytest.raises(ValueError):
        Dictionary(dictionary.content + b"x", dictionary.id)


# --- a store that writes with dictionaries ------------------------------------------------------


def edition(n: int) -> dict[str, Any]:
    """Editions of one record of about 3 KB, each an edit of the one before."""
    items = [record(i, seed=2) for i in range(15)]
    return {**record(1), "items": items, "v": n, "notes": [*record(1)["notes"], f"Edition {n}"]}


def test_new_writes_use_the_newest_and_every_older_body_stays_readable(inprocess: Backend) -> None:
    clock = FakeMonotonic()
    plain = inprocess.store(retention=Retention(versions=10))
    plain.put("r", edition(0), updated_at=at(0))  # before any dictionary: zlib
    store = inprocess.store(retention=Retention(versions=10), dictionaries=True)
    store.dictionaries.clock = clock
    assert store.dictionaries.newest() is None
    store.put("r", edition(1), updated_at=at(1))  # none trained yet: zlib
    assert raw_entry(inprocess, "r")["z"]["S"] == ZLIB
    first = trained_dictionary()
    DictionaryStore(inprocess.s3, inprocess.bucket_name).publish(first)
    clock.now += REFRESH_SECONDS  # writers read the pointer at most once a refresh
    store.put("r", edition(2), updated_at=at(2))
    assert raw_entry(inprocess, "r")["zd"]["B"].hex() == first.id
    rng = random.Random(5)
    second = train([canonical(catalogue_record(n, rng)) for n in range(300)], 4096)
    DictionaryStore(inprocess.s3, inprocess.bucket_name).publish(second)
    store.put("r", edition(3), updated_at=at(3))
    assert raw_entry(inprocess, "r")["zd"]["B"].hex() == first.id  # not yet refreshed
    clock.now += REFRESH_SECONDS
    store.put("r", edition(4), updated_at=at(4))
    assert raw_entry(inprocess, "r")["zd"]["B"].hex() == second.id
    # Earlier versions are deltas against their successors: zstd's, where smaller than zlib's.
    # (The superseding write makes the delta: every one here was the zstd-writing store's.)
    assert [raw_entry(inprocess, "r", n)["z"]["S"] for n in range(4)] == ["D"] * 4
    # Every version reads back, in a store that writes without dictionaries too.
    for reader in (store, inprocess.store()):
        assert [reader.get("r", version=v).json() for v in range(1, 6)] == [
            edition(n) for n in range(5)
        ]


def test_a_refreshed_writer_reads_the_pointer_at_its_next_write(inprocess: Backend) -> None:
    store = inprocess.store(dictionaries=True)
    store.dictionaries.clock = FakeMonotonic()  # no refresh falls due by itself
    store.put("r", edition(1), updated_at=at(1))
    assert raw_entry(inprocess, "r")["z"]["S"] == ZLIB
    first = trained_dictionary()
    DictionaryStore(inprocess.s3, inprocess.bucket_name).publish(first)
    store.put("r", edition(2), updated_at=at(2))
    assert "zd" not in raw_entry(inprocess, "r")  # the pointer read before still holds
    store.dictionaries.refresh()
    store.put("r", edition(3), updated_at=at(3))
    assert raw_entry(inprocess, "r")["zd"]["B"].hex() == first.id


def test_a_store_without_dictionaries_asks_for_none_and_writes_zlib(inprocess: Backend) -> None:
    publish_to(inprocess.store())  # a dictionary exists; this store does not write with it
    store = inprocess.store()
    calls = S3Calls(inprocess.s3)
    for n in range(3):
        store.put("plain", record(n), updated_at=at(n))
    assert calls.counts == Counter()
    assert raw_entry(inprocess, "plain")["z"]["S"] == ZLIB
    assert {raw_entry(inprocess, "plain", n)["z"]["S"] for n in range(2)} == {"d"}


def test_dictionaries_are_fetched_once_a_process(inprocess: Backend) -> None:
    # A dictionary this process has never fetched (the cache outlives a test: a runner that
    # runs the suite twice in one process, as mutmut does, would find a fixed seed's cached).
    seed = uuid.uuid4().int % 1_000_000 + 100
    fresh = train([canonical(record(n, seed=seed)) for n in range(300)], 2048)
    folder = DictionaryStore(inprocess.s3, inprocess.bucket_name)
    for key, body in ((folder.key(fresh.id), fresh.content), (folder.key(CURRENT), fresh.id)):
        inprocess.s3.put_object(Bucket=inprocess.bucket_name, Key=key, Body=body)
    calls = S3Calls(inprocess.s3)
    writer = inprocess.store(dictionaries=True)
    writer.put("cached", record(1, seed=seed), updated_at=at(1))
    writer.put("cached", record(2, seed=seed), updated_at=at(2))
    assert raw_entry(inprocess, "cached")["zd"]["B"].hex() == fresh.id
    # New stores, as a Lambda makes on each invocation, read it from the process's cache.
    for _ in range(3):
        assert inprocess.store().get("cached", version=1).json() == record(1, seed=seed)
    assert calls.counts == Counter({"GetObject": 2})  # the pointer, then the dictionary, once


def test_a_missing_dictionary_is_a_typed_error_never_wrong_bytes(inprocess: Backend) -> None:
    # Trained, never published: there is nowhere to fetch it from.
    lost = train([canonical(record(n, seed=13)) for n in range(300)], 2048)
    store = inprocess.store()
    store.put("lost", record(1), updated_at=at(1))
    inprocess.dynamodb.update_item(
        TableName=inprocess.table_name,
        Key={"id": {"S": "lost"}},
        UpdateExpression="SET c[0].b = :b, c[0].z = :z, c[0].zd = :d",
        ExpressionAttributeValues={
            ":b": {"B": pack(canonical(record(1)), ZSTD, lost).data},
            ":z": {"S": "Z"},
            ":d": {"B": bytes.fromhex(lost.id)},
        },
    )
    with pytest.raises(BodyHashMismatch) as raised:
        store.get("lost")
    assert raised.value.actual == "(undecodable)"
    with pytest.raises(DanglingPointer):
        store.dictionaries.get(lost.id)


def test_a_dictionary_whose_content_is_not_its_id_is_refused(inprocess: Backend) -> None:
    store = publish_to(inprocess.store())
    dictionary = trained_dictionary()
    forged = Dictionary(dictionary.content + b"tampered")
    inprocess.s3.put_object(
        Bucket=inprocess.bucket_name, Key=store.dictionaries.key(forged.id), Body=b"other bytes"
    )
    with pytest.raises(BodyHashMismatch):
        DictionaryStore(inprocess.s3, inprocess.bucket_name).get(forged.id)


def test_the_collector_never_deletes_a_dictionary(inprocess: Backend) -> None:
    store = inprocess.store(dictionaries=True, retention=Retention(versions=0))
    publish_to(store)
    for n in range(4):
        store.put("collected", record(n), updated_at=at(n))
        store.put("big", random.Random(n).randbytes(40_000), updated_at=at(n))
    store.delete("collected", deleted_at=at(9), purge=True)
    report = GarbageCollector(store, clock=lambda: time.time() + 49 * 3600).run()
    assert report.deleted == 3  # the superseded large bodies went
    listed = inprocess.s3.list_objects_v2(Bucket=inprocess.bucket_name, Prefix=f"{FOLDER}/")
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(
        [store.dictionaries.key(trained_dictionary().id), f"{FOLDER}/{CURRENT}"]
    )


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- readers: the change feed, verify, the command line ---------------------------------------


def test_the_change_feed_patches_bodies_packed_with_a_dictionary(inprocess: Backend) -> None:
    from vhs.changes.feed import changes_from_images
    from vhs.changes.stream import event_image

    store = publish_to(inprocess.store(dictionaries=True))
    store.put("fed", edition(1), updated_at=at(1))
    item = inprocess.dynamodb.get_item(TableName=inprocess.table_name, Key={"id": {"S": "fed"}})
    before = item["Item"]
    store.put("fed", edition(2), updated_at=at(2))
    after = inprocess.dynamodb.get_item(TableName=inprocess.table_name, Key={"id": {"S": "fed"}})[
        "Item"
    ]
    assert after["c"]["L"][0]["M"]["z"]["S"] == "Z"
    images = (event_image(before), event_image(after))  # as a Lambda event carries them
    (change,) = changes_from_images(
        *images, bucket="b", dictionaries=DictionaryStore(inprocess.s3, "unused").get
    ).changes
    assert change.patch is not None and change.patch_omitted is None
    # A feed with no way to the dictionaries still notifies, saying why there is no patch.
    (blind,) = changes_from_images(*images, bucket="b").changes
    assert (blind.patch, blind.patch_omitted) == (None, "unreadable")


def test_verify_reads_what_a_dictionary_packed_and_names_a_missing_one(inprocess: Backend) -> None:
    from vhs_ops.admin.verify import verify

    store = publish_to(inprocess.store(dictionaries=True))
    for n in range(3):
        store.put("checked", edition(n), updated_at=at(n))
    report = verify(store)
    assert report.findings == [] and report.inline == 3
    inprocess.s3.delete_object(
        Bucket=inprocess.bucket_name, Key=store.dictionaries.key(trained_dictionary().id)
    )
    lost = train([canonical(record(n, seed=17)) for n in range(300)], 2048)
    inprocess.dynamodb.update_item(
        TableName=inprocess.table_name,
        Key={"id": {"S": "checked"}},
        UpdateExpression="SET c[0].b = :b, c[0].zd = :d",
        ExpressionAttributeValues={
            ":b": {"B": pack(canonical(edition(2)), ZSTD, lost).data},
            ":d": {"B": bytes.fromhex(lost.id)},
        },
    )
    (finding,) = verify(store).findings
    assert lost.id in finding.detail


def test_vhs_dictionary_train_and_list(
    inprocess: Backend, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from vhs_ops.cli.app import main as vhs

    monkeypatch.setenv("VHS_TABLE_NAME", inprocess.table_name)
    monkeypatch.setenv("VHS_BUCKET_NAME", inprocess.bucket_name)
    store = inprocess.store()
    for n in range(60):
        store.put(f"r{n}", record(n, seed=21), updated_at=at(n))
    assert vhs(["--json", "dictionary", "train", "--sample", "10"]) == 2  # under MIN_SAMPLES
    assert json.loads(capsys.readouterr().out)["error"]["field"] == "--sample"
    assert vhs(["--json", "dictionary", "train", "--size", "4096", "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert_documented("vhs dictionary train", dry)
    assert (dry["published"], dry["samples"], dry["held_out"]) == (False, 54, 6)
    assert dry["packed_bytes"] < dry["zlib_bytes"] and dry["ratio"] < 1
    assert vhs(["--json", "dictionary", "list"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert vhs(["--json", "dictionary", "train", "--size", "4096"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["published"] and trained["dictionary"] == dry["dictionary"]
    assert vhs(["--json", "dictionary", "list"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert_documented("vhs dictionary list", listing)
    (listed,) = listing
    assert (listed["id"], listed["current"], listed["size"]) == (trained["dictionary"], True, 4096)
    # A store that writes with dictionaries now packs new writes with it.
    writer = inprocess.store(dictionaries=True)
    writer.put("r0", record(0, seed=22), updated_at=at(100))
    assert raw_entry(inprocess, "r0")["zd"]["B"].hex() == trained["dictionary"]
