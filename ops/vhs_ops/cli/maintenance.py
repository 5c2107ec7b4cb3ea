"""Maintenance: `vhs gc` (delete bodies nothing references), `vhs verify` (check every
current and retained pointer) and `vhs migrate` (lay every item out compactly)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vhs.errors import InvalidInput

from .boundary import first_request
from .output import console_err, emit_json, print_counts, tracking
from .records import open_store


def cmd_gc(args: argparse.Namespace) -> int:
    from vhs.keys import all_shards
    from vhs.maintenance.gc import GarbageCollector, parse_duration

    try:
        grace = parse_duration(args.grace)
    except ValueError as error:
        raise InvalidInput("--grace", str(error)) from None
    shards = args.shard or all_shards()
    store = open_store()
    # The collector reports a shard it cannot list and goes on to the next.
    first_request(store.index.dynamodb, store.table_name)
    collector = GarbageCollector(store, grace=grace, dry_run=args.dry_run)
    with tracking("collecting shards", total=len(shards), unit="shards", json=args.json) as bar:
        total = collector.run(shards, progress=lambda shard, report: bar.advance())
    # Exit 1 when some ids or shards could not be collected (the rest was).
    status = 0 if total.ok else 1
    if args.json:
        emit_json(total.as_dict())
        return status
    print_counts(
        "garbage collection" + (" (dry run: nothing deleted)" if args.dry_run else ""),
        [
            ("shards", total.shards),
            ("objects listed", total.listed),
            ("within grace", total.young),
            ("referenced", total.referenced),
            ("orphaned", total.orphaned),
            (
                "would delete" if args.dry_run else "deleted",
                total.orphaned if args.dry_run else total.deleted,
            ),
            ("left for a later run", total.skipped),
            ("left until the condemnation expires", total.deferred),
            ("bytes reclaimed", total.bytes_reclaimed),
            ("markers cleared", total.markers_cleared),
            ("unrecognised keys", total.unrecognised),
            ("ids that failed", total.failed),
            ("shards that failed", len(total.failed_shards)),
        ],
    )
    if total.failed_shards:
        print(f"shards not collected: {' '.join(total.failed_shards)}", file=sys.stderr)
    return status


VERIFY_COUNTS = (
    "items",
    "versions",
    "inline",
    "s3",
    "s3_objects",
    "deletes",
    "unconfirmed",
    "findings_total",
)


def cmd_verify(args: argparse.Namespace) -> int:
    from ..admin.verify import Verifier

    verifier = Verifier(
        open_store(),
        deep=args.deep,
        segments=args.segments,
        workers=args.workers,
        consistent_reads=args.consistent,
    )
    err = console_err()

    def shown(finding: Any) -> None:
        if not args.json:
            from rich.text import Text

            version = f"v{finding.version}" if finding.version is not None else "-"
            err.print(
                Text.assemble(
                    (finding.kind, "red"),
                    f" {finding.id} {version} {finding.location or ''} {finding.detail}",
                )
            )

    with tracking(
        "verifying items",
        total=None,
        unit="items",
        json=args.json,
        console=err,
        time_remaining=False,
    ) as bar:

        def advance(state: Any) -> None:
            bar.update(state.looked_up, state.estimated_items)

        report = verifier.run(args.ids or None, on_finding=shown, progress=advance)
    if args.json:
        emit_json(report.as_dict())
    else:
        print_counts(
            "verification" + (" (deep: every S3 body hashed)" if args.deep else ""),
            [(name.replace("_", " "), getattr(report, name)) for name in VERIFY_COUNTS]
            + [(f"  items in the {name} layout", n) for name, n in sorted(report.layouts.items())]
            + [(f"  {kind}", count) for kind, count in sorted(report.by_kind.items())],
        )
    return 0 if report.ok else 1


MIGRATE_COUNTS = ("items", "compact", "rewritten", "unversioned", "unparseable", "conflicts")


def cmd_migrate(args: argparse.Namespace) -> int:
    from ..admin.migrate import migrate

    store = open_store()
    first_request(store.index.dynamodb, store.table_name)
    with tracking(
        "laying items out compactly",
        total=None,
        unit="items",
        json=args.json,
        time_remaining=False,
    ) as bar:
        report = migrate(
            store, segments=args.segments, progress=lambda state: bar.update(state.items, None)
        )
    if args.json:
        emit_json(report.as_dict())
    else:
        print_counts("migration", [(name, getattr(report, name)) for name in MIGRATE_COUNTS])
    # Exit 1 when some items were left as they were (unparseable, or kept changing).
    return 0 if report.ok else 1
