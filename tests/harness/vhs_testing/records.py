"""Record helpers the store's tests share: a fixed clock and incompressible bodies."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def large(seed: int, size: int = 40_000) -> bytes:
    """Incompressible bytes, so the body cannot be inlined."""
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])
