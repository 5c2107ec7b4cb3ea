"""RFC 6902 patches (vhs.json_patch): applied by an independent implementation (the `jsonpatch`
library, tests only), each patch turns the old document into exactly the new one, as JSON text,
over generated pairs: unrelated documents, and documents edited from one another."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhs.json_patch import make_patch, patch_size, pointer

# Keys that need escaping in a JSON Pointer ("~", "/"), look like indexes, or are empty.
KEYS = st.sampled_from(["a", "b", "c", "", "0", "1", "~", "/", "a/b", "~1", "é"]) | st.text(
    max_size=4
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 0.0, -0.0, 1, 1.0, True, False, "1", ""])
    | st.text(max_size=6)
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=20,
)


def text(document: Any) -> str:
    """The JSON text of a document: tells 1, 1.0 and true apart, and 0.0 from -0.0."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False)


@st.composite
def edited(draw: st.DrawFn) -> tuple[Any, Any]:
    """A document and the same document with a few edits at random places: values replaced,
    keys added and removed, elements inserted and removed (a record's next version)."""
    old = draw(DOCUMENTS)
    new = copy.deepcopy(old)
    for _ in range(draw(st.integers(1, 4))):
        containers = _containers(new)
        if not containers:
            new = draw(DOCUMENTS)
            continue
        target = draw(st.sampled_from(containers))
        if isinstance(target, dict):
            key = draw(KEYS)
            if key in target and draw(st.booleans()):
                del target[key]
            else:
                target[key] = draw(DOCUMENTS)
        elif target and draw(st.booleans()):
            del target[draw(st.integers(0, len(target) - 1))]
        else:
            target.insert(draw(st.integers(0, len(target))), draw(DOCUMENTS))
    return old, new


def _containers(document: Any) -> list[Any]:
    found = []
    if isinstance(document, dict | list):
        found.append(document)
        for inner in document.values() if isinstance(document, dict) else document:
            found += _containers(inner)
    return found


@settings(max_examples=500, deadline=None)
@given(pair=st.one_of(edited(), st.tuples(DOCUMENTS, DOCUMENTS)))
def test_applying_the_patch_to_the_old_document_gives_exactly_the_new_one(pair):
    old, new = pair
    before = text(old)
    patch = make_patch(old, new)
    assert text(old) == before  # make_patch changes neither document
    assert text(jsonpatch.apply_patch(old, patch)) == text(new)
    assert all(op["op"] in ("add", "remove", "replace") for op in patch)
    # A patch is JSON itself, and says nothing when nothing changed.
    assert json.loads(json.dumps(patch)) == patch
    assert (patch == []) == (text(old) == text(new))


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({"a": 1}, {"a": 1.0}, [{"op": "replace", "path": "/a", "value": 1.0}]),
        ({"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
        ([0.0], [-0.0], [{"op": "replace", "path": "/0", "value": -0.0}]),
        ({"a": 1}, [1], [{"op": "replace", "path": "", "value": [1]}]),
        ({"a/b": {"~": 1}}, {"a/b": {"~": 2}}, [{"op": "replace", "path": "/a~1b/~0", "value": 2}]),
        ([1, 2, 3, 4], [1, 9, 2, 3, 4], [{"op": "add", "path": "/1", "value": 9}]),
        ([1, 2, 3, 4], [1, 3, 4], [{"op": "remove", "path": "/1"}]),
        (
            {"x": 1, "y": 2},
            {"y": 2, "z": 3},
            [
                {"op": "remove", "path": "/x"},
                {"op": "add", "path": "/z", "value": 3},
            ],
        ),
    ],
)
def test_patches_are_small_and_strict_about_json_types(old, new, patch):
    assert make_patch(old, new) == patch
    assert text(jsonpatch.apply_patch(old, patch)) == text(new)


def test_pointer_escapes_and_the_size_is_that_of_compact_utf8_json():
    assert pointer("", "a~/b") == "/a~0~1b"
    assert pointer("/x", 3) == "/x/3"
    patch = [{"op": "add", "path": "/é", "value": "ü"}]
    assert patch_size(patch) == len('[{"op":"add","path":"/é","value":"ü"}]'.encode())
