"""The JSON Patch of an update's notification (vhs.changes.notification_patch,
docs/changes.md): present for a small JSON update, bounded by CHANGES.max_patch_bytes and left
out over it with `patch_omitted`, absent where no previous JSON version exists. The stream
images are the items a real store wrote (in-process moto), before and after each write, in
both the SDK's form (bytes) and a Lambda event's (base64)."""

from __future__ import annotations

import base64
import copy
import json
import random
from dataclasses import replace
from typing import Any

import jsonpatch

from vhs import keys
from vhs.changes.feed import Change, changes_from_images
from vhs.changes.notification_patch import NOT_INLINE, TOO_LARGE, UNREADABLE, patch_fields
from vhs.changes.publish import chunks
from vhs.changes.stream import event_image
from vhs.json_patch import make_patch, patch_size
from vhs.shapes import CHANGES
from vhs_testing.records import at, large

BUCKET = "bodies"


def canonical(record: Any) -> Any:
    return json.loads(json.dumps(record, sort_keys=True))


class Images:
    """A store and the stream images each of its writes makes (the item before and after)."""

    def __init__(self, backend, **options: Any) -> None:
        self.backend = backend
        self.store = backend.store(**options)

    def raw(self, rid: str) -> dict[str, Any] | None:
        got = self.backend.dynamodb.get_item(
            TableName=self.backend.table_name, Key={"id": {"S": rid}}
        )
        return got.get("Item")

    def write(self, rid: str, write) -> tuple[dict | None, dict]:
        old = self.raw(rid)
        write(self.store)
        return old, self.raw(rid)

    def change(self, rid: str, write, *, event: bool = True) -> Change:
        old, new = self.write(rid, write)
        if event:  # as a Lambda event carries them: binary values in base64
            old, new = (event_image(i) if i else None for i in (old, new))
        (change,) = changes_from_images(old, new, bucket=BUCKET).changes
        return change


def test_a_small_json_update_carries_the_patch_from_the_previous_version(inprocess):
    images = Images(inprocess)
    first = {"title": "Moby-Dick", "tags": ["whale"], "year": 1851}
    second = {"title": "Moby-Dick; or, The Whale", "tags": ["whale", "sea"], "year": 1851}
    rid = "patched"
    assert images.change(rid, lambda s: s.put(rid, first, updated_at=at(1))).patch is None
    for event in (True, False):
        rid = f"patched-{event}"
        images.store.put(rid, first, updated_at=at(1))
        change = images.change(
            rid, lambda s, rid=rid: s.put(rid, second, updated_at=at(2)), event=event
        )
        # The store keeps JSON canonically (keys sorted): the patch is between those records.
        assert change.patch == make_patch(*map(canonical, (first, second)))
        assert change.patch_omitted is None
        assert jsonpatch.apply_patch(first, change.patch) == second
        message = json.loads(change.body())
        # The notification's other fields are exactly as they were; the patch is added.
        without = replace(change, patch=None).message()
        assert {k: v for k, v in message.items() if k != "patch"} == without
        assert message["patch"] == change.patch and "patch_omitted" not in message
        assert Change.from_message(change.body()) == change


def test_an_update_with_only_the_same_body_carries_an_empty_patch(inprocess):
    images = Images(inprocess)
    images.store.put("same-body", {"a": 1}, updated_at=at(1), parts={"p": b"one"})
    change = images.change(
        "same-body", lambda s: s.put("same-body", {"a": 1}, updated_at=at(2), parts={"p": b"two"})
    )
    assert change.patch == []


def test_a_patch_over_the_bound_is_left_out_with_a_field_that_says_so(inprocess):
    images = Images(inprocess, inline_threshold=32 * 1024)  # large bodies stay inline
    rng = random.Random(7)
    first, second = ({"text": rng.randbytes(12_000).hex()} for _ in range(2))
    images.store.put("big", first, updated_at=at(1))
    old, new = images.write("big", lambda s: s.put("big", second, updated_at=at(2)))
    (change,) = changes_from_images(old, new, bucket=BUCKET).changes
    assert change.location == "inline" and change.patch is None
    assert change.patch_omitted == TOO_LARGE
    message = json.loads(change.body())
    assert message["patch_omitted"] == "too_large" and "patch" not in message
    # The bound, exactly: a patch of the bound's size is carried, one byte more is not.
    size = patch_size(make_patch(first, second))
    assert size > CHANGES.max_patch_bytes
    assert patch_fields(old, new, limit=size) == {"patch": make_patch(first, second)}
    assert patch_fields(old, new, limit=size - 1) == {"patch_omitted": TOO_LARGE}
    assert len(change.body().encode()) < CHANGES.max_patch_bytes  # the omission stays small


