"""Every JSON the store accepts comes out as strict JSON, wherever it is read out.

Generated pairs of JSON texts, as producers send them: numbers at and past a double's range
(`1e400`, `1e-400`, the largest double, 400-digit integers, `-0.0`), documents nested to the
limit and one past it, wide arrays and objects, and keys with `/`, `~` and `""`. Each text goes
through the door (`store.put`: as a value, or as bytes that claim JSON); what is refused is
refused with the reason the strict parser gives, and nothing is written. Of a pair both
stored, the diff (`store.diff`) and the change notification's patch (the feed, from the two
items as the stream carries them) must be text a strict JSON parser accepts (no `Infinity`, no
`NaN`), and the `jsonpatch` library must turn the first document into exactly the second with
them: the same JSON text, so `1`, `1.0` and `true` stay apart.

`make test` runs VHS_JSON_PAIRS pairs (200 by default); the long run is
`VHS_JSON_PAIRS=20000 .venv/bin/python -m pytest tests/core/test_json_pairs.py` (docs/testing.md).
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vhs.changes.feed import changes_from_images
from vhs.codec import JSON_CONTENT_TYPE
from vhs.errors import InvalidRecord
from vhs.shapes import CHANGES
from vhs.strict_json import MAX_DEPTH, parse_document
from vhs_testing.backends import Backend
from vhs_testing.records import at

PAIRS = int(os.environ.get("VHS_JSON_PAIRS", "200"))
_ids = itertools.count()

# Number literals as producers write them: ordinary, at a double's edges, and past them
# (refused at the door: one pair in ten carries one, in a document of its own).
WITHIN = st.sampled_from(
    [
        "0", "-0", "-0.0", "1", "1.0", "1.10", "1e2", "1E+2", "123456789012345678901234567890",
        "1" + "0" * 400, "-" + "9" * 309, "1.7976931348623157e308", "-1.7976931348623157e308",
        "5e-324", "2.2250738585072014e-308", "0e-400", "0.0000000000000000000000000001",
    ]
)  # fmt: skip
PAST = st.sampled_from(["1.7976931348623159e308", "1e309", "1e400", "-1e400", "1e-400"])
FINITE = st.floats(allow_nan=False, allow_infinity=False).map(repr)
NUMBERS = WITHIN | st.integers().map(str) | FINITE
KEYS = st.sampled_from(["", "/", "~", "~0", "~1", "a/b", "a~b", "0", "é", '"', "\\"]) | st.text(
    max_size=5
)
SCALARS = (
    NUMBERS
    | st.sampled_from(["true", "false", "null", '""', '"~/"'])
    | st.text(max_size=6).map(json.dumps)
)


def _array(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def _object(members: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in members.items()) + "}"


DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5).map(_array)
        | st.dictionaries(KEYS, inner, max_size=5).map(_object)
    ),
    max_leaves=25,
)
WIDE = st.lists(SCALARS, min_size=50, max_size=300).map(_array) | st.dictionaries(
    KEYS, SCALARS, min_size=20, max_size=100
).map(_object)


@st.composite
def deep(draw: st.DrawFn) -> str:
    """A document nested to the limit, or just past it, around any document."""
    depth = draw(st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1]))
    core, key = draw(SCALARS), draw(KEYS)
    text = core
    for level in range(depth):
        text = f"[{text}]" if level % 2 else _object({key: text})
    return text


TEXTS = DOCUMENTS | WIDE | deep()


@st.composite
def pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two versions: unrelated, or the second an edit of the first (an element or member
    added, so a patch has something small to say)."""
    old = draw(TEXTS)
    if draw(st.integers(0, 9)) == 0:  # a number past a double's, on either side
        past = _array([draw(TEXTS), draw(PAST)])
        return (past, old) if draw(st.booleans()) else (old, past)
    if draw(st.booleans()):
        return old, draw(TEXTS)
    if old.startswith("["):
        extra = draw(SCALARS)
        return old, old[:-1] + ("," if old != "[]" else "") + extra + "]"
    return old, draw(TEXTS)


def strict_loads(text: str) -> Any:
    """Python's json with what it takes beyond JSON refused (NaN, Infinity)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def raw(backend: Backend, rid: str) -> dict[str, Any]:
    return backend.dynamodb.get_item(TableName=backend.table_name, Key={"id": {"S": rid}})["Item"]


@pytest.fixture(scope="module")
def one_backend():
    from vhs_testing.backends import open_backend

    with open_backend("inprocess", None) as backend:
        yield backend


@settings(
    max_examples=PAIRS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pair=pairs(), as_bytes=st.booleans())
def test_what_the_doors_take_every_reader_gives_out_as_strict_json(
    one_backend: Backend, pair: tuple[str, str], as_bytes: bool
) -> None:
    store = one_backend.store(inline_threshold=32 * 1024)  # the pair stays inline: a patch
    rid = f"pair-{next(_ids)}"
    documents = []
    for version, text in enumerate(pair, 1):
        try:
            document = parse_document(text)
        except InvalidRecord as refused:
            # The door refuses the text for the same reason, and writes nothing.
            with pytest.raises(InvalidRecord) as raised:
                store.put(
                    rid, text.encode(), updated_at=at(version), content_type=JSON_CONTENT_TYPE
                )
            assert raised.value.reason == refused.reason
            held = store.index.read(rid)
            assert (held.version if held else 0) == version - 1
            assume(False)
        record = text.encode() if as_bytes else document
        put = store.put(rid, record, updated_at=at(version), content_type=JSON_CONTENT_TYPE)
        assume(put.outcome == "stored")  # not the same body again (a touch)
        documents.append(document)
        if version == 1:
            before = raw(one_backend, rid)
    old, new = documents
    diff = store.diff(rid, 1, 2).as_json()
    answer = strict_loads(json.dumps(diff, ensure_ascii=False, allow_nan=False))
    (change,) = changes_from_images(before, raw(one_backend, rid), bucket="b").changes
    notified = strict_loads(change.body())
    patches = [answer["patch"]]
    if notified.get("patch_omitted") is None:
        patches.append(notified["patch"])
    else:  # only ever for its size: the feed carries up to CHANGES.max_patch_bytes
        assert notified["patch_omitted"] == "too_large"
        assert len(json.dumps(answer["patch"], ensure_ascii=False)) > CHANGES.max_patch_bytes
    assert answer["patch_omitted"] is None
    for patch in patches:
        assert same_json(jsonpatch.apply_patch(old, patch), new)
