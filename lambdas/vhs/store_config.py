"""The store's configuration as one value, `StoreConfig`, and the one way it is read from the
environment (`StoreConfig.from_settings` of what `settings.StoreSettings.from_env` read).

A store is given where it lives (its table and bucket, and the clients to reach them) and one
`StoreConfig` for how it keeps what it stores, as s3transfer's transfer manager takes one
`TransferConfig`. The value is checked when it is made: a setting that cannot work raises a
ConfigurationError naming its field (`inline_threshold`, `max_body_size`, `retention.versions`,
...), or an InvalidId for a bad `prefix`, so a store is never built half-configured. What
depends on two settings at once and on the item's rules (that the entries retention holds fit
one item: index.budget.entry_budget) is checked by the store that takes it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from . import keys
from .bodies.s3 import MULTIPART_THRESHOLD
from .codec import MAX_BODY_SIZE
from .errors import ConfigurationError
from .retention import Retention
from .settings import StoreSettings

# From the cost model in docs/design.md: one S3 PUT costs as much as 8 KB of DynamoDB
# writes, so a body whose stored (compressed) form is at most 8 KB is cheaper inline.
DEFAULT_INLINE_THRESHOLD = 8 * 1024
MAX_INLINE_THRESHOLD = 64 * 1024
DEFAULT_MAX_FUTURE = timedelta(days=1)
DEFAULT_CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True)
class StoreConfig:
    """How a store keeps what it stores; every field has the library's default.

    * `prefix`: the folder of the store's bodies in its bucket (and of its dictionaries);
    * `inline_threshold`: the largest stored (compressed) body kept in the item, in bytes
      (0 to 65536);
    * `retention`: which earlier versions stay readable (retention.py);
    * `max_body_size`: the largest body or part a put takes, in bytes (up to codec's 5 GiB);
    * `max_future`: how far past now an `updated_at` may be (None: no bound);
    * `consistent_reads`: whether reads of the table are strongly consistent;
    * `multipart_threshold`: the body size from which an upload is multipart;
    * `clock`: the store's clock (seconds since the epoch), its write times' source;
    * `clock_skew`: how far apart this writer's clock and the garbage collector's may be;
    * `delta_history`: earlier inline versions kept as deltas against their successor
      (docs/design.md, "History: the arithmetic"); False keeps them whole;
    * `dictionaries`: new writes packed with zstd and the newest published dictionary
      (docs/design.md, "Dictionaries"); every store reads what a dictionary packed.
    """

    prefix: str = ""
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD
    retention: Retention = field(default_factory=Retention)
    max_body_size: int = MAX_BODY_SIZE
    max_future: timedelta | None = DEFAULT_MAX_FUTURE
    consistent_reads: bool = True
    multipart_threshold: int = MULTIPART_THRESHOLD
    clock: Callable[[], float] = time.time
    clock_skew: timedelta = DEFAULT_CLOCK_SKEW
    delta_history: bool = True
    dictionaries: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.inline_threshold <= MAX_INLINE_THRESHOLD:
            raise ConfigurationError(
                f"inline_threshold must be between 0 and {MAX_INLINE_THRESHOLD} bytes"
            )
        if not 0 < self.max_body_size <= MAX_BODY_SIZE:
            raise ConfigurationError(f"max_body_size must be between 1 and {MAX_BODY_SIZE}")
        object.__setattr__(self, "prefix", keys.validate_prefix(self.prefix))

    @classmethod
    def from_settings(cls, settings: StoreSettings) -> StoreConfig:
        """The configuration the environment gives (`StoreSettings.from_env`): its prefix,
        inline threshold, retention, delta history and dictionaries; the library's default for
        what it leaves unset."""
        default = cls()
        return cls(
            prefix=settings.prefix,
            inline_threshold=_or(settings.inline_threshold, default.inline_threshold),
            retention=Retention(
                versions=_or(settings.retain_versions, default.retention.versions),
                age=settings.retain_age,
                after_delete=_or(settings.retain_after_delete, default.retention.after_delete),
            ),
            delta_history=_or(settings.delta_history, default.delta_history),
            dictionaries=_or(settings.dictionaries, default.dictionaries),
        )


T = TypeVar("T")


def _or(value: T | None, default: T) -> T:
    return default if value is None else value
