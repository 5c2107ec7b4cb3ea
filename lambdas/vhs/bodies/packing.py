"""How a body is packed into the item: compressed, or kept against the version after it.

DynamoDB bills every byte of an item on every write of it, so an inline body is stored in the
smallest form at hand (`compress`), and an earlier version as the smallest difference from its
successor (`compress_against`). The codecs, an entry's `z` (index.layouts.CODEC_TAGS names their
compact tags):

* ZLIB: zlib at level 6;
* ZSTD: a zstd frame, with the store's trained dictionary that the entry names (its `zd`:
  dictionaries.py), when the store writes with one; without a dictionary zstd is not tried:
  on small records it makes no smaller frames than zlib;
* DELTA: zlib with the successor's body as its preset dictionary;
* ZSTD_DELTA: a zstd frame with the successor's body as its raw dictionary, which takes about
  two thirds of DELTA's bytes on catalogue edits;
* SAME: a part whose bytes the next version holds (history/stored_deltas.py); None: stored as it is.

Every form is decoded bounded by the entry's recorded size, and checked against its hash by
the caller, so a damaged or hostile item can make a reader neither inflate a bomb nor return
wrong bytes.

zstd is Python 3.14's `compression.zstd`, which the Lambda runtime has. Older Pythons, where
the library and the CLI also run, use the `backports.zstd` package (pyproject.toml): PEP 784's
backport by the module's own author, the same API, wheels for every platform. Without either,
bodies are packed with zlib alone, and a body packed with zstd cannot be read
(`ZstdUnavailable`).
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ZstdUnavailable


def _zstd() -> Any:
    try:
        from compression import zstd  # Python 3.14 and later

        return zstd
    except ImportError:
        pass
    try:
        from backports import zstd  # type: ignore[no-redef]

        return zstd
    except ImportError:
        return None


zstd = _zstd()

ZLIB = "zlib"
ZSTD = "zstd"
DELTA = "zdelta"
ZSTD_DELTA = "zstd-delta"
SAME = "same"
CODECS = (ZLIB, ZSTD, DELTA, ZSTD_DELTA, SAME)
# zstd's strongest level but one costs about a millisecond on a record of a few KB with a
# 64 KB dictionary: small beside a write's round trip, and every byte saved is billed on
# every later write of the item.
ZSTD_LEVEL = 19
# A dictionary is named by the first bytes of its sha256: 64 bits tell one store's few apart.
DICTIONARY_ID_BYTES = 8
# zstd takes no shorter raw dictionary (a successor this small is no help to a delta anyway).
MIN_RAW_DICTIONARY = 8


class Packed(NamedTuple):
    """A body as the item holds it: its bytes, codec (None: as it is) and the id of the
    dictionary it was packed with (ZSTD only)."""

    data: bytes
    codec: str | None = None
    dictionary: str | None = None


@dataclass(frozen=True)
class Dictionary:
    """A zstd dictionary: its content, and its id, the first DICTIONARY_ID_BYTES of the
    content's sha256 in hex."""

    content: bytes = field(repr=False)
    id: str = ""

    def __post_init__(self) -> None:
        digest = hashlib.sha256(self.content).hexdigest()[: 2 * DICTIONARY_ID_BYTES]
        if self.id and self.id != digest:
            raise ValueError(f"dictionary {self.id} holds content whose id is {digest}")
        object.__setattr__(self, "id", digest)

    @functools.cached_property
    def compiled(self) -> Any:
        """zstd's form of it, digested once per process (ZstdDict caches its tables)."""
        return _require_zstd().ZstdDict(self.content)


def zstd_available() -> bool:
    return zstd is not None


def _require_zstd() -> Any:
    if zstd is None:
        raise ZstdUnavailable(
            "a body packed with zstd needs Python 3.14's compression.zstd, or the "
            "backports.zstd package on an older Python"
        )
    return zstd


