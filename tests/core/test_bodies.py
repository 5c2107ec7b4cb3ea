"""The body store's multipart upload and its errors, on in-process moto (mutation testing found
them unpinned: docs/reliability.md, "Mutation testing").

The S3 client's own event hooks watch (and, for one test, fail) the parts as they go; the body
store itself runs unchanged.
"""

from __future__ import annotations

import hashlib
import random
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vhs.bodies.s3 import MULTIPART_CONCURRENCY, S3BodyStore
from vhs.codec import Body
from vhs.errors import BodyHashMismatch, DanglingPointer
from vhs_testing.backends import Backend

MiB = 1024 * 1024
PART = 5 * MiB  # S3's smallest part but the last


def body_of(data: bytes, content_type: str = "application/octet-stream") -> Body:
    return Body(len(data), hashlib.sha256(data).hexdigest(), content_type, data=data)


def blob(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def multipart_store(backend: Backend) -> S3BodyStore:
    return S3BodyStore(backend.s3, backend.bucket_name, multipart_threshold=PART, part_size=PART)


def on_upload_part(backend: Backend, when: str, handler: Any) -> None:
    """`before`: the handler gets the call's parameters; `after`: called once S3 answered."""
    event = "before-parameter-build" if when == "before" else "after-call"
    backend.s3.meta.events.register(f"{event}.s3.UploadPart", handler)


def test_a_multipart_body_is_cut_at_the_part_size_and_keeps_its_content_type(inprocess: Backend):
    bodies = multipart_store(inprocess)
    sizes: list[int] = []
    on_upload_part(inprocess, "before", lambda params, **_: sizes.append(len(params["Body"])))
    data = blob(1, 2 * PART + MiB)
    bodies.put("k/marc", body_of(data, "application/marc"), {"vhs-id": "marc"})
    assert sorted(sizes) == [MiB, PART, PART]
    head = inprocess.s3.head_object(Bucket=inprocess.bucket_name, Key="k/marc")
    assert head["ContentType"] == "application/marc"
    assert head["Metadata"] == {"vhs-id": "marc"}
    assert bodies.get("k/marc", hashlib.sha256(data).hexdigest()) == data


def test_a_slow_part_does_not_hold_back_the_next_ones(inprocess: Backend):
    """Part 1 is held until the part after the first MULTIPART_CONCURRENCY has started: the
    upload goes on as soon as any part finishes, with never more than that many in flight."""
    bodies = multipart_store(inprocess)
    first_free = MULTIPART_CONCURRENCY + 1
    started, lock = threading.Event(), threading.Lock()
    in_flight, most, waited = [0], [0], []

    def before(params: dict[str, Any], **_: Any) -> None:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        if params["PartNumber"] == first_free:
            started.set()
        if params["PartNumber"] == 1:
            # A bound, never reached when the upload goes on: it only ends a broken run.
            waited.append(started.wait(timeout=20))

    def after(**_: Any) -> None:
        with lock:
            in_flight[0] -= 1

    on_upload_part(inprocess, "before", before)
    on_upload_part(inprocess, "after", after)
    data = blob(2, first_free * PART + MiB)
    bodies.put("k/many", body_of(data), {})
    assert waited == [True]
    assert most[0] == MULTIPART_CONCURRENCY
    assert bodies.get("k/many", hashlib.sha256(data).hexdigest()) == data


def test_a_failed_part_aborts_the_upload_and_its_error_is_raised(inprocess: Backend):
    bodies = multipart_store(inprocess)

    def fail_part_two(params: dict[str, Any], **_: Any) -> None:
        if params["PartNumber"] == 2:
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "injected"}}, "UploadPart")

    on_upload_part(inprocess, "before", fail_part_two)
    with pytest.raises(ClientError) as raised:
        bodies.put("k/failed", body_of(blob(3, 2 * PART + MiB)), {})
    assert raised.value.response["Error"]["Code"] == "SlowDown"
    uploads = inprocess.s3.list_multipart_uploads(Bucket=inprocess.bucket_name)
    assert uploads.get("Uploads", []) == []
    listed = inprocess.s3.list_objects_v2(Bucket=inprocess.bucket_name)
    assert listed.get("Contents", []) == []


def test_read_errors_name_the_object(inprocess: Backend):
    bodies = S3BodyStore(inprocess.s3, inprocess.bucket_name)
    where = f"s3://{inprocess.bucket_name}/k/body"
    expected = hashlib.sha256(b"the body").hexdigest()
    with pytest.raises(DanglingPointer) as dangling:
        bodies.get("k/body", expected)
    assert dangling.value.location == where
    assert str(dangling.value) == f"the index points at {where}, which does not exist"
    inprocess.s3.put_object(Bucket=inprocess.bucket_name, Key="k/body", Body=b"other bytes")
    with pytest.raises(BodyHashMismatch) as mismatch:
        bodies.get("k/body", expected)
    actual = hashlib.sha256(b"other bytes").hexdigest()
    assert (mismatch.value.location, mismatch.value.expected) == (where, expected)
    assert mismatch.value.actual == actual
