"""What a command that fails prints, and its exit status: the one place the CLI turns an
exception into one line on standard error (and, under --json, one JSON document on standard
output), so that no user error (a bad file, flag or shard, missing configuration, region or
credentials, an endpoint that does not answer) ever shows a traceback.

The exit statuses are docs/cli.md's: 0 done; 1 done, but something failed or was found (a
damaged item among them); 2 bad input or configuration; 3 not found; 4 AWS (or the local
stack) could not be reached or kept failing, so trying again later may work; 130 interrupted
(Ctrl-C or SIGTERM); 141 standard output closed early (a pipe's reader that stopped reading),
silently.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from vhs.errors import (
    DamagedItem,
    IntegrityError,
    InvalidInput,
    RecordNotFound,
    VhsError,
    WriteConflict,
)

from ..errors import UsageError
from .output import emit_json

DONE, FOUND, BAD_INPUT, NOT_FOUND, UNAVAILABLE, INTERRUPTED = 0, 1, 2, 3, 4, 130
CLOSED_PIPE = 141  # as a shell reports a command SIGPIPE stopped

# AWS error codes that mean the configuration names something that is not there, or the
# credentials are not accepted: the user's to fix, not worth retrying.
MISSING_RESOURCE_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "NoSuchBucket",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "NotFoundException",
        "StateMachineDoesNotExist",
        "404",  # S3's HEAD of a bucket that is not there
        "NotFound",
    }
)
CREDENTIALS_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "AuthorizationError", "403"})
CREDENTIALS_HINT = (
    "set AWS_PROFILE (aws configure, aws sso login) or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY; for the local stack, the exports `vhs local up` prints"
)


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line through `run` instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


# The store's argument names, as the options that carry them: an error names what the user
# typed (`--source-as-of: not an RFC 3339 timestamp ...`), not a parameter inside.
OPTION_OF_FIELD = {
    "as_of": "--as-of",
    "source_as_of": "--source-as-of",
    "version": "--version",
    "updated_at": "--updated-at",
    "deleted_at": "--deleted-at",
    "content_type": "--content-type",
    "parts": "--part",
    "since": "--since",
    "until": "--until",
    "resume": "--resume",
    "segments": "--segments",
    "total_segments": "--segments",
    "rate": "--rate",
    "page_size": "--page-size",
}


def option_of(field: str) -> str:
    """The option that carries the store's argument `field` (`parts.scan`: `--part`)."""
    return OPTION_OF_FIELD.get(field, OPTION_OF_FIELD.get(field.partition(".")[0], field))


# Each failing exit status: its name in the JSON document, and the start of its line.
KINDS = {
    FOUND: ("failed", "error"),
    BAD_INPUT: ("bad_input", "error"),
    NOT_FOUND: ("not_found", "not found"),
    UNAVAILABLE: ("unavailable", "error"),
    INTERRUPTED: ("interrupted", "stopped"),
}


@dataclass(frozen=True)
class Failure:
    """How an exception is reported: its exit status, what went wrong (and what to do), and
    the field or option at fault, when there is one."""

    status: int
    message: str
    field: str | None = None

    @property
    def text(self) -> str:
        # One line, whatever the message holds (botocore's and the OS's may hold newlines).
        return " ".join(self.message.split())

    @property
    def line(self) -> str:
        return f"{KINDS[self.status][1]}: {self.text}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": KINDS[self.status][0],
            "message": self.text,
            "field": self.field,
            "exit_status": self.status,
        }


def failure_of(error: BaseException) -> Failure:
    """The report of `error`: any exception a command may raise, expected or not."""
    found = _local_failure(error) or _aws_failure(error)
    if found is not None:
        return found
    # A bug, not a user error: still one line, with what to do about it.
    return Failure(
        FOUND,
        f"{type(error).__name__}: {error} (unexpected: vhs --traceback ... shows where; "
        "please report it)",
    )


def _local_failure(error: BaseException) -> Failure | None:
    """The report of an interruption, of VHS's own errors, or of a file's; None for others."""
    if isinstance(error, KeyboardInterrupt):
        return Failure(INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)")
    if isinstance(error, RecordNotFound):
        return Failure(NOT_FOUND, str(error))
    if isinstance(error, DamagedItem):
        return Failure(
            FOUND,
            f"this item is damaged: {error.id!r}, field {error.field}: {error.reason} "
            '(docs/runbook.md, "A damaged item"; vhs verify finds any other)',
            error.field,
        )
    if isinstance(error, IntegrityError):
        return Failure(FOUND, f"{error} (vhs verify checks the rest)")
    if isinstance(error, WriteConflict):
        return Failure(UNAVAILABLE, str(error))
    if isinstance(error, InvalidInput):
        field = option_of(error.field)
        return Failure(BAD_INPUT, f"{field}: {error.reason}", field)
    if isinstance(error, VhsError):
        return Failure(BAD_INPUT, str(error), getattr(error, "field", None))
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename is not None else ""
        return Failure(BAD_INPUT, f"{where}{error.strerror or error}")
    return None


