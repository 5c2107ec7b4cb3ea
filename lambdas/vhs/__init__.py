"""VHS: a versioned hybrid store on AWS.

from vhs import VersionedHybridStore, RecordNotFound

store = VersionedHybridStore.from_env()
store.put("b1234", {"title": "Moby-Dick"}, updated_at="2026-11-22T10:00:00Z")
store.get("b1234").json()
"""

from .errors import (
    BodyHashMismatch,
    BodyTooLarge,
    ConfigurationError,
    DanglingPointer,
    IntegrityError,
    InvalidId,
    InvalidInput,
    InvalidPart,
    InvalidRecord,
    InvalidTimestamp,
    PartNotFound,
    PartTooLarge,
    RecordNotFound,
    VhsError,
    WriteConflict,
)
from .model import DeleteResult, PartInfo, PutResult, Record, VersionInfo
from .ordering import Outcome
from .retention import Retention
from .store import VersionedHybridStore

__all__ = [
    "BodyHashMismatch",
    "BodyTooLarge",
    "ConfigurationError",
    "DanglingPointer",
    "DeleteResult",
    "IntegrityError",
    "InvalidId",
    "InvalidInput",
    "InvalidPart",
    "InvalidRecord",
    "InvalidTimestamp",
    "Outcome",
    "PartInfo",
    "PartNotFound",
    "PartTooLarge",
    "PutResult",
    "Record",
    "RecordNotFound",
    "Retention",
    "VersionInfo",
    "VersionedHybridStore",
    "VhsError",
    "WriteConflict",
]
