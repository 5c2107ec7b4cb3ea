"""`python -m benchmarks real-data`: real record histories (benchmarks/corpora.json) replayed
through VHS, both peers and the raw floor on one moto server (benchmarks/replay.py), priced
by class of put, with the storage each system holds at the end."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from vhs.errors import InvalidInput
from vhs_ops.admin.dictionaries import TrainReport
from vhs_ops.local.stack import MotoServer, client

from . import corpora, report
from .common import Progress, Report, environment, now, table
from .corpora import CorpusError
from .replay import CLASSES, Replay, share
from .report import FLOOR, PEERS, VHS
from .store import build_systems, measure_storage

# The VHS configurations measured: name -> VersionedHybridStore options (VhsSystem's), each
# with a table and bucket of its own. The first is the one the peers are compared with. The
# dictionary one trains its zstd dictionary on what its table holds after the first release
# (`vhs dictionary train`, as an operator would once a table has records), then writes with it.
DICTIONARY = "VHS + dictionary"
CONFIGURATIONS: dict[str, dict[str, Any]] = {VHS: {}, DICTIONARY: {"dictionaries": True}}
QUICK_SHARE = 0.02
OPTIONS = {
    "--corpus": (str, "all", "all", "a corpus of the pin file, or all"),
    "--sample": (float, 1.0, QUICK_SHARE,
                 "the share of ids replayed, chosen by a hash of the id"),
    "--stale": (float, 0.02, 0.02, "the share of a release's ids delivered a second time "
                "after it, with the release before's body and date"),
    "--pins": (str, str(corpora.PINS), str(corpora.PINS), "the pin file"),
    "--cache": (str, str(corpora.CACHE), str(corpora.CACHE), "where fetched files are kept"),
}  # fmt: skip
LABELS = {"create": "create", "change": "change", "touch": "touch (same body, later date)",
          "stale": "stale (older date, after a newer)"}  # fmt: skip


def run(args: argparse.Namespace, options: argparse.Namespace, progress: Progress) -> Report:
    mode = "quick" if args.quick else "full"
    try:
        if not 0 < options.sample <= 1 or not 0 <= options.stale <= 1:
            raise CorpusError(f"--sample must be in (0, 1] and --stale in [0, 1], not "
                              f"{options.sample} and {options.stale}")  # fmt: skip
        pins = corpora.load_pins(Path(options.pins))
        if options.corpus != "all" and options.corpus not in pins:
            raise CorpusError(f"no corpus {options.corpus!r} in {options.pins}: "
                              f"{', '.join(pins)} or all")  # fmt: skip
    except CorpusError as error:
        return Report({}, {}, [str(error)])
    chosen = [c for name, c in pins.items() if options.corpus in ("all", name)]
    sections: dict[str, str] = {}
    data: dict[str, Any] = {}
    problems: list[str] = []
    with MotoServer() as server:
        for corpus in chosen:
            started = progress.elapsed
            try:
                replay, stored = replay_corpus(corpus, server.endpoint, options, progress)
            except CorpusError as error:
                problems.append(str(error))
                continue
            seconds = progress.elapsed - started
            sections[f"real-data.{corpus.name}"] = corpus_section(
                corpus, replay, stored, options, f"{mode} mode, {seconds:.0f} s"
            )
            data[corpus.name] = results(replay, stored)
            problems += replay.problems()
    return Report(sections, data, problems)


def replay_corpus(corpus: corpora.Corpus, endpoint: str, options: argparse.Namespace,
                  progress: Progress) -> tuple[Replay, report.StorageResult]:  # fmt: skip
    """Every pinned release of `corpus` through every system, then what each one holds. A
    configuration that writes with a dictionary trains it after the first release."""
    systems = build_systems(endpoint, prefix=f"real-{corpus.name}", vhs=CONFIGURATIONS,
                            diagnostics=False)  # fmt: skip
    replay = Replay(corpus.name, systems.values(), json_records=corpus.kind == "json",
                    stale_share=options.stale, progress=progress)  # fmt: skip
    keep = lambda id: share(id) < options.sample  # noqa: E731
    for release in corpora.releases(corpus, Path(options.cache), keep=keep):
        replay.release(release)
        if len(replay.versions) == 1:
            replay.trained = train_dictionaries(systems.values(), endpoint, progress)
    if not replay.newest:
        raise CorpusError(f"{corpus.name}: a sample of {options.sample} keeps no id")
    stored = measure_storage(list(systems.values()), endpoint, len(replay.newest), progress)
    return replay, stored


def train_dictionaries(systems: Any, endpoint: str,
                       progress: Progress) -> dict[str, TrainReport | str]:  # fmt: skip
    """Each dictionary-writing system's dictionary, trained on its table and published (not
    billed: a one-off scan of the table, as `vhs dictionary train` makes it); what stopped it,
    if it could not be (too few inline bodies)."""
    trained: dict[str, TrainReport | str] = {}
    for system in systems:
        if system.name in CONFIGURATIONS and CONFIGURATIONS[system.name].get("dictionaries"):
            try:
                trained[system.name] = system.train_dictionary(
                    client("s3", endpoint), client("dynamodb", endpoint)
                )
            except InvalidInput as error:
                trained[system.name] = str(error)
            progress(f"{system.name}: dictionary {describe_training(trained[system.name])}")
    return trained


def describe_training(trained: TrainReport | str) -> str:
    if isinstance(trained, str):
        return f"not trained ({trained})"
    if not trained.published:
        return f"not published: it packs the held-out bodies no smaller ({trained.ratio:.3f})"
    return (f"{trained.dictionary} trained after the first release on {trained.samples:,} "
            f"inline bodies ({trained.size:,} B); it packs the {trained.held_out:,} held out "
            f"to {trained.ratio:.3f} of zlib's bytes")  # fmt: skip


def per_million(replay: Replay, system: str, classes: Sequence[str]) -> float | None:
    bill = replay.bill(system, classes)
    return bill.per_million() if bill.operations else None


def cost_table(replay: Replay, systems: Sequence[str]) -> str:
    """$ per million puts by class and over all puts; each VHS configuration's ratios to the
    cheaper peer (of that class) and to the raw floor."""
    vhs = [s for s in systems if s in CONFIGURATIONS]
    rows = []
    for label, classes in [*((LABELS[c], (c,)) for c in CLASSES), ("all puts", CLASSES)]:
        count = sum(replay.counts[c] for c in classes)
        if not count:
            continue
        prices = {s: per_million(replay, s, classes) for s in systems}
        peer = min(PEERS, key=lambda p: prices[p] or 0.0)
        cells = [f"{ratio(prices[v], prices[peer])} ({peer})" for v in vhs]
        cells += [ratio(prices[v], prices[FLOOR]) for v in vhs]
        rows.append([label, f"{count:,}", *(dollars(prices[s]) for s in systems), *cells])
    headers = ["Puts", "count", *(f"{s}: $/M puts" for s in systems),
               *(f"{v} ÷ the cheaper peer" for v in vhs),
               *(f"{v} ÷ {FLOOR}" for v in vhs)]  # fmt: skip
    return table(headers, rows)


def bills_table(replay: Replay, systems: Sequence[str]) -> str:
    rows = [[LABELS[c], *(report.bill_cell(replay.bill(s, (c,))) for s in systems)]
            for c in CLASSES if replay.counts[c]]  # fmt: skip
    return table(["Puts", *systems], rows)


def dollars(value: float | None) -> str:
    return "-" if value is None else report.dollars(value)


def ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else report.ratio(value / base, 3)


def corpus_section(corpus: corpora.Corpus, replay: Replay, stored: report.StorageResult,
                   options: argparse.Namespace, mode: str) -> str:  # fmt: skip
    systems = [*CONFIGURATIONS, *PEERS, FLOOR]
    first, last = corpus.releases[0], corpus.releases[-1]
    sizes = sorted(replay.sizes.values())
    sample = "every id" if options.sample >= 1 else f"a {options.sample:.0%} sample of the ids"
    failures = ", ".join(f"{n:,} {kind}" for kind, n in replay.failures.items())
    checks = f"**FAILED** ({failures})" if failures else (
        "every put accepted and every read-back equal to what was put")  # fmt: skip
    per_put = {s: replay.bill(s).per_million() for s in systems}
    return "\n\n".join([
        f"Run {now()}, {mode}; {environment()}; pynamodb_mate {metadata.version('pynamodb_mate')}. "
        f"Corpus: {corpus.versions} from {corpus.registry} ({len(replay.versions)} releases, "
        f"{first.updated_at:%Y-%m-%d} to {last.updated_at:%Y-%m-%d}, each release's date its "
        f"`updated_at`), {sample} ({len(replay.newest):,} ids), {replay.bill(VHS).operations:,} "
        f"puts per system, each billed alone; stale: {options.stale:.0%} of each release's ids "
        f"delivered again after it, with the release before's version. Record size (each id's "
        f"newest): median {statistics.median(sizes):,.0f} B, mean {statistics.mean(sizes):,.0f} B, "
        f"largest {sizes[-1]:,} B. Checks: {checks}.",
        *(f"{name}: dictionary {describe_training(t)}." for name, t in replay.trained.items()),
        cost_table(replay, systems),
        "Each system's bill per put, by class (requests · capacity units · $ per million):",
        bills_table(replay, systems),
        "Storage at the end of the replay, per record (VHS after its garbage collector):",
        report.storage(stored, per_put, systems, puts="puts of this replay"),
    ])  # fmt: skip


def results(replay: Replay, stored: report.StorageResult) -> dict[str, Any]:
    systems = [*CONFIGURATIONS, *PEERS, FLOOR]
    classes: Mapping[str, Sequence[str]] = {**{c: (c,) for c in CLASSES}, "all": CLASSES}
    return {
        "releases": replay.versions,
        "ids": len(replay.newest),
        "puts": dict(replay.counts),
        "per_million": {
            s: {k: per_million(replay, s, c) for k, c in classes.items()} for s in systems
        },
        "storage_per_million_records_month": {s: stored.dollars(s) for s in systems},
        "failures": dict(replay.failures),
        "dictionaries": {
            name: t if isinstance(t, str) else t.as_dict() for name, t in replay.trained.items()
        },
    }