def _frame(data: bytes, zstd_dict: Any) -> bytes:
    """One zstd frame without the fields the entry holds already: the content size (its
    `n`), the dictionary's id (its `zd`) and a checksum (its sha256 `h`)."""
    module = _require_zstd()
    parameter = module.CompressionParameter
    options = {
        parameter.compression_level: ZSTD_LEVEL,
        parameter.checksum_flag: 0,
        parameter.content_size_flag: 0,
        parameter.dict_id_flag: 0,
    }
    compressor = module.ZstdCompressor(options=options, zstd_dict=zstd_dict)
    return compressor.compress(data, mode=module.ZstdCompressor.FLUSH_FRAME)


def pack(data: bytes, codec: str, dictionary: Dictionary | None = None) -> Packed:
    """`data` packed with `codec`: ZLIB, or ZSTD (with `dictionary`, if given)."""
    if codec == ZLIB:
        return Packed(zlib.compress(data, 6), ZLIB)
    if codec == ZSTD:
        compiled = dictionary.compiled if dictionary is not None else None
        return Packed(_frame(data, compiled), ZSTD, dictionary.id if dictionary else None)
    raise ValueError(f"{codec!r} packs a body against its successor, or is no codec")


def compress(data: bytes, dictionary: Dictionary | None = None) -> Packed:
    """`data` in its smallest form: as it is, zlib, or (given a dictionary, where zstd is at
    hand) zstd with it."""
    candidates = [Packed(data), pack(data, ZLIB)]
    if dictionary is not None and zstd is not None:
        candidates.append(pack(data, ZSTD, dictionary))
    return min(candidates, key=lambda candidate: len(candidate.data))


def compress_against(data: bytes, successor: bytes, *, with_zstd: bool = False) -> Packed:
    """`data` as its difference from `successor`: the smaller of zlib with `successor` as
    preset dictionary and (`with_zstd`, where zstd is at hand) zstd with it as raw dictionary.
    For two
    versions of a record that differ by an edit, a few dozen bytes. zlib's stream records the
    dictionary's Adler-32; either way the caller's hash check refuses a decode against the
    wrong successor."""
    deflater = zlib.compressobj(9, zdict=successor)
    best = Packed(deflater.compress(data) + deflater.flush(), DELTA)
    if with_zstd and zstd is not None and len(successor) >= MIN_RAW_DICTIONARY:
        framed = _frame(data, zstd.ZstdDict(successor, is_raw=True))
        if len(framed) < len(best.data):
            best = Packed(framed, ZSTD_DELTA)
    return best


def decompress(
    data: bytes,
    codec: str | None,
    size: int,
    *,
    successor: bytes | None = None,
    dictionary: Dictionary | None = None,
) -> bytes:
    """The body `data` stores, decoded to at most `size` + 1 bytes (`size`: the entry's
    recorded size): past it the output stops, and the caller's hash check then refuses it. A
    delta needs its `successor`'s body, ZSTD with a dictionary that dictionary. Raises
    ValueError (zlib.error, zstd's error, ZstdUnavailable) for data that does not decode."""
    limit = max(size, 0) + 1
    if codec is None:
        return data
    if codec in (DELTA, ZSTD_DELTA) and successor is None:
        raise ValueError("a delta body needs the body of the version after it")
    try:
        if codec == ZLIB:
            return zlib.decompressobj().decompress(data, limit)
        if codec == DELTA:
            return zlib.decompressobj(zdict=successor).decompress(data, limit)
        if codec == ZSTD:
            module = _require_zstd()
            zstd_dict = dictionary.compiled if dictionary is not None else None
            return module.ZstdDecompressor(zstd_dict=zstd_dict).decompress(data, limit)
        if codec == ZSTD_DELTA:
            module = _require_zstd()
            raw = module.ZstdDict(successor, is_raw=True)
            return module.ZstdDecompressor(zstd_dict=raw).decompress(data, limit)
    except zlib.error as error:
        raise ValueError(f"zlib: {error}") from None
    except ZstdUnavailable:
        raise
    except Exception as error:  # zstd's ZstdError: not a ValueError
        if zstd is not None and isinstance(error, zstd.ZstdError):
            raise ValueError(f"zstd: {error}") from None
        raise
    raise ValueError(f"unknown body codec {codec!r}")


def train(samples: list[bytes], size: int) -> Dictionary:
    """A dictionary of `size` bytes trained on `samples` (zstd's COVER trainer)."""
    return Dictionary(_require_zstd().train_dict(samples, size).dict_content)
