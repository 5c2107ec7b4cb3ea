"""The two forms an entry's ordering key, hashes and codec names take in the item (codec.py).

DynamoDB bills a write by the started kilobyte of the item, so the bytes of every held entry
are paid again on every update of the id. The compact layout, which every write makes, stores

* `t`, the ordering timestamp, as a number: microseconds since 1970-01-01T00:00:00Z, the
  precision of the stored form the ordering key compares (vhs/timestamps.py; never coarser),
  negative before 1970;
* `h` (and `bh`, and a part's `h`), a sha256, as its 32 raw bytes; a delete's TOMBSTONE_HASH
  stays the one-character string "~", which the conditions order after every binary digest
  (conditions.StoredForm);
* `z`, a delta's codec, as one character (CODEC_TAGS); zlib, the current entry's codec, held
  once an item, keeps its name.

The text layout, which every write made before, stores the same values as text: `t` in the
stored RFC 3339 form, hashes as lowercase hex, codecs by their names. Items in it are read as
they are; a write rewrites what it writes in the compact layout (docs/design.md, "Item
layouts"). Both forms are defined here, field by field (their constants and codec names),
written by codec.py (`time_value`, `hash_value`, `codec_value`) and read by decode.py
(`time_of_number`, `time_of_text`, `hash_of_bytes`, `hash_of_text`, `codec_of_text`), each
direction beside its composition into entries, so that an item is encoded, or decoded, in one
pass; the round-trip tests (tests/core/test_item_layouts.py) hold the two directions together.
The text form is written only where a test or benchmark sets `DynamoIndex.layout`.

DynamoDB orders numbers by value and binary values by their unsigned bytes, so every
comparison the ordering conditions make gives the same answer in either layout; a comparison
between two types is never made, because each branch of a condition first checks the form
the current entry is stored in (conditions.CONDITION_FORMS).
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime, timedelta

from ..bodies.packing import DELTA, SAME, ZLIB, ZSTD, ZSTD_DELTA


class Layout(enum.StrEnum):
    COMPACT = "compact"  # what every write makes
    TEXT = "text"  # what every write made before: read, and rewritten by the next write


CODEC_TAGS = {DELTA: "d", SAME: "s", ZSTD: "Z", ZSTD_DELTA: "D"}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
# The stored form's range (timestamps.parse_timestamp: four-digit years).
EARLIEST = (datetime(1000, 1, 1, tzinfo=UTC) - EPOCH) // MICROSECOND
LATEST = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - EPOCH) // MICROSECOND

# The stored form (timestamps.stored_form) exactly: fixed width, so string order is time order.
STORED_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
DIGEST_BYTES = 32

# The codecs each layout names, by where `z` is: an entry's body is zlib or a delta, a part's
# zlib or the next version's bytes (packing.py, deltas.py).
CODECS = {
    Layout.COMPACT: {
        "entry": {ZLIB: ZLIB, "d": DELTA, "Z": ZSTD, "D": ZSTD_DELTA},
        "part": {ZLIB: ZLIB, "s": SAME},
    },
    Layout.TEXT: {
        "entry": {ZLIB: ZLIB, DELTA: DELTA, ZSTD: ZSTD, ZSTD_DELTA: ZSTD_DELTA},
        "part": {ZLIB: ZLIB, SAME: SAME},
    },
}
