"""`vhs dictionary train` and `vhs dictionary list`: the zstd dictionaries a store packs its
bodies with (docs/design.md, "Dictionaries"; vhs/bodies/dictionaries.py keeps them).

Training reads the current version of up to `sample` items with a Scan (the table's hash
order: a sample no id order biases), takes each inline body (bodies in S3 are never packed,
so never trained on), and trains a dictionary of `size` bytes on nine tenths of them. The other
tenth measures it: those bodies packed as the store packs without a dictionary (zlib), and as
it would with this one (the smaller of zlib and zstd with it). The dictionary is published
(new writes of stores that write with dictionaries use it within dictionaries.REFRESH_SECONDS)
unless it is a dry run, or the held-out bodies do not come out smaller with it.

Cost: the Scan reads `sample` items (eventually consistent: half a read unit each per 4 KB);
publishing is two S3 PUTs. Nothing in the table is rewritten: bodies already stored keep
their packing until their record's next write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from vhs.bodies.packing import compress, train, zstd_available
from vhs.errors import InvalidInput, UndecodableBody
from vhs.history.stored_deltas import inline_body
from vhs.index.codec import MalformedItem, item_from_dynamo
from vhs.index.scan import scan_pages
from vhs.store import VersionedHybridStore

DEFAULT_SAMPLE = 5000
DEFAULT_SIZE = 64 * 1024
# zstd's trainer needs samples enough to find what they share: fewer are refused up front.
MIN_SAMPLES = 20
MIN_SIZE, MAX_SIZE = 1024, 1024 * 1024


@dataclass
class TrainReport:
    dictionary: str | None  # its id (published or not); None when there was nothing to train
    size: int  # its bytes
    scanned: int  # items read
    samples: int  # inline bodies trained on
    held_out: int  # inline bodies it was measured on
    zlib_bytes: int  # the held-out bodies packed without a dictionary
    packed_bytes: int  # and with it (each the smaller of zlib and zstd with it)
    published: bool

    @property
    def ratio(self) -> float | None:
        """The held-out bodies' bytes with the dictionary, over without it."""
        return self.packed_bytes / self.zlib_bytes if self.zlib_bytes else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def train_dictionary(
    store: VersionedHybridStore,
    *,
    sample: int = DEFAULT_SAMPLE,
    size: int = DEFAULT_SIZE,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> TrainReport:
    """Train a dictionary on up to `sample` of `store`'s current inline bodies and publish it
    (not if `dry_run`, or if it packs the held-out bodies no smaller). `progress(scanned,
    bodies)` after every page. Raises InvalidInput for a bad sample or size, or too few
    bodies to train on."""
    if sample < MIN_SAMPLES:
        raise InvalidInput("--sample", f"must be at least {MIN_SAMPLES}, not {sample}")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise InvalidInput("--size", f"must be {MIN_SIZE} to {MAX_SIZE} bytes, not {size}")
    if not zstd_available():
        raise InvalidInput(
            "dictionary", "zstd is not at hand: Python 3.14, or the backports.zstd package"
        )
    bodies, scanned = _sample_bodies(store, sample, progress)
    if len(bodies) < MIN_SAMPLES:
        raise InvalidInput(
            "--sample",
            f"the table holds {len(bodies)} inline bodies in the {scanned} items read: "
            f"at least {MIN_SAMPLES} are needed to train on",
        )
    held_out = bodies[::10]
    training = [body for n, body in enumerate(bodies) if n % 10]
    dictionary = train(training, size)
    zlib_bytes = sum(len(compress(body).data) for body in held_out)
    packed_bytes = sum(len(compress(body, dictionary).data) for body in held_out)
    publish = not dry_run and packed_bytes < zlib_bytes
    if publish:
        store.dictionaries.publish(dictionary)
    return TrainReport(
        dictionary.id,
        len(dictionary.content),
        scanned,
        len(training),
        len(held_out),
        zlib_bytes,
        packed_bytes,
        publish,
    )


def _sample_bodies(
    store: VersionedHybridStore, sample: int, progress: Callable[[int, int], None] | None
) -> tuple[list[bytes], int]:
    """Up to `sample` current inline bodies, and how many items were read for them."""
    bodies: list[bytes] = []
    scanned = 0
    for page in scan_pages(store.index.dynamodb, store.index.table, page_size=100):
        for raw in page.items:
            scanned += 1
            try:
                item = item_from_dynamo(raw)
            except MalformedItem:
                continue  # `vhs verify` names it
            if item is None or item.current.deleted or item.current.inline is None:
                continue
            try:
                bodies.append(inline_body(item.versions(), item.version, store.dictionaries.get))
            except UndecodableBody:
                continue  # `vhs verify` names it
            if len(bodies) >= sample:
                break
        if progress is not None:
            progress(scanned, len(bodies))
        if len(bodies) >= sample:
            break
    return bodies, scanned
