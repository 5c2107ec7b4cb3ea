"""moto's DynamoDB responses written directly (vhs_ops/local/moto_dynamodb.py: in-process moto in
the tests, and the local stack's server) parse to exactly what moto's own serializer gives, for
every kind of request the store, the collector and the tests make, and every kind of value."""

from __future__ import annotations

import contextlib
from typing import Any

import boto3
import moto
import pytest
from botocore.exceptions import ClientError

from vhs import shapes
from vhs_ops import provisioning
from vhs_ops.local.moto_dynamodb import direct_responses
from vhs_ops.local.stack import MotoServer, client
from vhs_testing.backends import atomic_inprocess_dynamodb

TABLE = "responses"
ITEM = {
    "id": {"S": "a"},
    "n": {"N": "12.5"},
    "b": {"B": b"\x00\xffbinary"},
    "ss": {"SS": ["x", "y"]},
    "ns": {"NS": ["1", "2"]},
    "bs": {"BS": [b"\x01", b"\x02"]},
    "l": {"L": [{"S": "s"}, {"N": "1"}, {"B": b"\x03"}, {"NULL": True}, {"BOOL": False}]},
    "m": {"M": {"k": {"M": {"deep": {"B": b"\x04"}}}, "e": {"L": []}}},
    "gcd": {"N": "5"},
}


def conversation(dynamodb: Any) -> list[Any]:
    """Every kind of request, as the store and the collector make them; their responses."""
    answers: list[Any] = []

    def ask(operation: str, **kwargs: Any) -> None:
        try:
            answer = getattr(dynamodb, operation)(**kwargs)
        except ClientError as error:
            answer = {"error": error.response["Error"], "item": error.response.get("Item")}
            answer["reasons"] = error.response.get("CancellationReasons")
        answer.pop("ResponseMetadata", None)
        answers.append((operation, answer))

    key = {"id": {"S": "a"}}
    provisioning.create_table(dynamodb, TABLE)
    ask("describe_table", TableName=TABLE)
    ask("put_item", TableName=TABLE, Item=ITEM)
    ask("get_item", TableName=TABLE, Key=key)
    ask("get_item", TableName=TABLE, Key=key, ConsistentRead=True, ProjectionExpression="b, m")
    ask("get_item", TableName=TABLE, Key={"id": {"S": "missing"}})
    for returned in ("ALL_NEW", "ALL_OLD", "UPDATED_NEW", "NONE"):
        ask(
            "update_item",
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET n = n + :one, l = list_append(l, :more) REMOVE ss",
            ExpressionAttributeValues={":one": {"N": "1"}, ":more": {"L": [{"B": b"\x05"}]}},
            ReturnValues=returned,
        )
    ask(
        "update_item",
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET n = :n",
        ConditionExpression="attribute_not_exists(id)",
        ExpressionAttributeValues={":n": {"N": "0"}},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    ask(
        "transact_write_items",
        TransactItems=[
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": key,
                    "UpdateExpression": "SET n = :n",
                    "ConditionExpression": "attribute_not_exists(id)",
                    "ExpressionAttributeValues": {":n": {"N": "0"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ],
    )
    for n in range(5):
        ask("put_item", TableName=TABLE, Item={"id": {"S": f"p{n}"}, "gcd": {"N": str(n)}})
    ask("batch_get_item", RequestItems={TABLE: {"Keys": [key, {"id": {"S": "p1"}}]}})
    ask("scan", TableName=TABLE, Limit=2)
    ask("scan", TableName=TABLE, Select="COUNT")
    ask("query", TableName=TABLE, KeyConditionExpression="id = :a", **_values(":a", "a"))
    ask(
        "scan",
        TableName=TABLE,
        IndexName=shapes.CONDEMNED_INDEX_NAME,
        FilterExpression="gcd < :five",
        ExpressionAttributeValues={":five": {"N": "5"}},
    )
    ask("delete_item", TableName=TABLE, Key=key, ReturnValues="ALL_OLD")
    ask("list_tables")
    return answers


def _values(name: str, value: str) -> dict[str, Any]:
    return {"ExpressionAttributeValues": {name: {"S": value}}}


@pytest.mark.parametrize("direct", [False, True])
def test_conversation_runs(direct: bool) -> None:
    """The conversation itself is valid on both (so a comparison below compares answers)."""
    with _moto(direct) as dynamodb:
        answers = conversation(dynamodb)
    assert dict(answers)["get_item"] == {}  # the last get_item: a missing item
    assert any(op == "update_item" and "error" in answer for op, answer in answers)


def test_direct_responses_parse_to_what_motos_serializer_gives() -> None:
    with _moto(False) as dynamodb:
        expected = conversation(dynamodb)
    with _moto(True) as dynamodb:
        got = conversation(dynamodb)
    assert len(got) == len(expected)
    for (operation, answer), (_, wanted) in zip(got, expected, strict=True):
        assert _without_volatile(answer) == _without_volatile(wanted), operation


def test_a_tables_description_times_and_all_read_the_same() -> None:
    """Both ways on one table: its creation time (a timestamp: epoch seconds in JSON) too."""
    with _moto(False) as dynamodb:
        provisioning.create_table(dynamodb, TABLE)
        dynamodb.put_item(TableName=TABLE, Item=ITEM)
        reads = [
            ("describe_table", {"TableName": TABLE}),
            ("get_item", {"TableName": TABLE, "Key": {"id": {"S": "a"}}}),
            ("scan", {"TableName": TABLE}),
        ]
        expected = [getattr(dynamodb, op)(**kwargs) for op, kwargs in reads]
        with direct_responses():
            got = [getattr(dynamodb, op)(**kwargs) for op, kwargs in reads]
    for answer in (*expected, *got):
        answer.pop("ResponseMetadata")
    assert got == expected
    assert expected[0]["Table"]["CreationDateTime"]


def _without_volatile(answer: Any) -> Any:
    """A table's description carries its creation time and ARN's suffix: not the subject."""
    if isinstance(answer, dict):
        return {
            k: _without_volatile(v)
            for k, v in answer.items()
            if k not in ("CreationDateTime", "LatestStreamLabel", "LatestStreamArn")
        }
    if isinstance(answer, list):
        return [_without_volatile(v) for v in answer]
    return answer


@contextlib.contextmanager
def _moto(direct: bool) -> Any:
    with moto.mock_aws(), atomic_inprocess_dynamodb():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        if direct:
            with direct_responses():
                yield dynamodb
        else:
            yield dynamodb


def test_the_local_stacks_server_answers_as_motos_own() -> None:
    """vhs_ops.local.motoserver (which installs it) against moto's own server, unchanged."""
    answers = []
    for ours in (False, True):
        with MotoServer(atomic_dynamodb=ours) as server:
            answers.append(conversation(client("dynamodb", server.endpoint)))
    assert [operation for operation, _ in answers[1]] == [operation for operation, _ in answers[0]]
    for (operation, got), (_, wanted) in zip(answers[1], answers[0], strict=True):
        assert _without_volatile(got) == _without_volatile(wanted), operation