def test_a_body_in_s3_on_either_side_is_not_read_and_says_not_inline(inprocess):
    images = Images(inprocess)
    big = {"text": large(3).hex()}  # over the inline threshold: in S3
    images.store.put("s3-new", {"a": 1}, updated_at=at(1))
    change = images.change("s3-new", lambda s: s.put("s3-new", big, updated_at=at(2)))
    assert (change.patch, change.patch_omitted) == (None, NOT_INLINE)
    images.store.put("s3-old", big, updated_at=at(1))
    change = images.change("s3-old", lambda s: s.put("s3-old", {"a": 1}, updated_at=at(2)))
    assert (change.patch, change.patch_omitted) == (None, NOT_INLINE)


def test_no_patch_field_without_a_previous_json_version(inprocess):
    images = Images(inprocess)
    store = images.store
    store.put("gone", {"a": 1}, updated_at=at(1))
    cases = {
        "first version": images.change("new", lambda s: s.put("new", {"a": 1}, updated_at=at(1))),
        "delete": images.change("gone", lambda s: s.delete("gone", deleted_at=at(2))),
        "after a delete": images.change(
            "gone", lambda s: s.put("gone", {"a": 2}, updated_at=at(3))
        ),
    }
    store.put("typed", {"a": 1}, updated_at=at(1))
    cases["JSON to bytes"] = images.change(
        "typed", lambda s: s.put("typed", b"raw", updated_at=at(2), content_type="text/plain")
    )
    cases["bytes to JSON"] = images.change(
        "typed", lambda s: s.put("typed", {"a": 1}, updated_at=at(3))
    )
    for name, change in cases.items():
        message = json.loads(change.body())
        assert "patch" not in message and "patch_omitted" not in message, name


def test_an_inline_body_that_does_not_decode_still_notifies_without_a_patch(inprocess):
    images = Images(inprocess)
    images.store.put("bad", {"a": 1}, updated_at=at(1))
    old, new = images.write("bad", lambda s: s.put("bad", {"a": 2}, updated_at=at(2)))
    broken = copy.deepcopy(old)
    broken["c"]["L"][0]["M"]["b"] = {"B": b"not the body"}
    (change,) = changes_from_images(broken, new, bucket=BUCKET).changes
    assert (change.version, change.patch, change.patch_omitted) == (2, None, UNREADABLE)
    event_broken = event_image(broken)
    assert base64.b64decode(event_broken["c"]["L"][0]["M"]["b"]["B"]) == b"not the body"
    assert patch_fields(event_broken, event_image(new)) == {"patch_omitted": UNREADABLE}


def test_ten_of_the_longest_notifications_with_the_largest_patch_fit_one_publish_batch():
    """The longest id (256 four-byte characters), location and content type, and a patch of
    exactly the bound: under 24 KiB, ten to a PublishBatch."""
    filler = [{"op": "replace", "path": "/t", "value": ""}]
    value = "x" * (CHANGES.max_patch_bytes - patch_size(filler))
    patch = [{"op": "replace", "path": "/t", "value": value}]
    assert patch_size(patch) == CHANGES.max_patch_bytes
    ids = ["🦀" * 255 + chr(0x4E00 + n) for n in range(20)]
    longest = [
        Change(
            id,
            10**12,
            at(1).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "stored",
            f"s3://{'b' * 63}/{keys.body_key('p' * 400, id, 'a' * 64)}",
            "a" * 64,
            5 * 2**30,
            "application/json",
            patch=patch,
        )
        for id in ids
    ]
    assert max(len(change.body().encode()) for change in longest) < 24 * 1024
    assert [len(chunk) for _, chunk in chunks(longest)] == [10, 10]
