"""Atomicity of conditional writes on three backends (docs/benchmarks.md). Races are
nondeterministic: figures for a report, not a test."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from vhs_ops.local.process_environment import environment
from vhs_ops.local.stack import MotoServer
from vhs_testing.atomicity import race
from vhs_testing.backends import fake_credentials, open_backend
from vhs_testing.dynalite import DynaliteServer

from .common import Progress, Report, table

COLUMNS = {"trials": "trials", "writes": "writes raced", "extra_creates": "extra creates",
           "extra_stored": "extra stored", "most_stored": "most stored in one race",
           "duplicated_versions": "duplicated versions", "skipped_versions": "skipped versions",
           "disordered_histories": "disordered histories",
           "wrong_final_states": "wrong final states",
           "anomalous_trials": "trials with an anomaly"}  # fmt: skip
OPTIONS = {
    "--trials": (int, 50, 5, "trials"),
    "--writers": (int, 8, 8, "concurrent writers"),
    "--seed": (int, 0, 0, "the races' seed"),
}


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    trials = options.trials
    found, rows = {}, []
    with (environment(fake_credentials()), MotoServer(atomic_dynamodb=False) as plain,
          MotoServer() as atomic, DynaliteServer() as dynalite):  # fmt: skip
        backends = {"moto": (plain.endpoint, None), "moto + lock": (atomic.endpoint, None),
                    "dynalite": (atomic.endpoint, dynalite.endpoint)}  # fmt: skip
        for name, (moto, other) in backends.items():
            progress(f"{trials} trials on {name}")
            with open_backend("dynalite" if other else "server", moto, other) as backend:
                started = time.monotonic()
                tally = race(backend, trials=trials, writers=options.writers, seed=options.seed)
                seconds = time.monotonic() - started
            found[name] = {**asdict(tally), "anomalies": tally.anomalies, "seconds": seconds}
            rows.append(
                [name, *(getattr(tally, a) for a in COLUMNS), len(tally.errors), f"{seconds:.1f}"]
            )
            for error in sorted(set(tally.errors)):
                progress(f"{name}: {tally.errors.count(error)} x {error}")
    text = f"{trials} trials of 3 races, {options.writers} concurrent writers each.\n\n"
    text += table(["backend", *COLUMNS.values(), "errors", "seconds"], rows)
    return Report({"atomicity": text}, found)
