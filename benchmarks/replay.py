"""The real-data replay: a corpus's releases put to every system side by side (one thread
each), release after release in the order of their dates, each put billed alone and counted
in its class:

* **create**: the id's first put;
* **change**: a body other than the id's newest, at a later date;
* **touch**: the id's newest body again, at a later date (a release that re-sends it);
* **stale**: an older-dated version arriving after a newer one. Real feeds deliver some
  records twice, the older last: after each release, a seeded share of its ids that the
  release before held are put again with that release's body and date.

After each release every system reads back each id the release put. A put a system refuses
(an error, or a "stale"/"refused" outcome for a put that is not stale), an ordered system
storing a stale put, or a read-back that differs from what was put (for a system without
ordering, what was put last) is a failure of the run."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .corpora import Release
from .measure import combine
from .pricing import Bill

CLASSES = ("create", "change", "touch", "stale")
REFUSALS = ("stale", "refused")  # how systems.py's systems say a write was not applied
MAX_LISTED = 20  # failures listed one by one; the rest are counted
SEED = "vhs-real-data"


def share(key: str) -> float:
    """A number in [0, 1) that `key` alone decides (sha256): a sample that never moves."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@dataclass(frozen=True)
class Delivery:
    id: str
    data: bytes  # what a put stores (JSON: canonical)
    updated_at: datetime
    kind: str  # its class: one of CLASSES
    version: str  # the release it comes from


class Replay:
    """The replay of one corpus on `systems` (each with `name`, `biller`, `ordered`, `body`,
    `put` and `get`, as in systems.py). `json_records`: the bodies are JSON, put as parsed
    values; otherwise bytes, put as they are."""

    def __init__(self, name: str, systems: Iterable[Any], *, json_records: bool,
                 stale_share: float, progress: Callable[[str], None]) -> None:  # fmt: skip
        self.name, self.systems, self.json = name, list(systems), json_records
        self.stale_share, self.progress = stale_share, progress
        self.bills: dict[str, dict[str, Bill]] = {s.name: {} for s in self.systems}
        # What each system must read back, by id (sha256 of what it stores): for an ordered
        # system the newest-dated body, for one without ordering the last one put.
        self.expected: dict[str, dict[str, bytes]] = {s.name: {} for s in self.systems}
        self.newest: dict[str, tuple[datetime, bytes]] = {}  # id -> (date, digest), the truth
        self.sizes: dict[str, int] = {}  # id -> size of its newest body
        self.counts: Counter[str] = Counter()  # puts per class
        self.versions: list[str] = []
        self.previous: Release | None = None
        self.failures: Counter[str] = Counter()
        self.listed: list[str] = []
        self._lock = threading.Lock()

    # --- the plan ------------------------------------------------------------------------

    def plan(self, release: Release) -> list[Delivery]:
        """The release's puts in id order, each classed against the replay's newest version
        of its id, then the stale re-deliveries."""
        puts = []
        for id in sorted(release.records):
            data = release.records[id]
            known, body = self.newest.get(id), digest(data)
            kind = "create" if known is None else "touch" if known[1] == body else "change"
            puts.append(Delivery(id, data, release.updated_at, kind, release.version))
            self.newest[id], self.sizes[id] = (release.updated_at, body), len(data)
        before = self.previous
        if before is not None:
            for id in sorted(release.records.keys() & before.records.keys()):
                if share(f"{SEED}/stale/{release.version}/{id}") < self.stale_share:
                    data = before.records[id]
                    puts.append(Delivery(id, data, before.updated_at, "stale", before.version))
        return puts

    # --- the replay ----------------------------------------------------------------------

    def release(self, release: Release) -> None:
        """Put the release to every system side by side, then read its ids back."""
        plan = self.plan(release)
        counts = Counter(d.kind for d in plan)
        self.counts += counts
        self.versions.append(release.version)
        shown = ", ".join(f"{counts[c]:,} {c}" for c in CLASSES if counts[c])
        self.progress(f"{self.name} {release.version}: {len(plan):,} puts ({shown}) to each "
                      f"of {len(self.systems)} systems")  # fmt: skip
        with ThreadPoolExecutor(max_workers=len(self.systems)) as pool:
            for done in [pool.submit(self._run, s, plan) for s in self.systems]:
                done.result()
        self.previous = release

    def _run(self, system: Any, plan: Sequence[Delivery]) -> None:
        self.deliver(system, plan)
        self.read_back(system, sorted({d.id for d in plan}))

    def deliver(self, system: Any, plan: Sequence[Delivery]) -> None:
        bills, expected = self.bills[system.name], self.expected[system.name]
        for d in plan:
            record = json.loads(d.data) if self.json else d.data
            if d.kind != "stale" or not system.ordered:
                expected[d.id] = digest(system.body(record))
            try:
                with system.biller.bill() as bill:
                    outcome = system.put(d.id, record, d.updated_at, exists=d.kind != "create")
            except Exception as error:  # reported, with what refused it
                self.fail("refused", system, d, f"{type(error).__name__}: {error}")
                continue
            bills[d.kind] = combine([bills[d.kind], bill]) if d.kind in bills else bill
            if d.kind != "stale" and outcome.startswith(REFUSALS):
                self.fail("refused", system, d, f"said {outcome!r}")
            elif d.kind == "stale" and system.ordered and outcome == "stored":
                self.fail("stale stored", system, d, "stored it over a newer version")

    def read_back(self, system: Any, ids: Iterable[str]) -> None:
        """Read each id's current version from `system` (unbilled) and compare."""
        expected = self.expected[system.name]
        for id in ids:
            try:
                got = system.get(id)
            except Exception as error:  # reported as a read-back failure
                self.fail("read-back", system, id, f"{type(error).__name__}: {error}")
                continue
            if digest(got) != expected[id]:
                self.fail("read-back", system, id, f"read back {len(got):,} bytes that differ "
                          "from what was put")  # fmt: skip

    def fail(self, kind: str, system: Any, what: Delivery | str, message: str) -> None:
        if isinstance(what, Delivery):
            what = f"the {what.kind} of {what.id!r} ({what.version})"
        else:
            what = f"{what!r} after {self.versions[-1] if self.versions else 'no release'}"
        with self._lock:
            self.failures[kind] += 1
            if len(self.listed) < MAX_LISTED:
                self.listed.append(f"{self.name}: {kind}: {system.name}, {what}: {message}")

    # --- the results ---------------------------------------------------------------------

    def bill(self, system: str, classes: Sequence[str] = CLASSES) -> Bill:
        """The system's puts of `classes`, billed together."""
        bills = [self.bills[system][c] for c in classes if c in self.bills[system]]
        return combine(bills) if bills else Bill(requests={}, operations=0)

    def problems(self) -> list[str]:
        """Every failure, the first MAX_LISTED one by one (empty: the run is sound)."""
        total = sum(self.failures.values())
        more = [f"{self.name}: {total - len(self.listed):,} more failures"]
        return self.listed + (more if total > len(self.listed) else [])
