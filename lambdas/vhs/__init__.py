"""VHS, a versioned hybrid store on AWS: `VersionedHybridStore`, its values and errors."""

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
    RecordDeleted,
    RecordNotFound,
    VersionNotRetained,
    VhsError,
    WriteConflict,
)
from .history.diffs import Diff
from .model import DeleteResult, PartInfo, PutResult, Record, VersionInfo
from .ordering import Outcome
from .retention import Retention
from .store import VersionedHybridStore
from .store_config import StoreConfig

__all__ = [
    "BodyHashMismatch",
    "BodyTooLarge",
    "ConfigurationError",
    "DanglingPointer",
    "DeleteResult",
    "Diff",
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
    "RecordDeleted",
    "RecordNotFound",
    "Retention",
    "StoreConfig",
    "VersionInfo",
    "VersionNotRetained",
    "VersionedHybridStore",
    "VhsError",
    "WriteConflict",
]
