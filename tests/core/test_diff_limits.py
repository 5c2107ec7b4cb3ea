"""A diff is bounded whatever the records (vhs.history.diffs): a body over MAX_BODY_BYTES is never
read, a patch over MAX_PATCH_BYTES is given up while it is made, and the memory one diff
takes, measured here with two records at the body limit in the costliest shapes of JSON,
stays under MEMORY_BOUND_BYTES, which the read API's memory holds."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import jsonpatch
import pytest

from vhs.history import diffs
from vhs.history.diffs import MAX_BODY_BYTES, MAX_PATCH_BYTES, MEMORY_BOUND_BYTES
from vhs.json_patch import TOO_LARGE, encode_patch, make_patch
from vhs.shapes import READ_API
from vhs.strict_json import MAX_DEPTH
from vhs_testing.backends import Backend
from vhs_testing.memory import diff_peak
from vhs_testing.records import at


def at_size(elements: Callable[[int], str], size: int) -> bytes:
    """A JSON array of `elements(n)` for n = 0, 1, ... and a string that pads it to exactly
    `size` bytes (the form the store keeps: canonical JSON)."""
    parts, used = [], len('[,""]')
    n = 0
    while used + len(elements(n)) + 1 <= size:
        parts.append(elements(n))
        used += len(parts[-1]) + 1
        n += 1
    frame = "[" + ",".join(parts) + ',""]'
    body = frame[:-2] + "p" * (size - len(frame)) + '"]'
    assert len(body) == size
    return body.encode()


# The shapes a parsed body costs most per byte, and a pair that changes every element.
SHAPES = {
    "empty objects to empty arrays": (lambda n: "{}", lambda n: "[]"),
    "one-digit numbers, each changed": (lambda n: "0", lambda n: "1"),
    "short keys, each changed": (lambda n: f'{{"{n:x}":0}}', lambda n: f'{{"{n:x}":1}}'),
    "objects nested to the limit": (
        lambda n: '{"a":' * (MAX_DEPTH - 1) + str(n) + "}" * (MAX_DEPTH - 1),
        lambda n: '{"a":' * (MAX_DEPTH - 1) + str(n + 1) + "}" * (MAX_DEPTH - 1),
    ),
    "objects 20 deep": (
        lambda n: '{"a":' * 20 + str(n) + "}" * 20,
        lambda n: '{"a":' * 20 + str(n + 1) + "}" * 20,
    ),
}


def put_pair(backend: Backend, rid: str, first: bytes, second: bytes):
    store = backend.store()
    for version, body in enumerate((first, second), 1):
        store.put(rid, json.loads(body), updated_at=at(version))
    return store


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_two_records_at_the_body_limit_diff_within_the_memory_bound(shape: str) -> None:
    old, new = (at_size(make, MAX_BODY_BYTES) for make in SHAPES[shape])
    peak, diff = diff_peak(shape, old, new)
    assert diff.new.size == MAX_BODY_BYTES
    assert peak <= MEMORY_BOUND_BYTES, f"{shape}: {peak:,} bytes at the peak"
    assert diff.kind == "json"
    if diff.patch is None:
        assert diff.patch_omitted == TOO_LARGE and "patch is over" in diff.reason
    else:
        assert len(encode_patch(diff.patch)) <= MAX_PATCH_BYTES
        assert jsonpatch.apply_patch(json.loads(old), diff.patch) == json.loads(new)


def test_the_bound_holds_in_the_read_apis_memory() -> None:
    assert READ_API.function_memory_mb * 1024 * 1024 // 2 >= MEMORY_BOUND_BYTES


def test_a_body_over_the_limit_is_never_read(inprocess: Backend) -> None:
    over = at_size(lambda n: "0", MAX_BODY_BYTES + 1)
    store = put_pair(inprocess, "over", at_size(lambda n: "1", 1000), over)
    reads: Counter[str] = Counter()
    inprocess.s3.meta.events.register(
        "before-call.s3.GetObject", lambda **kw: reads.update(["GetObject"])
    )
    diff = store.diff("over", 1, 2)
    assert (diff.kind, diff.patch, diff.patch_omitted) == ("json", None, TOO_LARGE)
    assert diff.reason == f"version 2's body is over the {MAX_BODY_BYTES:,} bytes a diff reads"
    assert reads == Counter()
    # At the limit, it is read: one S3 GET (version 1 is small enough to be held inline).
    store.put("over", json.loads(at_size(lambda n: "0", MAX_BODY_BYTES)), updated_at=at(3))
    store.diff("over", 1, 3)
    assert reads == Counter({"GetObject": 1})


def test_a_patch_is_carried_to_its_bound_and_not_a_byte_past_it() -> None:
    old = {"t": ""}
    filler = encode_patch([{"op": "replace", "path": "/t", "value": ""}])
    new = {"t": "x" * (MAX_PATCH_BYTES - len(filler))}
    patch = make_patch(old, new, limit=MAX_PATCH_BYTES)
    assert patch is not None and len(encode_patch(patch)) == MAX_PATCH_BYTES
    assert make_patch(old, {"t": new["t"] + "x"}, limit=MAX_PATCH_BYTES) is None
    # Many operations: the running size is the encoded patch's, commas included.
    many_old, many_new = list(range(5000)), [n + 1 for n in range(5000)]
    whole = make_patch(many_old, many_new)
    size = len(encode_patch(whole))
    assert make_patch(many_old, many_new, limit=size) == whole
    assert make_patch(many_old, many_new, limit=size - 1) is None


def test_the_docs_give_the_bounds_the_code_has() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    mib = {name: getattr(diffs, name) // 2**20 for name in ("MAX_BODY_BYTES", "MAX_PATCH_BYTES")}
    library = (docs / "library.md").read_text()
    assert f"`diffs.MAX_BODY_BYTES` ({mib['MAX_BODY_BYTES']} MiB)" in library
    assert f"`diffs.MAX_PATCH_BYTES` ({mib['MAX_PATCH_BYTES']} MiB" in library
    assert f"({MEMORY_BOUND_BYTES // 2**20} MiB)" in library
    for page in ("read-api.md", "cli.md"):
        text = " ".join((docs / page).read_text().split())
        assert f"{mib['MAX_BODY_BYTES']} MiB" in text and f"{mib['MAX_PATCH_BYTES']} MiB" in text
