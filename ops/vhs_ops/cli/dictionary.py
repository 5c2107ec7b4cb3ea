"""`vhs dictionary train` and `vhs dictionary list`: the zstd dictionaries the store packs its
bodies with (admin/dictionaries.py; docs/cli.md, docs/design.md "Dictionaries")."""

from __future__ import annotations

import argparse

from .boundary import first_request
from .output import console, emit_json, print_counts, tracking
from .records import open_store


def cmd_dictionary_train(args: argparse.Namespace) -> int:
    from ..admin.dictionaries import train_dictionary

    store = open_store()
    first_request(store.index.dynamodb, store.table_name)
    with tracking(
        "reading records to train on", total=args.sample, unit="bodies", json=args.json
    ) as bar:
        report = train_dictionary(
            store,
            sample=args.sample,
            size=args.size,
            dry_run=args.dry_run,
            progress=lambda scanned, bodies: bar.update(bodies, args.sample),
        )
    if args.json:
        emit_json(report.as_dict())
        return 0
    print_counts(
        f"dictionary {report.dictionary}"
        + (": published" if report.published else ": not published"),
        [
            ("items read", report.scanned),
            ("bodies trained on", report.samples),
            ("bodies held out", report.held_out),
            ("their bytes without it", report.zlib_bytes),
            ("their bytes with it", report.packed_bytes),
        ],
    )
    if not report.published:
        why = "a dry run" if args.dry_run else "it packs the held-out bodies no smaller"
        console().print(f"not published: {why}", highlight=False)
    return 0


def cmd_dictionary_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    found = open_store().dictionaries.list()
    if args.json:
        emit_json(
            [
                {
                    "id": d.id,
                    "size": d.size,
                    "last_modified": d.last_modified,
                    "current": d.current,
                }
                for d in found
            ]
        )
        return 0
    table = Table(title=f"{len(found)} dictionaries")
    for column in ("id", "bytes", "published", "used by new writes"):
        table.add_column(column)
    for d in found:
        table.add_row(d.id, f"{d.size:,}", str(d.last_modified), "yes" if d.current else "")
    console().print(table)
    return 0
