"""Are conditional writes atomic under concurrent requests? Figures for three DynamoDBs.

    .venv/bin/python benchmarks/atomicity.py                       50 trials, 8 writers
    .venv/bin/python benchmarks/atomicity.py --trials 200 --writers 16
    .venv/bin/python benchmarks/atomicity.py --json

The backends, each a child process on 127.0.0.1 (S3, which these races never touch but the
store is built with, comes from the local stack's moto server):

* `moto`: moto's own server (`python -m moto.server`), as shipped;
* `moto + lock`: the local stack's server (vhs.local.motoserver: one DynamoDB request at a time);
* `dynalite`: dynalite from npm (package.json), which locks per item as DynamoDB does.

What is raced and what counts as an anomaly: tests/support/atomicity.py. Races are
nondeterministic, so these are figures for a report, not a test; tests/test_concurrency.py
asserts the two atomic backends show no anomaly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

# Run as a script: make tests/ (for `support`) and lambdas/ (for `vhs`) importable.
ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT / "tests", ROOT / "lambdas"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from support.atomicity import Tally, race  # noqa: E402
from support.backends import fake_credentials, open_backend  # noqa: E402
from support.dynalite import DynaliteServer  # noqa: E402
from vhs.local.stack import MotoServer, environment  # noqa: E402

BACKENDS = ("moto", "moto + lock", "dynalite")
COLUMNS = (
    ("trials", "trials"),
    ("writes", "writes raced"),
    ("extra_creates", "extra creates"),
    ("extra_stored", "extra stored"),
    ("most_stored", "most stored in one race"),
    ("duplicated_versions", "duplicated versions"),
    ("skipped_versions", "skipped versions"),
    ("disordered_histories", "disordered histories"),
    ("wrong_final_states", "wrong final states"),
    ("anomalous_trials", "trials with an anomaly"),
)


@contextlib.contextmanager
def servers() -> Iterator[dict[str, tuple[str, str | None]]]:
    """Each backend's (moto endpoint, dynalite endpoint or None)."""
    with (
        MotoServer(atomic_dynamodb=False) as plain,
        MotoServer() as atomic,
        DynaliteServer() as dynalite,
    ):
        yield {
            "moto": (plain.endpoint, None),
            "moto + lock": (atomic.endpoint, None),
            "dynalite": (atomic.endpoint, dynalite.endpoint),
        }


def measure(trials: int, writers: int, seed: int) -> dict[str, tuple[Tally, float]]:
    results = {}
    with environment(fake_credentials()), servers() as endpoints:
        for name in BACKENDS:
            moto, dynalite = endpoints[name]
            with open_backend("dynalite" if dynalite else "server", moto, dynalite) as backend:
                started = time.monotonic()
                tally = race(backend, trials=trials, writers=writers, seed=seed)
                results[name] = (tally, time.monotonic() - started)
    return results


def markdown(results: dict[str, tuple[Tally, float]]) -> str:
    lines = [
        "| backend | " + " | ".join(title for _, title in COLUMNS) + " | errors | seconds |",
        "| --- " * (len(COLUMNS) + 3) + "|",
    ]
    for name, (tally, seconds) in results.items():
        cells = [str(getattr(tally, attribute)) for attribute, _ in COLUMNS]
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {len(tally.errors)} | {seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = measure(args.trials, args.writers, args.seed)
    if args.json:
        print(
            json.dumps(
                {
                    name: {**asdict(tally), "anomalies": tally.anomalies, "seconds": seconds}
                    for name, (tally, seconds) in results.items()
                },
                indent=2,
            )
        )
    else:
        print(f"{args.trials} trials of 3 races, {args.writers} concurrent writers each\n")
        print(markdown(results))
        for name, (tally, _) in results.items():
            for error in sorted(set(tally.errors)):
                print(f"{name}: {tally.errors.count(error)} x {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
