"""A batch's answer to Lambda beside Powertools' BatchProcessor's: the ingest and change feed
handlers answer from what they computed, and must answer as the processor would have."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError


def processed(
    event_type: EventType, records: list[dict[str, Any]], record_handler: Callable[[Any], Any]
) -> dict[str, Any]:
    """Powertools' answer: `record_handler` run on each record by a BatchProcessor."""
    processor = BatchProcessor(event_type=event_type)
    return process_partial_response({"Records": records}, record_handler, processor)


def answered_alike(
    ours: Callable[[], dict[str, Any]], theirs: Callable[[], dict[str, Any]]
) -> BatchProcessingError | None:
    """Whether both answer the same, or both raise BatchProcessingError with the same message
    (asserted); our error, if raised."""
    try:
        expected = theirs()
    except BatchProcessingError as error:
        with pytest.raises(BatchProcessingError) as raised:
            ours()
        assert raised.value.msg == error.msg
        assert len(raised.value.child_exceptions) == len(error.child_exceptions)
        return raised.value
    assert ours() == expected
    return None
