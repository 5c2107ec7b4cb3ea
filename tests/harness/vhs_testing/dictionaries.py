"""A zstd dictionary for tests (vhs/bodies/dictionaries.py, vhs/bodies/packing.py), trained
once a process on catalogue-like records of the shapes the tests write, so that stores which
write with dictionaries pack the tests' records with it where it makes them smaller
(`publish_to`)."""

from __future__ import annotations

import functools
import json
import random
from typing import Any

from vhs import VersionedHybridStore
from vhs.bodies.packing import Dictionary, train

ZLIB_CODEC = "zlib"  # the store as configured by default: zlib alone
ZSTD_CODEC = "zstd"  # writes with the test dictionary (and zstd deltas)
CODECS = (ZLIB_CODEC, ZSTD_CODEC)

_WORDS = "whale sea ship captain harpoon voyage ocean island storm crew letter map".split()  # noqa: SIM905


def catalogue_record(n: int, rng: random.Random) -> dict[str, Any]:
    """A record of the kind a catalogue publishes: the fields repeat, their values vary."""
    return {
        "id": f"b{n:07d}",
        "title": " ".join(rng.choice(_WORDS).title() for _ in range(rng.randint(2, 6))),
        "contributors": [
            {"name": f"Author {rng.randint(1, 500)}", "role": rng.choice(["author", "editor"])}
        ],
        "subjects": rng.sample(_WORDS, rng.randint(1, 4)),
        "year": rng.randint(1800, 2026),
        "notes": [f"Edition {rng.randint(1, 9)}.", f"Shelfmark PR{rng.randint(1000, 9999)}.M4"],
        "v": rng.randint(0, 9),
    }


@functools.cache
def trained_dictionary() -> Dictionary:
    rng = random.Random(39)
    samples = [
        json.dumps(catalogue_record(n, rng), sort_keys=True, separators=(",", ":")).encode()
        for n in range(400)
    ]
    return train(samples, 8 * 1024)


def publish_to(store: VersionedHybridStore) -> VersionedHybridStore:
    """`store`, with the test dictionary published as its newest."""
    store.dictionaries.publish(trained_dictionary())
    return store
