"""The DynamoDB item budget (docs/design.md, "The item"): an item is measured by DynamoDB's own
size rules, the store's configuration is checked against the largest entries it can write, and
every write keeps its item within what the collector's largest condemnation leaves of 400 KB."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto.dynamodb.models import dynamo_type

from vhs import InvalidInput, Retention, StoreConfig, VersionedHybridStore
from vhs.errors import ConfigurationError, ItemTooLarge
from vhs.index.codec import (
    CONDEMNATION_BYTES,
    CONDEMNED_BODIES,
    CONDEMNED_UNTIL,
    ITEM_BUDGET,
    ITEM_LIMIT,
    item_from_dynamo,
)
from vhs.index.size import entry_size, item_size, number_size, value_size, written_size
from vhs.model import Entry
from vhs.timestamps import parse_timestamp
from vhs_testing.records import at, large

# --- DynamoDB's size rules ----------------------------------------------------------------------
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
# Strings: UTF-8 bytes. Binary: raw bytes. Numbers: 1 byte per two significant digits, plus 1.
# Booleans and nulls: 1 byte. Lists and maps: 3 bytes, plus 1 byte per element (and a map
# element's name). An item: each attribute's UTF-8 name plus its value.


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "abc"}, 3),
        ({"S": "é"}, 2),  # two UTF-8 bytes
        ({"S": "\U0001f600"}, 4),
        ({"S": ""}, 0),
        ({"B": b"\x00" * 10}, 10),  # raw length, not base64's
        ({"N": "7"}, 2),
        ({"N": "12345"}, 4),  # 5 significant digits: 3 bytes, plus 1
        ({"N": "100"}, 2),  # trailing zeros are not significant
        ({"N": "0.00120"}, 2),  # nor leading ones
        ({"N": "-1.5E+10"}, 2),
        ({"N": "1234567890"}, 6),
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"L": []}, 3),
        ({"M": {}}, 3),
        ({"L": [{"S": "a"}, {"N": "1"}]}, 3 + (1 + 1) + (1 + 2)),
        ({"M": {"ab": {"S": "c"}}}, 3 + 1 + 2 + 1),
        ({"M": {"k": {"L": [{"BOOL": False}]}}}, 3 + 1 + 1 + (3 + 1 + 1)),
        ({"SS": ["ab", "cde"]}, 5),
    ],
)
def test_value_sizes_follow_dynamodbs_rules(value: dict[str, Any], size: int) -> None:
    assert value_size(value) == size


def test_number_sizes_of_python_numbers() -> None:
    assert number_size(10**20 - 1) == 1 + 10  # 20 significant digits
    assert number_size(Decimal("1.50")) == 2


def test_an_items_size_is_its_names_and_values() -> None:
    raw = {"id": {"S": "ü"}, "v": {"N": "12"}, "c": {"L": [{"M": {"t": {"S": "x"}}}]}}
    assert item_size(raw) == (2 + 2) + (1 + 2) + (1 + 3 + 1 + (3 + 1 + 1 + 1))
    assert item_size(None) == 0


def test_an_item_the_store_wrote_measures_as_its_entries_and_overhead(inprocess) -> None:
    """written_size and entry_size, the parts every check adds up, give the item's size by
    the rules above exactly."""
    store = inprocess.store()
    store.put("é-measured", {"a": 1}, updated_at=at(1))
    store.put("é-measured", b"\x00\x01" * 30, updated_at=at(2), content_type="image/x-test")
    store.put("é-measured", {"a": 2}, updated_at=at(3), parts={"scan": b"x" * 40})
    store.delete("é-measured", deleted_at=at(4))
    raw = read_raw(inprocess, "é-measured")
    item = item_from_dynamo(raw)
    assert item is not None and len(item.history) == 3
    entries = [*item.history, item.current]
    assert item_size(raw) == written_size(item.id, item.version, len(entries)) + sum(
        entry_size(e) for e in entries
    )


# --- the configuration --------------------------------------------------------------------------


def test_a_retention_whose_largest_entries_could_outgrow_the_item_is_refused() -> None:
    """The constructor used to budget 256 bytes an entry besides its inline body: 239 held
    entries of up to 1 KB passed (239 x 1,280 bytes = 305,920 <= 300 KiB), but an entry with a
    255-character content type takes 1,421 bytes by DynamoDB's rules, 339,619 in all, and
    with the collector's largest condemnation that is past 400 KB."""
    with pytest.raises(ConfigurationError, match=r"retention\.versions or inline_threshold"):
        offline(inline_threshold=1024, retention=Retention(159))
    with pytest.raises(ConfigurationError):
        offline(inline_threshold=0, retention=Retention(799))
    accepted = offline(inline_threshold=1024, retention=Retention(140))
    held = accepted.retention.max_held + 1
    # The share each entry gets, times the entries held, fits the budget with the item's own
    # overhead at its largest (the longest id, a 20-digit version).
    assert held * accepted.entry_budget <= ITEM_BUDGET - written_size("\U0010ffff" * 256, 1, 2)
    assert ITEM_BUDGET + CONDEMNATION_BYTES < ITEM_LIMIT


