"""DynamoDB's documented limits on an expression, and the one measure of a request against them.

AWS's "Constraints in Amazon DynamoDB", section "Expression parameters"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html#limits-expression-parameters):
the maximum length of any expression string is 4 KB; the maximum number of operators or
functions allowed in an UpdateExpression is 300 (AWS's example "Count expression operators in
DynamoDB with an AWS SDK" applies the 300 to every expression, and so does this module); an
expression attribute name or value placeholder is at most 255 bytes. DynamoDB refuses a
request past any of them with a ValidationException, which no retry can fix.

Every expression VHS sends is built by vhs/index/updates.py and vhs/index/table.py, and each is
a fixed form or grows only with what is bounded (the parts of a version, MAX_PARTS); none grows
with retention or a batch's size. tests/core/test_expression_limits.py drives every builder at
the extreme configurations the store's constructor accepts, and every request a store, the
collector, `vhs migrate` and `vhs reindex` make, through `problems`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_EXPRESSION_BYTES = 4 * 1024
MAX_OPERATORS = 300
MAX_PLACEHOLDER_BYTES = 255
# The request parameters that hold an expression.
EXPRESSION_PARAMETERS = (
    "UpdateExpression",
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
    "ProjectionExpression",
)
# What counts as an operator or a function, counted generously (an upper bound): every
# comparator, AND, OR, NOT, BETWEEN, IN, every function, and + and - in a SET. SET's own "="
# is counted too, though AWS's example ("SET a = :val1 + :val2 + :val3 contains two +
# operators") does not: an over-count only makes the measure stricter than DynamoDB.
_OPERATOR = re.compile(
    r"<>|<=|>=|=|<|>|\+|-"
    r"|\b(?:AND|OR|NOT|BETWEEN|IN)\b"
    r"|\b(?:attribute_exists|attribute_not_exists|attribute_type|begins_with|contains|size"
    r"|if_not_exists|list_append)\s*\(",
    re.IGNORECASE,
)
# Placeholders (#name, :value) are not operators: their "-" cannot occur (names are \w).
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


@dataclass(frozen=True)
class Measure:
    """An expression's length in bytes (UTF-8) and its operators and functions."""

    length: int
    operators: int

    def within(self) -> bool:
        return self.length <= MAX_EXPRESSION_BYTES and self.operators <= MAX_OPERATORS


def measure(expression: str) -> Measure:
    """`expression` as DynamoDB's limits count it."""
    bare = _PLACEHOLDER.sub("_", expression)  # a placeholder's name is no operator
    return Measure(len(expression.encode("utf-8")), len(_OPERATOR.findall(bare)))


def problems(request: Mapping[str, Any]) -> list[str]:
    """What of a DynamoDB request's parameters (UpdateItem, Query, Scan, GetItem, ... as boto3
    takes them) crosses an expression limit: [] when nothing does."""
    found = []
    for name in EXPRESSION_PARAMETERS:
        if name in request:
            size = measure(request[name])
            if size.length > MAX_EXPRESSION_BYTES:
                found.append(f"{name} is {size.length} bytes, over {MAX_EXPRESSION_BYTES}")
            if size.operators > MAX_OPERATORS:
                found.append(f"{name} has {size.operators} operators, over {MAX_OPERATORS}")
    for kind in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        for placeholder in request.get(kind, {}):
            if len(placeholder.encode("utf-8")) > MAX_PLACEHOLDER_BYTES:
                found.append(f"{kind} placeholder {placeholder[:40]!r}… is over 255 bytes")
    return found
