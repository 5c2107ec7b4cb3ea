"""The typed errors of VHS.

Bad input raises an `InvalidInput` (a ValueError) that names the field, before anything is
written. Reads raise `RecordNotFound` (a LookupError). Data that fails its checks raises an
`IntegrityError`, so a reader never receives silently wrong bytes.
"""

from __future__ import annotations

from typing import Protocol

_MIB = 2**20


class VhsError(Exception):
    """Base class of every error VHS raises on purpose."""


class InvalidInput(VhsError, ValueError):
    """An argument or message field is not acceptable. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"{field}: {message}")


class InvalidId(InvalidInput):
    def __init__(self, message: str, field: str = "id") -> None:
        super().__init__(field, message)


class InvalidTimestamp(InvalidInput):
    def __init__(self, message: str, field: str = "updated_at") -> None:
        super().__init__(field, message)


class InvalidRecord(InvalidInput):
    def __init__(self, message: str, field: str = "record") -> None:
        super().__init__(field, message)


class BodyTooLarge(InvalidRecord):
    def __init__(self, size: int, limit: int, field: str = "record") -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"body is {size} bytes, over the limit of {limit} bytes", field)


class InvalidPart(InvalidInput):
    """A named binary part of a record that cannot be stored: a bad name, too many parts, a
    value that is not bytes or a binary file, or a part over the size limit. Its field is
    `parts.<name>` (or `parts` for the set as a whole)."""

    def __init__(self, message: str, field: str = "parts") -> None:
        super().__init__(field, message)


class PartTooLarge(InvalidPart):
    def __init__(self, size: int, limit: int, field: str) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"part is {size} bytes, over the limit of {limit} bytes", field)


class ItemTooLarge(InvalidRecord):
    """A version whose entry alone (its inline body and parts, their names and content types)
    would make its id's DynamoDB item larger than a write may make it (index.codec.ITEM_BUDGET),
    however much history were dropped. Nothing was written; the id keeps taking writes."""

    def __init__(self, id: str, size: int, limit: int, field: str = "record") -> None:
        self.id = id
        self.size = size
        self.limit = limit
        super().__init__(
            f"{id!r}: this version alone would make the item {size} bytes by DynamoDB's size "
            f"rules, over the {limit} a write may take of its 400 KB (index.codec.ITEM_BUDGET): a "
            "smaller inline body, or fewer parts, shorter names or content types",
            field,
        )


class ConfigurationError(VhsError, ValueError):
    """The store was configured in a way that cannot work (for example a retention whose
    history could outgrow a DynamoDB item)."""


class RecordNotFound(VhsError, LookupError):
    """The id is unknown or deleted, or the version asked for is not retained."""

    def __init__(self, id: str, version: int | None = None, why: str = "") -> None:
        self.id = id
        self.version = version
        self.why = why
        what = f"{id!r}" if version is None else f"{id!r} version {version}"
        super().__init__(f"record {what} not found" + (f": {why}" if why else ""))


class VersionNotRetained(RecordNotFound):
    """The version asked for, by its number or as the one current at a time, is no longer
    kept (retention, a purge, a delete's retention window) or was never written."""


def never_or_no_longer(latest: int, version: int) -> str:
    """Why `version` of an item whose latest is `latest` is not there: it was never written,
    or it is no longer retained."""
    if version > latest:
        return f"never written (the latest is version {latest})"
    return "not retained"


class RecordDeleted(RecordNotFound):
    """The version current at the time asked for is a delete (`version`, at `deleted_at`:
    the delete's own timestamp, RFC 3339)."""

    def __init__(self, id: str, version: int, deleted_at: str, why: str) -> None:
        super().__init__(id, why=why)
        self.version = version
        self.deleted_at = deleted_at


class PartNotFound(RecordNotFound):
    """The version asked for exists but has no part of that name."""

    def __init__(self, id: str, version: int, name: str) -> None:
        super().__init__(id, version, f"it has no part {name!r}")
        self.part = name


class IntegrityError(VhsError):
    """Stored data does not match what its pointer promises."""


class BodyHashMismatch(IntegrityError):
    def __init__(self, location: str, expected: str, actual: str) -> None:
        self.location = location
        self.expected = expected
        self.actual = actual
        super().__init__(f"body at {location} has sha256 {actual}, expected {expected}")


class DamagedItem(IntegrityError, ValueError):
    """A stored item (or a stream image of one) that neither item layout writes: a field
    missing, of the wrong type, or of the wrong form (a time that is not a time, a hash of
    the wrong length, an unknown codec, a version lower than the entries held). Raised where
    the item is decoded (index/codec.py), before anything is read or ordered by it. `field` is the
    attribute's path in the item (`c[0].t`, `p[2].pt.scan.h`, `v`), `id` the record id when
    it is known. A ValueError too, as the layout's errors always were."""

    def __init__(self, reason: str, field: str = "", id: str | None = None) -> None:
        self.reason = reason
        self.field = field
        self.id = id
        which = f"item {id!r}" if id is not None else "an item"
        super().__init__(f"{which} is damaged: " + (f"{field}: {reason}" if field else reason))

    def within(self, prefix: str | None = None, id: str | None = None) -> DamagedItem:
        """The same damage, its field under `prefix` (`c[0]`), of the item of `id`."""
        field = ".".join(part for part in (prefix, self.field) if part)
        return DamagedItem(self.reason, field, self.id if id is None else id)


class BadField(ValueError):
    """A stored value that neither item layout writes (vhs/index/layouts.py): the item's field
    decoders (vhs/index/decode.py) report it as a DamagedItem naming the field."""


class DanglingPointer(IntegrityError):
    """The index points at a body that is not in the body store."""

    def __init__(self, location: str) -> None:
        self.location = location
        super().__init__(f"the index points at {location}, which does not exist")


class WriteConflict(VhsError):
    """A write kept losing races with concurrent writers and gave up. Nothing is lost: the
    caller (or the queue) retries it, and ordering still decides the final state."""


class BodyCondemned(Exception):
    """The garbage collector condemned the body this write points at, after the upload began:
    it may delete the object until `deadline` (epoch seconds). The writer waits until then,
    uploads the body again, and retries (vhs/write_path.py; docs/gc.md). Never reaches a
    caller: the writer handles it."""

    def __init__(self, deadline: float, basis: dict | None = None) -> None:
        self.deadline = deadline
        self.basis = basis  # the item as the refusal returned it
        super().__init__(f"body condemned by the garbage collector until {deadline}")


class PartsNotHeld(Exception):
    """The item changed since the writer decided which parts it need not upload: its current
    entry no longer references `missing` in S3. The writer uploads them and writes against
    `basis` (the item as the refusal returned it). Never reaches a caller: the writer handles
    it."""

    def __init__(self, basis: dict, missing: frozenset[str]) -> None:
        self.basis = basis
        self.missing = missing
        super().__init__(f"{len(missing)} objects are no longer referenced by the current entry")


class InvalidMessage(InvalidInput):
    """An ingest message that can never be stored: it goes to the DLQ with this reason,
    unretried. Its field is the message's own (`updated_at`, `payload.record`, ...)."""


class MissingStagedObject(InvalidMessage):
    """A claim check or record_location that points at an object that does not exist."""


class UnreadableStagedObject(InvalidMessage):
    """A claim check or record_location that points at an object the function may never read:
    encrypted under a KMS key it has no use of (the producer's own key, say)."""


class ExportChanged(VhsError):
    """A file being imported is not the one that was listed: an S3 object replaced (its ETag
    differs: S3 answered 412 to the read's If-Match) or a local file modified (its size or
    mtime differs). Nothing more of it is read: a half-old, half-new import is never made.
    Permanent: importing it again (a new plan, or a run without --resume) is the remedy."""

    def __init__(self, name: str, expected: str, found: str) -> None:
        self.name = name
        self.expected = expected
        self.found = found
        super().__init__(f"{name} changed since it was listed: it was {expected}, it is {found}")


# --- what the store's parts raise to their callers ----------------------------------------------
# Each is caught by the code that calls the raiser (a reader, the collector, ingest, a handler),
# and its class name may be read from outside (a Lambda function's errorType, which a state
# machine's Retrier names), so a name here is a contract.


class ZstdUnavailable(ValueError):
    """A body packed with zstd, on a Python with neither compression.zstd nor backports.zstd
    (vhs/bodies/packing.py)."""


class UndecodableBody(ValueError):
    """An inline body that does not decode to the bytes its entry's hash names: `version`'s,
    which decoded to bytes of sha256 `actual`, or did not decode at all (None)
    (vhs/history/stored_deltas.py)."""

    def __init__(self, message: str, version: int, actual: str | None = None) -> None:
        super().__init__(message)
        self.version = version
        self.actual = actual


class DeleteFenced(Exception):
    """A delete's request reached its send time after the latest moment its condemnation
    allows; it was not sent (vhs/maintenance/fence.py)."""


class _Budget(Protocol):
    """What an error of the ingest budgets names of one (vhs/ingest/budget.Budget)."""

    name: str
    total: int


class OverBudget(Exception):
    """A reservation larger than the whole budget: it could never be met
    (vhs/ingest/budget.py)."""

    def __init__(self, budget: _Budget, amount: int) -> None:
        self.budget, self.amount = budget, amount
        super().__init__(
            f"needs {amount / _MIB:,.0f} MiB of the function's {budget.name}, which has "
            f"{budget.total / _MIB:,.0f} MiB for the messages of a batch"
        )


class BudgetTimeout(RuntimeError):
    """The budget stayed taken by other messages for the time this invocation has left: a
    transient failure, so the message is retried (vhs/ingest/budget.py)."""


class ImportIncomplete(VhsError):
    """Some lines of a chunk failed after every retry: the chunk is to be run again
    (handlers/bulk_import.py; the import state machine's Task retries it by this name)."""


class NotPublished(Exception):
    """This record's notifications are not (all) confirmed published; it comes again
    (handlers/changes.py)."""


def permanent_error_names() -> tuple[str, ...]:
    """The error types (class names, as Lambda reports a raised exception's `errorType`) that
    trying again cannot fix: bad input, configuration, and an export replaced since its plan.
    A state machine's Task retries none of them (infra/reindex.py, infra/bulk_import.py: a
    Retrier with MaxAttempts 0 before the rest)."""
    found: set[str] = set()
    pending: list[type] = [InvalidInput, ConfigurationError, ExportChanged]
    while pending:
        cls = pending.pop()
        found.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return tuple(sorted(found))