def _aws_failure(error: BaseException) -> Failure | None:
    """The report of botocore's errors: configuration, credentials, the network, and what
    AWS refused; None for others."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    if isinstance(error, NoRegionError):
        return Failure(
            BAD_INPUT,
            "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), or a region in "
            "~/.aws/config (aws configure)",
        )
    if isinstance(error, NoCredentialsError | PartialCredentialsError | ProfileNotFound):
        return Failure(BAD_INPUT, f"no usable AWS credentials ({error}): {CREDENTIALS_HINT}")
    if isinstance(error, ConnectionError | HTTPClientError):
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        hint = (
            f"is AWS_ENDPOINT_URL ({endpoint}) right, and the local stack running (vhs local up)?"
            if endpoint
            else "check the network, and try again"
        )
        return Failure(UNAVAILABLE, f"{error}: {hint}")
    if isinstance(error, ClientError):
        return _refusal(error)
    if isinstance(error, BotoCoreError):
        return Failure(BAD_INPUT, str(error))
    return None


def _refusal(error: Any) -> Failure:
    """The report of what AWS refused (a botocore ClientError), by its error code."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    if code in CREDENTIALS_CODES:
        return Failure(BAD_INPUT, f"AWS refused the credentials: {error}: {CREDENTIALS_HINT}")
    if code in DENIED_CODES:
        return Failure(
            BAD_INPUT,
            f"{error}: these credentials may not do this (whose are they: aws sts "
            "get-caller-identity)",
        )
    if code in MISSING_RESOURCE_CODES:
        return Failure(
            BAD_INPUT, f"{error}: check the configuration (VHS_* variables, or --stack NAME)"
        )
    return Failure(UNAVAILABLE, f"{error}: try again later")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does (unless something, a caller or a
    test runner, handles SIGTERM already): a command that stops cleanly on Ctrl-C, with its
    summary and checkpoint, then does so on SIGTERM too, and exits 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def flagged(argv: Sequence[str], flag: str) -> bool:
    """Whether the command line has `flag` (--json, --traceback), before or after the
    command's name, however argparse judges the rest of it."""
    options = list(argv)
    return flag in (options[: options.index("--")] if "--" in options else options)


def run(command: Callable[[], int], argv: Sequence[str]) -> int:
    """`command()`'s exit status; or, if it raises, the failure's, after its line on standard
    error and, under --json, `{"error": {...}}` on standard output. SIGTERM is Ctrl-C's twin:
    a command that stops cleanly on one (its summary, its checkpoint) does on the other."""
    try:
        with _sigterm_as_interrupt():
            return command()
    except SystemExit:
        raise
    except BrokenPipeError:
        # The reader went away (`vhs history ID | head -1`): nothing to say, and nobody to
        # say it to. Standard output goes to /dev/null, so the flush at exit cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE
    except BaseException as error:
        if flagged(argv, "--traceback"):
            import traceback

            traceback.print_exception(error, file=sys.stderr)
        failure = failure_of(error)
    print(failure.line, file=sys.stderr, flush=True)
    if flagged(argv, "--json"):
        emit_json({"error": failure.as_json()})
    return failure.status


def first_request(dynamodb: Any, table: str) -> dict[str, Any]:
    """The table's description (DescribeTable), as the first request of a long run: with no
    region, credentials or endpoint, or no such table, it fails once, as the command's error,
    where the run would fail item by item or shard by shard, each after its retries. {} when
    the caller may not describe the table (a refusal proves the rest is well)."""
    from botocore.exceptions import ClientError

    from vhs.aws import error_code

    try:
        return dict(dynamodb.describe_table(TableName=table)["Table"])
    except ClientError as error:
        if error_code(error) in MISSING_RESOURCE_CODES | CREDENTIALS_CODES:
            raise
        return {}


def in_existing_directory(path: str, option: str) -> Path:
    """`path`, a file an option names for the command to write (`--checkpoint`, `--report`),
    whose directory must exist: a typo in it is refused, never created as a tree of
    directories. The defaults' own directories (.vhs/...) are created by their writers."""
    where = Path(path)
    if not where.parent.is_dir():
        raise InvalidInput(option, f"{where.parent}: no such directory (it is not created)")
    return where
