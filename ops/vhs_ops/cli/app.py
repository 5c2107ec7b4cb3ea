"""The `vhs` command line.

    vhs local up [--port N]          start the local stack and print its environment
    vhs local up --detach            the same in the background: eval "$(vhs local up --detach)"
    vhs local down                   stop the stack `up --detach` started
    vhs local status                 what runs from here, on which port, since when
    vhs put ID FILE --updated-at T   store a record (JSON, or raw bytes with --raw)
    vhs get ID [--version N]         print a record's body (--part NAME: a part's bytes)
    vhs get ID --as-of T             the version current at T (--source-as-of T: by updated_at)
    vhs history ID                   list the retained versions
    vhs diff ID A B                  what changed from version A to B (JSON: a JSON Patch)
    vhs delete ID --deleted-at T     delete a record (--purge: drop its history now)
    vhs send FILE.jsonl              send messages to the ingest queue
    vhs import SOURCE...             import JSON Lines or CSV files (local or s3://) in bulk
    vhs gc [--dry-run] [--grace 1h]  delete bodies nothing references
    vhs verify [--deep]              check every current and retained pointer
    vhs migrate                      lay every item out compactly, at once
    vhs dictionary train|list        zstd dictionaries trained on the store's records
    vhs reindex [IDS...] [--since T]  replay current records to the change feed (--resume FILE)
    vhs dlq list|redrive|discard     the ingest dead-letter queue
    vhs invoke FUNCTION EVENT.json   run a handler on an event, here (- reads stdin)

Every command takes --json for output that scripts can parse (docs/cli.md gives each
command's fields), and --stack NAME to read its configuration from a deployed stage's stack
outputs. Otherwise configuration comes from the environment that `vhs local up` prints (or
AWS's own, for a deployed stack).

This module is the parser and the dispatch (its options' types are in options); the
commands live by concern in records, pipeline, maintenance and dlq, and import what they
need (boto, rich, the store) only when they run, so that `vhs --help` and a mistyped command
stay quick. Whatever a command (or the parser) raises is reported in one place,
boundary.run: one line on standard error, the exit status docs/cli.md gives, and under --json
a JSON document on standard output.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from vhs import settings
from vhs.shapes import DEFAULT_PORT, REINDEX

from .boundary import Parser, run
from .dictionary import cmd_dictionary_list, cmd_dictionary_train
from .dlq import add_filters, cmd_dlq_discard, cmd_dlq_list, cmd_dlq_redrive
from .importer import cmd_import
from .local_session import cmd_local_down, cmd_local_status
from .maintenance import cmd_gc, cmd_migrate, cmd_verify
from .options import non_negative, page_size, port, positive, rate, seconds, segments, shard
from .pipeline import cmd_invoke, cmd_local_up
from .records import cmd_delete, cmd_diff, cmd_get, cmd_history, cmd_put
from .reindex import cmd_reindex
from .send import cmd_send


def _command(sub: Any, name: str, handler: Any, help: str) -> argparse.ArgumentParser:
    """A subcommand that runs `handler` and, like the top level, takes --json."""
    p = sub.add_parser(name, help=help)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(handler=handler)
    return p


def _add_local(sub: Any) -> None:
    local = sub.add_parser("local", help="the local stack on moto's server")
    local_sub = local.add_subparsers(
        dest="local_command", required=True, metavar="{up,down,status}"
    )
    _add_local_up(local_sub)
    _command(local_sub, "down", cmd_local_down, "stop the stack `up --detach` started here")
    _command(
        local_sub,
        "status",
        cmd_local_status,
        "what runs from here: its pid, port and since when; who holds the port",
    )


def _add_local_up(local_sub: Any) -> None:
    # Not `_command`: --json comes last in its help, after the options of the stack.
    up = local_sub.add_parser("up", help="start it; print its environment, then 'ready'")
    up.add_argument(
        "--port",
        type=port,
        default=None,
        help=f"port (default: {settings.LOCAL_PORT}, or {DEFAULT_PORT})",
    )
    up.add_argument(
        "--detach",
        action="store_true",
        help="run it in the background: print its environment once ready, and return "
        '(eval "$(vhs local up --detach)"); if one runs from this directory, print its '
        "environment instead",
    )
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 lets `sam local invoke`'s "
        "containers reach it, and anyone else who can reach this machine: moto has no auth)",
    )
    up.add_argument(
        "--sam-env-vars",
        default=".vhs/sam-env.json",
        help="where to write the `sam local invoke --env-vars` file (default .vhs/sam-env.json)",
    )
    up.add_argument("--table", help="table name")
    up.add_argument("--bucket", help="bucket name")
    up.add_argument(
        "--no-pipeline", action="store_true", help="the store only: no queues, no ingest"
    )
    up.add_argument(
        "--function-log",
        default=".vhs/logs/ingest.log",
        help="where the ingest function's logs and metrics go (default .vhs/logs/ingest.log)",
    )
    up.add_argument(
        "--read-api-port",
        type=port,
        default=0,
        help="port on 127.0.0.1 for the read API (default: a free port; see VHS_READ_API_URL)",
    )
    up.add_argument(
        "--read-api-log",
        default=".vhs/logs/read-api.log",
        help="where the read API function's logs and metrics go (default .vhs/logs/read-api.log)",
    )
    up.add_argument(
        "--watch-queue",
        action="store_true",
        help="subscribe a FIFO queue to the change feed to read its notifications from "
        "(VHS_CHANGE_QUEUE_URL); nothing drains it, so it holds one message per version stored",
    )
    # Only for measuring what the local server's SQS index saves (benchmarks/volume.py).
    up.add_argument("--moto-sqs-as-is", action="store_true", help=argparse.SUPPRESS)
    up.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    up.set_defaults(handler=cmd_local_up)


def _add_put(sub: Any) -> None:
    p = _command(sub, "put", cmd_put, "store a record")
    p.add_argument("id")
    p.add_argument("file", help="a file, or - for standard input")
    p.add_argument("--updated-at", help="RFC 3339 source timestamp (default: now)")
    p.add_argument("--content-type")
    p.add_argument("--raw", action="store_true", help="store the bytes as they are, not JSON")
    p.add_argument(
        "--part",
        action="append",
        default=[],
        metavar="NAME=FILE[;type=TYPE]",
        help="a named binary part stored beside the record (repeatable), e.g. scan=scan.tiff "
        "or 'scan=scan.tiff;type=image/tiff' to give its content type (quoted: ';' ends a "
        "shell command)",
    )


def _add_get(sub: Any) -> None:
    p = _command(sub, "get", cmd_get, "print a record's body")
    p.add_argument("id")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", type=positive)
    which.add_argument(
        "--as-of",
        metavar="T",
        help="the version current at T (RFC 3339) by the store's write time: what a reader "
        "would have seen then",
    )
    which.add_argument(
        "--source-as-of",
        metavar="T",
        help="the version its source had dated latest at or before T (its updated_at)",
    )
    p.add_argument("--part", metavar="NAME", help="print this part's bytes instead of the body")
    p.add_argument("--output", metavar="FILE", help="write the body or part to FILE")


def _add_history(sub: Any) -> None:
    p = _command(sub, "history", cmd_history, "list the retained versions")
    p.add_argument("id")


def _add_diff(sub: Any) -> None:
    p = _command(sub, "diff", cmd_diff, "what changed between two retained versions")
    p.add_argument("id")
    p.add_argument("a", type=positive, metavar="A", help="the version to compare from")
    p.add_argument("b", type=positive, metavar="B", help="the version to compare to")


def _add_send(sub: Any) -> None:
    p = _command(sub, "send", cmd_send, "send a JSON Lines file of messages to the ingest queue")
    p.add_argument("file", help="one message per line (see docs/ingest.md)")
    p.add_argument(
        "--no-validate",
        action="store_true",
        help="send every line's bytes unchanged, unjudged (the handler dead-letters bad ones)",
    )
    p.add_argument(
        "--from-line",
        type=positive,
        default=1,
        metavar="N",
        help="start at line N (an interrupted send prints the N to resume from)",
    )
    p.add_argument(
        "--max-queued",
        type=non_negative,
        default=None,
        metavar="N",
        help="wait while the queue holds N messages or more (default: 1000 against a local "
        "endpoint, no limit against AWS; 0: no limit)",
    )


def _add_import(sub: Any) -> None:
    p = _command(sub, "import", cmd_import, "import JSON Lines or CSV files into the store")
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="a file, a directory or s3://bucket/prefix (directories and prefixes: only "
        "*.jsonl, *.ndjson and *.csv files, or those of --format)",
    )
    p.add_argument(
        "--format",
        choices=["jsonl", "csv"],
        help="read every file as this format (default: by each file's suffix)",
    )
    p.add_argument(
        "--map",
        action="append",
        metavar="TARGET=COLUMN",
        help="CSV: the column of id, updated_at, record (a JSON column; default: the other "
        "columns as an object) or deleted; repeatable",
    )
    p.add_argument("--report", help="the report of refused and failed lines (JSON Lines)")
    p.add_argument(
        "--resume", action="store_true", help="continue an interrupted import from its checkpoint"
    )
    p.add_argument("--workers", type=positive, default=16, help="concurrent writes (default 16)")
    p.add_argument(
        "--chunk-lines",
        type=positive,
        default=1000,
        help="lines coalesced and checkpointed together (default 1000)",
    )


def _add_gc(sub: Any) -> None:
    p = _command(sub, "gc", cmd_gc, "delete S3 bodies that no retained version references")
    p.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    p.add_argument("--grace", default="1h", help="skip objects younger than this (default 1h)")
    p.add_argument(
        "--shard", action="append", type=shard, help="only this shard (00-ff); repeatable"
    )


def _add_verify(sub: Any) -> None:
    p = _command(sub, "verify", cmd_verify, "check every current and retained pointer")
    p.add_argument("ids", nargs="*", help="only these ids (default: the whole table)")
    p.add_argument("--deep", action="store_true", help="read and hash every S3 body")
    p.add_argument("--segments", type=segments, default=4, help="parallel scan segments")
    p.add_argument("--workers", type=positive, default=16, help="concurrent S3 lookups")
    p.add_argument("--consistent", action="store_true", help="strongly consistent scan")


def _add_migrate(sub: Any) -> None:
    p = _command(sub, "migrate", cmd_migrate, "lay every item out compactly, at once")
    p.add_argument("--segments", type=segments, default=4, help="parallel scan segments")


def _add_dictionary(sub: Any) -> None:
    dictionary = sub.add_parser("dictionary", help="zstd dictionaries of the store's records")
    dictionary_sub = dictionary.add_subparsers(dest="dictionary_command", required=True)
    p = _command(
        dictionary_sub, "train", cmd_dictionary_train, "train one on a sample and publish it"
    )
    p.add_argument(
        "--sample", type=positive, default=5000, help="current bodies to read (default 5000)"
    )
    p.add_argument(
        "--size", type=positive, default=64 * 1024, help="its size in bytes (default 65536)"
    )
    p.add_argument("--dry-run", action="store_true", help="measure it; publish nothing")
    _command(dictionary_sub, "list", cmd_dictionary_list, "the dictionaries the bucket keeps")


def _add_reindex(sub: Any) -> None:
    p = _command(sub, "reindex", cmd_reindex, "replay current records to the change feed")
    p.add_argument("ids", nargs="*", help="only these ids (default: every record)")
    p.add_argument("--since", help="only records whose current version was written at or after")
    p.add_argument("--until", help="only records whose current version was written before")
    p.add_argument(
        "--segments",
        type=segments,
        help=f"parallel Scan segments (default {REINDEX.default_segments})",
    )
    p.add_argument(
        "--rate",
        type=rate,
        help=f"records/s per segment (default {REINDEX.default_rate:g}); total = segments x rate",
    )
    p.add_argument("--page-size", type=page_size, default=REINDEX.page_size, help=argparse.SUPPRESS)
    resume = p.add_mutually_exclusive_group()
    resume.add_argument("--checkpoint", metavar="FILE", help="write the checkpoint here")
    resume.add_argument("--resume", metavar="FILE", help="resume the run of this checkpoint")
    p.add_argument(
        "--cloud",
        action="store_true",
        help="start the deployed state machine instead (its ARN from --stack or "
        f"{settings.REINDEX_STATE_MACHINE_ARN})",
    )
    p.add_argument("--state-machine", metavar="ARN", help="start this state machine instead")


def _add_dlq(sub: Any) -> None:
    dlq = sub.add_parser("dlq", help="the ingest dead-letter queue")
    dlq_sub = dlq.add_subparsers(
        dest="dlq_command", required=True, metavar="{list,redrive,discard}"
    )
    p = _command(dlq_sub, "list", cmd_dlq_list, "each dead letter's id, error, reason and age")
    p.add_argument("--limit", type=positive, help="at most this many")
    p.add_argument("--resolve", action="store_true", help="read claim checks' record ids")
    p = _command(dlq_sub, "redrive", cmd_dlq_redrive, "move dead letters back to the ingest queue")
    add_filters(p, positive)
    p.add_argument("--no-move-task", action="store_true", help="never use StartMessageMoveTask")
    p = _command(dlq_sub, "discard", cmd_dlq_discard, "delete dead letters (e.g. already resent)")
    add_filters(p, positive)
    p.add_argument("--all", action="store_true", help="every dead letter")
    p.add_argument(
        "--include-unverified",
        action="store_true",
        help="also letters whose claimed reason VHS did not write (kept by default)",
    )


def _add_invoke(sub: Any) -> None:
    p = _command(sub, "invoke", cmd_invoke, "run a handler on an event file, in this process")
    p.add_argument("function", choices=list(settings.FUNCTIONS))
    p.add_argument(
        "event",
        help="an event JSON file, e.g. events/sqs-small-record.json, or - for standard input",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="the invocation's timeout (default: the function's configured timeout)",
    )
    p.add_argument("--debug", action="store_true", help="print the traceback of a handler error")


def _add_delete(sub: Any) -> None:
    p = _command(sub, "delete", cmd_delete, "delete a record")
    p.add_argument("id")
    p.add_argument("--deleted-at", help="RFC 3339 timestamp (default: now)")
    p.add_argument(
        "--purge",
        action="store_true",
        help="drop every earlier version now (default: readable for the retention-after-"
        "delete window); the next gc collects their bodies",
    )


# Each adds one command to the parser's subcommands; their order is `vhs --help`'s.
_COMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_local,
    _add_put,
    _add_get,
    _add_history,
    _add_diff,
    _add_send,
    _add_import,
    _add_gc,
    _add_verify,
    _add_migrate,
    _add_dictionary,
    _add_reindex,
    _add_dlq,
    _add_invoke,
    _add_delete,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="vhs", description="VHS: a versioned hybrid store")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--traceback", action="store_true", help="print the traceback of an error, too"
    )
    parser.add_argument(
        "--stack",
        metavar="NAME",
        help="configure from a deployed stage's stack outputs (e.g. Vhs-prod)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: this process's); its exit status. Every error,
    the parser's too, is reported by `boundary.run`: one line, and a JSON document under
    --json."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def command() -> int:
        args = build_parser().parse_args(argv)
        if args.stack:
            from .stackconfig import env_from_stacks

            os.environ.update(env_from_stacks(args.stack))
        return int(args.handler(args))

    return run(command, argv)


if __name__ == "__main__":
    sys.exit(main())
