"""The one whole-table read in VHS: a (parallel) Scan of the table, page by page (`vhs verify`,
`vhs migrate`, `vhs reindex`, `vhs dictionary train`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScanPage:
    """One page of a (parallel) Scan of the table: raw items, and the key to start the next
    page after (None: the segment is done)."""

    items: list[dict[str, Any]]
    last_key: dict[str, Any] | None


def scan_pages(
    dynamodb: Any,
    table: str,
    *,
    segment: int = 0,
    total_segments: int = 1,
    consistent_reads: bool = False,
    page_size: int | None = None,
    start_key: Mapping[str, Any] | None = None,
) -> Iterator[ScanPage]:
    """The raw items of one segment of a parallel Scan, page by page, from after `start_key`.
    The one whole-table read in VHS (`vhs verify`, `vhs reindex`): eventually consistent
    unless `consistent_reads`, at most `page_size` items a page."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "Segment": segment,
        "TotalSegments": total_segments,
        "ConsistentRead": consistent_reads,
    }
    if page_size:
        kwargs["Limit"] = page_size
    if start_key:
        kwargs["ExclusiveStartKey"] = dict(start_key)
    while True:
        response = dynamodb.scan(**kwargs)
        last = response.get("LastEvaluatedKey")
        yield ScanPage(response.get("Items", []), last)
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last