# --- every write ---------------------------------------------------------------------------------


@pytest.fixture
def dynamodb_sized_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto refuses an update when the item's size plus the replaced attribute's new value
    passes 405,000 bytes by its count: the attribute is counted twice, so moto refuses to
    rewrite a history over ~200 KB that DynamoDB accepts. Count the item as it would be after
    the update (moto's count otherwise, which leaves out list and map overheads: looser than
    DynamoDB's rules, which the tests below measure with)."""
    limited = dynamo_type.LimitedSizeDict

    def setitem(self: dict, key: str, value: Any) -> None:
        others = sum(dynamo_type.bytesize(k) + v.size() for k, v in self.items() if k != key)
        if others + dynamo_type.bytesize(key) + value.size() > 405_000:
            raise dynamo_type.ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    monkeypatch.setattr(limited, "__setitem__", setitem)
    yield


@pytest.mark.slow
def test_an_id_whose_history_outgrows_the_item_keeps_taking_puts_and_deletes(
    inprocess, dynamodb_sized_moto
) -> None:
    """Two configurations the old constructor accepted (and the new one does), one after the
    other on one id (a retention raised and the inline threshold lowered): 24 entries of 8 KB
    bodies with 255-character content types, then 2 KB versions under a longer retention.
    The old code held every one of them, an item of 349,146 bytes by DynamoDB's rules, past
    400 KB with the collector's largest condemnation. Every write now measures the item it
    makes and drops the oldest history that does not fit; the id keeps taking puts and
    deletes."""
    long_type = "application/x-" + "t" * 241
    assert len(long_type) == 255
    rid = inprocess.id("outgrown")
    first = inprocess.store(retention=Retention(23))  # inline threshold 8 KB
    for n in range(24):
        first.put(rid, large(n, 8100), updated_at=at(n), content_type=long_type)
    then = inprocess.store(inline_threshold=2048, retention=Retention(84))
    sizes = []
    for n in range(24, 89):
        result = then.put(rid, large(n, 2000), updated_at=at(n), content_type=long_type)
        assert (result.outcome, result.version) == ("stored", n + 1)
        sizes.append(written(inprocess, rid))
    deleted = then.delete(rid, deleted_at=at(89))
    assert deleted.outcome == "deleted"
    sizes.append(written(inprocess, rid))
    back = then.put(rid, large(90, 2000), updated_at=at(90), content_type=long_type)
    assert back.outcome == "stored"
    sizes.append(written(inprocess, rid))
    assert max(sizes) <= ITEM_BUDGET
    assert max(sizes) + CONDEMNATION_BYTES <= ITEM_LIMIT
    # Only the oldest versions went: the latest ones read back, the oldest retained is whole.
    history = then.history(rid)
    assert history[-1].version == back.version and history[-2].deleted
    oldest = history[0].version
    assert then.get(rid, version=oldest).body == large(oldest - 1, 8100 if oldest <= 24 else 2000)


def test_blind_writes_make_room_however_full_the_item_is(inprocess, dynamodb_sized_moto) -> None:
    """A blind write (a delete, or a put without delta history) cannot measure the item first:
    it measures the item it gets back and trims the oldest history at once when it is over
    the budget. Here an item of 16 KB entries (a store with a 16 KB inline threshold) is
    written on by a store whose retention holds more, smaller, entries: without the check it
    grows to 339,111 bytes."""
    long_type = "application/x-" + "t" * 241
    rid = inprocess.id("full-then-blind")
    first = inprocess.store(inline_threshold=16384, retention=Retention(11), delta_history=False)
    for n in range(16):
        first.put(rid, large(n, 16000), updated_at=at(n), content_type=long_type)
    then = inprocess.store(retention=Retention(23), delta_history=False)
    sizes = [written(inprocess, rid)]
    for n in range(16, 36, 2):
        assert then.put(rid, large(n, 8100), updated_at=at(n), content_type=long_type).outcome == (
            "stored"
        )
        sizes.append(written(inprocess, rid))
        assert then.delete(rid, deleted_at=at(n + 1)).outcome == "deleted"
        sizes.append(written(inprocess, rid))
    assert max(sizes) <= ITEM_BUDGET
    history = then.history(rid)
    assert history[-1].deleted and history[-2].version == 35


def test_a_blind_write_dynamodb_refuses_for_size_is_made_as_planned(inprocess) -> None:
    """DynamoDB refuses an append that would make the item over 400 KB (a ValidationException,
    which the SDK does not retry): the write reads the item, strongly consistent, and writes
    it as planned, within the budget, instead of failing the delete."""
    store = inprocess.store()
    rid = inprocess.id("refused-for-size")
    for n in range(3):
        store.put(rid, large(n, 20_000), updated_at=at(n))  # in S3: blind writes
    refusals: list[str] = []

    def refuse_once(params: dict, **_: Any) -> Any:
        body = params.get("body", b"")  # the serialised request
        body = body.decode() if isinstance(body, bytes) else str(body)
        if refusals or "list_append" not in body:
            return None
        refusals.append(body)
        error = {"Code": "ValidationException", "Message": TOO_LARGE}
        return AWSResponse("https://dynamodb", 400, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    inprocess.dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", refuse_once)
    try:
        deleted = store.delete(rid, deleted_at=at(3))
    finally:
        inprocess.dynamodb.meta.events.unregister("before-call.dynamodb.UpdateItem", refuse_once)
    assert refusals and (deleted.outcome, deleted.version) == ("deleted", 4)
    assert [v.version for v in store.history(rid)] == [1, 2, 3, 4]
    assert store.get(rid, version=3).body == large(2, 20_000)


TOO_LARGE = "Item size to update has exceeded the maximum allowed size"


def test_a_version_that_alone_outgrows_the_item_is_refused_with_a_typed_error(inprocess) -> None:
    store = inprocess.store()
    rid = inprocess.id("too-large-alone")
    store.put(rid, {"a": 1}, updated_at=at(1))
    huge = Entry(
        updated_at=parse_timestamp(at(2), max_future=None),
        content_hash="a" * 64,
        size=ITEM_BUDGET,
        written_at=1,
        token="tok",
        content_type="application/octet-stream",
        inline=b"\x00" * ITEM_BUDGET,
    )
    with pytest.raises(ItemTooLarge) as raised:
        store.index.put_planned(rid, huge, history=lambda item: [*item.history, item.current])
    assert isinstance(raised.value, InvalidInput)  # ingest: to the DLQ; Step Functions: fatal
    assert rid in str(raised.value) and "alone" in str(raised.value)
    assert raised.value.id == rid and raised.value.size > ITEM_BUDGET
    assert store.get(rid).json() == {"a": 1}  # nothing written
    assert store.put(rid, {"a": 2}, updated_at=at(2)).outcome == "stored"


# --- helpers ---------------------------------------------------------------------------------


def offline(**options: Any) -> VersionedHybridStore:
    return VersionedHybridStore(
        "t", "b", StoreConfig(**options), s3_client=object(), dynamodb_client=object()
    )


def read_raw(backend, rid: str) -> dict[str, Any]:
    return backend.dynamodb.get_item(
        TableName=backend.table_name, Key={"id": {"S": rid}}, ConsistentRead=True
    )["Item"]


def written(backend, rid: str) -> int:
    """The item's size by DynamoDB's rules, less any condemnation (the collector's share)."""
    raw = read_raw(backend, rid)
    return item_size({k: v for k, v in raw.items() if k not in (CONDEMNED_UNTIL, CONDEMNED_BODIES)})
