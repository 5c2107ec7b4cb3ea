"""What `vhs verify` reports: findings, one per problem, and the run's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class FindingKind(StrEnum):
    DANGLING = "dangling"  # the pointer's S3 object does not exist
    HASH_MISMATCH = "hash_mismatch"  # the body's sha256 is not the one the pointer names
    SIZE_MISMATCH = "size_mismatch"  # the body's size is not the entry's
    METADATA_MISMATCH = "metadata_mismatch"  # the object's vhs-id metadata is not the id
    UNPARSEABLE = "unparseable"  # an item or entry not in the store's layout
    NOT_FOUND = "not_found"  # (verifying named ids only) no item for the id
    CHECK_FAILED = "check_failed"  # the check itself failed (access denied, 5xx): unknown


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    id: str
    version: int | None  # the newest retained version affected (None: the whole item)
    location: str  # s3://bucket/key, dynamodb://table/id, or dynamodb://table/id#vN
    detail: str
    versions: tuple[int, ...] = ()  # every retained version that shares this body

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind), "versions": list(self.versions)}

    def __str__(self) -> str:
        which = f" v{self.version}" if self.version is not None else ""
        return f"{self.kind} {self.id!r}{which} at {self.location}: {self.detail}"


@dataclass
class VerifyReport:
    items: int = 0  # items read
    unversioned: int = 0  # items with no version (only garbage-collector markers)
    versions: int = 0  # retained versions checked
    deletes: int = 0  # of which tombstones (nothing to check)
    inline: int = 0  # of which inline bodies
    s3: int = 0  # of which S3 pointers
    s3_objects: int = 0  # distinct S3 objects looked up
    unconfirmed: int = 0  # S3 objects whose content no checksum or hash confirmed (not deep,
    #                       and S3 returned no full-object SHA-256: multipart or rewritten)
    bytes_hashed: int = 0  # bytes read and hashed (inline bodies, and S3 bodies with deep)
    raced: int = 0  # dangling pointers a concurrent writer or retention explained away
    findings_total: int = 0
    # Versioned items by the layout of their entries: "compact", "text" (written before the
    # compact layout) or "mixed" (both: docs/design.md, "Item layouts"). `vhs migrate`
    # rewrites the last two.
    layouts: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)  # the first `max_findings`
    deep: bool = False

    @property
    def ok(self) -> bool:
        return self.findings_total == 0

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "findings"}
        return {**data, "ok": self.ok, "findings": [f.as_dict() for f in self.findings]}


@dataclass(frozen=True)
class VerifyProgress:
    items: int  # items read so far
    versions: int  # retained versions checked so far (S3 ones once their lookup is done)
    findings: int
    # DescribeTable's ItemCount (updated about every 6 hours), or the number of ids asked for
    estimated_items: int | None
    missing: int = 0  # ids asked for that have no item (each a not_found finding)

    @property
    def looked_up(self) -> int:
        """Items read and ids found missing: what `estimated_items` counts, when ids are
        given."""
        return self.items + self.missing


ProgressCallback = Callable[[VerifyProgress], None]
FindingCallback = Callable[[Finding], None]
