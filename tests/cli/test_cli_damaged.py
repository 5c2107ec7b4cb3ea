"""A damaged item through the `vhs` command (docs/cli.md): `get`,
`history` and `diff` say "this item is damaged", naming the id and the field, in one line with
exit status 1 (and `{"error": ...}` under --json), never "please report it"; `verify` reports
it as a finding; `migrate` skips it, names it, and lays out the rest. Against a stack on the
session's moto server, each command in a process of its own."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from vhs.index.layouts import Layout
from vhs.store import VersionedHybridStore
from vhs_ops.local.stack import client
from vhs_testing.cli import assert_documented, vhs
from vhs_testing.damage import damages, plant, well_formed
from vhs_testing.stacks import fresh_stack

FOUND = 1


@pytest.fixture(scope="module")
def stack(moto_server: str) -> Iterator[tuple[VersionedHybridStore, dict[str, str]]]:
    local = fresh_stack(moto_server, "damaged", pipeline=False)
    store = VersionedHybridStore(
        local.table_name,
        local.bucket_name,
        s3_client=client("s3", local.endpoint, local.region),
        dynamodb_client=client("dynamodb", local.endpoint, local.region),
    )
    env = {**os.environ, **local.env()}
    env.pop("AWS_PROFILE", None)
    yield store, env


def _planted(store: VersionedHybridStore) -> dict[str, Any]:
    """The issue's damage (a text entry whose `t` is not a time) and a compact hash's, planted."""
    planted = {}
    for layout, name in ((Layout.TEXT, "c0-t-words"), (Layout.COMPACT, "c0-h-short")):
        sound = well_formed(store, f"sound-{layout}", layout)
        damage = next(d for d in damages(layout) if d.name == f"{layout}-{name}")
        record_id = f"cli-{damage.name}"
        plant(store, damage.applied(sound, record_id))
        planted[record_id] = damage
    return planted


def test_reads_of_a_damaged_item_say_so_in_one_line_and_exit_1(stack) -> None:
    store, env = stack
    for record_id, damage in _planted(store).items():
        for command in (["get", record_id], ["history", record_id], ["diff", record_id, "2", "3"]):
            result = vhs(env, *command)
            assert result.returncode == FOUND, (command, result.stderr)
            lines = result.stderr.decode().splitlines()
            assert len(lines) == 1 and result.stdout == b"", lines
            assert lines[0].startswith(
                f"error: this item is damaged: {record_id!r}, field {damage.field}: "
            ), lines
            assert "please report it" not in lines[0] and "Traceback" not in lines[0]
            under_json = vhs(env, "--json", *command)
            error = json.loads(under_json.stdout)["error"]
            assert (under_json.returncode, error["exit_status"]) == (FOUND, FOUND)
            assert (error["kind"], error["field"]) == ("failed", damage.field)
            assert_documented("vhs … --json (an error)", json.loads(under_json.stdout))


def test_verify_finds_and_migrate_skips_and_names_each_damaged_item(stack) -> None:
    store, env = stack
    planted = _planted(store)
    verified = vhs(env, "--json", "verify", *planted)
    assert verified.returncode == FOUND, verified.stderr
    report = json.loads(verified.stdout)
    assert {f["id"]: f["kind"] for f in report["findings"]} == dict.fromkeys(planted, "unparseable")
    for finding in report["findings"]:
        assert finding["detail"].startswith(f"damaged: {planted[finding['id']].field}: ")

    migrated = vhs(env, "--json", "migrate")
    assert migrated.returncode == FOUND, migrated.stderr
    summary = json.loads(migrated.stdout)
    assert_documented("vhs migrate", summary)
    assert summary["rewritten"] >= 1  # the sound text item: the run went on past the damage
    named = {entry["id"]: entry["field"] for entry in summary["damaged"]}
    assert {i: named.get(i) for i in planted} == {i: d.field for i, d in planted.items()}
