"""Body keys read back: `keys.parse_body_key` recognises exactly the keys `keys.body_key` makes
for a prefix, so that the garbage collector (docs/gc.md) judges only its own store's objects."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vhs import keys
from vhs.errors import InvalidId
from vhs.keys import (
    MAX_ID_LENGTH,
    BodyKey,
    all_shards,
    body_key,
    encode_id,
    parse_body_key,
    shard_of,
)
from vhs_testing.bad_inputs import valid_id as valid

SHA = hashlib.sha256(b"body").hexdigest()
LONG = "/" * 200  # cut in its key: every "/" is three bytes encoded
LONGER = "🙂" * MAX_ID_LENGTH


def valid_prefix(prefix: str) -> bool:
    try:
        return keys.validate_prefix(prefix) == prefix
    except InvalidId:
        return False


# Ids of every kind: any text, text rich in what encode_id escapes, and ids long enough to be cut.
ids = st.one_of(
    st.text(min_size=1, max_size=MAX_ID_LENGTH),
    st.text(st.sampled_from("aZ09-_./%~ é🙂\u200b"), min_size=1, max_size=40),
    st.text(st.sampled_from("/%~.🙂a"), min_size=150, max_size=MAX_ID_LENGTH),
).filter(valid)
prefixes = st.one_of(
    st.sampled_from(["", "de", "a/b", "ab", "de/ad", "bodies"]),
    st.text(max_size=30).map(lambda text: text.strip("/")).filter(valid_prefix),
)
hashes = st.text("0123456789abcdef", min_size=64, max_size=64)


@settings(max_examples=500, suppress_health_check=[HealthCheck.filter_too_much])
@given(prefix=prefixes, id=ids, sha=hashes)
def test_every_body_key_parses_back_to_its_parts(prefix, id, sha):
    key = body_key(prefix, id, sha)
    parsed = parse_body_key(prefix, key)
    segment = encode_id(id)
    cut = "~" in segment
    assert parsed == BodyKey(shard_of(id), segment, None if cut else id, sha)
    if cut:
        assert parsed.with_cut_id(id) == BodyKey(shard_of(id), segment, id, sha)


@settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(prefix=prefixes, other=prefixes, id=ids, sha=hashes)
def test_no_store_recognises_another_prefix_s_keys(prefix, other, id, sha):
    """Stores may share a bucket: a prefix is never read as another prefix plus a shard."""
    assume(prefix != other)
    assert parse_body_key(other, body_key(prefix, id, sha)) is None


# Near misses: body keys changed a little, and keys built from the parts of body keys and from
# what a foreign key might hold.
_PIECE = st.sampled_from(
    ["a", "A", "0", "de", "%", "%41", "%2E", "%2e", "%7E", "~", ".", "/", "é", "🙂", "-", "_"]
)
_EDITS = st.sampled_from(["", "/", "//", "A", "a", "0", "f", "%", "%41", "~", "é", "de/"])
segments = st.one_of(
    st.lists(_PIECE, max_size=8).map("".join),
    ids.map(encode_id),
    st.tuples(
        st.lists(_PIECE, max_size=4).map("".join), st.text("0123456789abcdefX", max_size=33)
    ).map(lambda parts: f"{parts[0]}~{parts[1]}"),
)
names = st.one_of(hashes, st.text("0123456789abcdefABCDEFg", min_size=62, max_size=66))


def _shard_for(segment: str) -> str:
    decoded = keys.decode_id(segment)
    return shard_of(decoded) if decoded is not None else "00"


@st.composite
def near_misses(draw: st.DrawFn, prefix: str) -> tuple[str, str | None]:
    """(a key, the id whose body key it was made from, if any)."""
    prefix = draw(st.sampled_from([prefix, prefix, "", "de", "a/b", "a"]))
    source = draw(st.one_of(st.none(), ids))
    if source is not None:
        key = body_key(prefix, source, draw(hashes))
    else:
        segment = draw(segments)
        shard = draw(st.one_of(st.just(_shard_for(segment)), st.sampled_from(all_shards())))
        key = "/".join(
            [prefix, shard, segment, draw(names)] if prefix else [shard, segment, draw(names)]
        )
    for _ in range(draw(st.integers(0, 2))):  # characters changed, dropped or added
        at = draw(st.integers(0, len(key)))
        key = key[:at] + draw(_EDITS) + key[at + draw(st.integers(0, 3)) :]
    return key, source


@settings(max_examples=1000)
@given(prefix=st.sampled_from(["", "de", "a/b", "a"]), data=st.data())
def test_a_recognised_key_is_exactly_the_body_key_of_its_id(prefix, data):
    """Whatever the key: recognised only when body_key(prefix, id, sha) gives it back. A cut key
    is taken for an id (named by its object's metadata) only when that id's key is this key."""
    key, source = data.draw(
        st.one_of(near_misses(prefix), st.tuples(st.text(max_size=80), st.none())), "key"
    )
    parsed = parse_body_key(prefix, key)
    if parsed is None:
        return
    if parsed.id is not None:
        assert body_key(prefix, parsed.id, parsed.content_hash) == key
        return
    candidates = data.draw(st.lists(ids, max_size=2), "candidates")
    for candidate in [source, *candidates] if source is not None else candidates:
        confirmed = parsed.with_cut_id(candidate)
        assert (confirmed is not None) == (body_key(prefix, candidate, parsed.content_hash) == key)


@settings(max_examples=200)
@given(prefix=st.sampled_from(["", "de", "a/b"]), id=ids, sha=hashes, data=st.data())
def test_a_body_key_changed_anywhere_is_refused(prefix, id, sha, data):
    key = body_key(prefix, id, sha)
    at = data.draw(st.integers(0, len(key) - 1))
    replacement = data.draw(st.sampled_from(["", "/", "//", "A", "a", "0", "%", "~", "%41", "é"]))
    changed = key[:at] + replacement + key[at + 1 :]
    assume(changed != key)
    parsed = parse_body_key(prefix, changed)
    if parsed is None:
        return
    # A change may happen to make the key of another id or body; never anything else.
    named = parsed.id if parsed.id is not None else getattr(parsed.with_cut_id(id), "id", None)
    if named is not None:
        assert body_key(prefix, named, parsed.content_hash) == changed


def _key(shard: str, segment: str, name: str = SHA, prefix: str = "") -> str:
    return "/".join([prefix, shard, segment, name] if prefix else [shard, segment, name])


@pytest.mark.parametrize(
    ("prefix", "key"),
    [
        # Another store's key in the same bucket: "de" is a prefix and a shard.
        ("", body_key("de", "A", SHA)),
        ("de", body_key("", "A", SHA)),
        ("a", body_key("a/b", "A", SHA)),
        ("a/b", body_key("a", "A", SHA)),
        ("", body_key("a/b", LONG, SHA)),
        # Not VHS's layout.
        ("", f"{shard_of('x')}/reports/2024/{SHA}"),
        ("", f"{shard_of('x')}/x/{'z' * 64}"),
        ("", _key(shard_of("x"), "x", SHA.upper())),
        ("", _key(shard_of("x"), "x", SHA[:63])),
        ("", _key(shard_of("x"), "x", SHA + "0")),
        ("", _key(shard_of("x"), "x/extra", SHA)),
        ("", "/" + _key(shard_of("x"), "x", SHA)),
        ("", _key(shard_of("x"), "x", SHA) + "/"),
        ("", _key(shard_of("x").upper(), "x", SHA)),
        ("", _key("g0", "x", SHA)),
        ("", _key(shard_of("x") + "0", "x", SHA)),
        ("", _key(shard_of("x"), "", SHA)),
        ("de", "de" + _key(shard_of("x"), "x", SHA)),
        ("de", "de//" + _key(shard_of("x"), "x", SHA)),
        # A readable segment must be the canonical encoding of a valid id of the key's shard.
        ("", _key(next(s for s in all_shards() if s != shard_of("x")), "x", SHA)),
        ("", _key(shard_of("A"), "%41", SHA)),
        ("", _key(shard_of("a.b"), "a%2eb", SHA)),
        ("", _key(shard_of("a.b"), "a.b", SHA)),
        ("", _key(shard_of(".."), "..", SHA)),
        ("", _key(shard_of(" "), "%20", SHA)),  # only whitespace: not a valid id
        ("", _key(shard_of("\x01"), "%01", SHA)),  # a control character
        ("", _key(shard_of("\ufffd"), "%FF", SHA)),  # not UTF-8
        ("", _key(shard_of("x" * 257), "x" * 257, SHA)),  # longer than an id may be
        # A cut segment must end in "~" and 32 hex digits, and hold no other "~".
        ("", _key(shard_of(LONG), encode_id(LONG)[:-1], SHA)),
        ("", _key(shard_of(LONG), encode_id(LONG).upper(), SHA)),
        ("", _key(shard_of(LONG), "~" + encode_id(LONG), SHA)),
        ("", _key(shard_of(LONG), encode_id(LONG) + "0", SHA)),
        ("", _key(shard_of(LONG), "a" * 600 + encode_id(LONG)[-33:], SHA)),
    ],
)
def test_foreign_keys_are_refused(prefix, key):
    assert parse_body_key(prefix, key) is None


@pytest.mark.parametrize("id", [LONG, LONGER])
def test_a_cut_key_is_confirmed_only_by_the_id_it_was_made_for(id):
    key = body_key("", id, SHA)
    parsed = parse_body_key("", key)
    assert parsed is not None and parsed.id is None and "~" in parsed.segment
    assert parsed.with_cut_id(id) == parsed._replace(id=id)
    for other in [id[:-1], id + "x", "A", LONGER if id == LONG else LONG]:
        assert parsed.with_cut_id(other) is None
    # The right id under another shard: the segment matches, the shard does not.
    elsewhere = next(s for s in all_shards() if s != shard_of(id))
    moved = parse_body_key("", _key(elsewhere, encode_id(id)))
    assert moved is not None and moved.with_cut_id(id) is None
    # A readable key is never "confirmed" again.
    assert parse_body_key("", body_key("", "A", SHA)).with_cut_id("A") is None


def test_the_parts_of_a_readable_key():
    assert parse_body_key("a/b", f"a/b/{shard_of('x/y')}/x%2Fy/{SHA}") == (
        shard_of("x/y"),
        "x%2Fy",
        "x/y",
        SHA,
    )
