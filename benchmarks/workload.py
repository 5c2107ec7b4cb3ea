"""The catalogue workload (docs/benchmarks.md, "Workload"): seeded, Zipf-like text, so that
records compress as catalogue text does (random bytes would misprice every inline body)."""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from vhs.codec import canonical_json as canonical  # what every system stores, as VHS does

KB = 1024
MB = 1024 * 1024
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
SEED = 2018  # every benchmark's records, the same from run to run

# Catalogue words: subjects, forms, places, roles, and the ordinary words of titles and notes.
_VOCABULARY = """
the of and in to a for on with by from at as history letters papers collection account
accounts report reports notes volume volumes book books manuscript manuscripts diary diaries
journal journals correspondence register registers album photographs photograph drawings
drawing prints print map maps plan plans survey catalogue index records record minutes
series file files box boxes folder folders item items leaf leaves page pages plate plates
illustrations illustrated portrait portraits engraving engravings title edition printed
published press society royal college hospital medical medicine surgery surgeon physician
physicians nursing nurse pharmacy apothecary public health disease diseases fever plague
cholera smallpox tuberculosis vaccination hygiene sanitation anatomy physiology pathology
chemistry botany materia medica remedies recipes receipts household family estate estates
parish church chapel school schools university lectures lecture treatise essay essays
observations remarks inquiry practical general new complete second third revised enlarged
english french german latin italian dutch london edinburgh dublin paris oxford cambridge
glasgow manchester liverpool bristol york birmingham leeds india bengal bombay madras africa
china japan america canada australia egypt scotland ireland wales england county borough
street house hall court century early late modern includes including relating concerning
containing written signed annotated autograph copy copies draft drafts original typescript
printed photocopy microfilm digitised access open closed restricted conditions use reproduction
ms mss wellcome library archive archives department section part parts preface introduction
appendix supplement bibliography references footnotes contents tables figures cm ill col
port facsim maps plates leaves quarto octavo folio vellum paper parchment ink pencil binding
bound half calf cloth boards spine gilt worn repaired stamp bookplate provenance purchased
donated presented deposited transferred acquired sale lot auction dealer bookseller
"""
_WORDS: list[str] = _VOCABULARY.split()
# Zipf-like weights: a few words are very common, most are rare, as in real text.
_WEIGHTS: list[float] = [1 / (rank + 1) ** 1.05 for rank in range(len(_WORDS))]
_CUM_WEIGHTS: list[float] = list(itertools.accumulate(_WEIGHTS))

_FORENAME_TEXT = (
    "John William Thomas James George Mary Elizabeth Anne Sarah Jane Henry Charles Edward "
    "Robert Richard Margaret Florence Joseph Samuel Alexander Catherine Alice Emily Arthur"
)
_FORENAMES = _FORENAME_TEXT.split()
_SYLLABLES = "bar ket ston ham well son ley ford ton mor gan hil rid dle wood by ing ash"
_SURNAME_PARTS = _SYLLABLES.split()
_ROLES = ["author", "editor", "compiler", "illustrator", "printer", "publisher", "donor"]
_SUBJECT_FORMS = ["History", "Early works", "Sources", "Biography", "Pictorial works"]


@dataclass(frozen=True)
class Body:
    id: str
    record: dict[str, Any]
    size: int
    size_class: str  # "small" (<= 4 KB), "medium" (<= 100 KB) or "large" (1-5 MB)


class Writer:
    """Builds catalogue text and fields from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def words(self, count: int) -> str:
        return " ".join(self.rng.choices(_WORDS, cum_weights=_CUM_WEIGHTS, k=count))

    def sentence(self, low: int = 6, high: int = 18) -> str:
        text = self.words(self.rng.randint(low, high))
        return text[:1].upper() + text[1:] + "."

    def name(self) -> str:
        surname = "".join(self.rng.choices(_SURNAME_PARTS, k=self.rng.randint(2, 3))).title()
        return f"{surname}, {self.rng.choice(_FORENAMES)}"

    def year(self) -> int:
        return self.rng.randint(1550, 1990)

    def dates(self) -> str:
        born = self.year()
        return f"{born}-{born + self.rng.randint(25, 90)}"

    def field(self, tag: str) -> dict[str, Any]:
        """One MARC-like variable field: tag, indicators and subfields."""
        maker = _FIELD_MAKERS.get(tag, _FIELD_MAKERS["500"])
        return {
            "tag": tag,
            "ind": self.rng.choice(["  ", "10", "00", " 0", "1 "]),
            "sf": maker(self),
        }

    def item(self) -> dict[str, Any]:
        return {
            "barcode": f"{self.rng.randint(10**9, 10**10 - 1)}",
            "location": f"{self.rng.choice(['closed stores', 'open shelves', 'rare books'])} "
            f"{self.words(2)}",
            "shelfmark": f"MS.{self.rng.randint(1, 9999)}/{self.rng.randint(1, 40)}",
            "status": self.rng.choice(["available", "on loan", "in conservation", "restricted"]),
        }

    def component(self, parent: str, number: int) -> dict[str, Any]:
        """One part of an archive's finding aid: what makes a catalogue record megabytes."""
        return {
            "ref": f"{parent}/{number}",
            "title": self.sentence(3, 10),
            "date": f"{self.year()}",
            "extent": f"{self.rng.randint(1, 300)} leaves",
            "scope": self.sentence(8, 40),
            "names": [self.name() for _ in range(self.rng.randint(0, 2))],
        }


_FIELD_MAKERS: dict[str, Callable[[Writer], list[list[str]]]] = {
    "100": lambda w: [["a", w.name() + ","], ["d", w.dates() + "."], ["e", w.rng.choice(_ROLES)]],
    "245": lambda w: [["a", w.sentence(4, 14)], ["c", f"by {w.name()}."]],
    "260": lambda w: [["a", w.words(1).title() + " :"], ["b", w.words(3)], ["c", str(w.year())]],
    "300": lambda w: [["a", f"{w.rng.randint(1, 900)} p. :"], ["b", "ill. ;"], ["c", "24 cm"]],
    "500": lambda w: [["a", " ".join(w.sentence() for _ in range(w.rng.randint(1, 4)))]],
    "520": lambda w: [["a", " ".join(w.sentence() for _ in range(w.rng.randint(2, 6)))]],
    "650": lambda w: [
        ["a", w.words(2).title()],
        ["x", w.rng.choice(_SUBJECT_FORMS)],
        ["z", w.words(1).title()],
    ],
}
_FIELD_MAKERS["700"] = _FIELD_MAKERS["100"]  # an added name, shaped as the main entry
_CORE_TAGS = ("100", "245", "260", "300", "520")
_FILL_TAGS = ("500", "650", "700", "500", "650")


def make_record(id: str, target: int, rng: random.Random) -> dict[str, Any]:
    """A catalogue record of canonical JSON close to `target` bytes (never under about 800)."""
    w = Writer(rng)
    record: dict[str, Any] = {
        "id": id,
        "leader": "00000cam a2200000 a 4500",
        "control": {"001": id, "005": f"{w.year()}0101000000.0", "008": w.words(3)},
        "fields": [w.field(tag) for tag in _CORE_TAGS],
        "items": [w.item()],
        "modified": EPOCH.isoformat(),
    }
    size = len(canonical(record))
    # Small and medium records grow by fields and items; large ones (archives) by components.
    grow: Iterator[tuple[str, Any]]
    if target > 512 * KB:
        record["components"] = []
        grow = (("components", w.component(id, n)) for n in itertools.count(1))
    else:
        grow = (
            ("items", w.item()) if n % 7 == 6 else ("fields", w.field(_FILL_TAGS[n % 5]))
            for n in itertools.count()
        )
    for key, element in grow:
        added = len(canonical(element)) + 1
        if size + added > target:
            break
        record[key].append(element)
        size += added
    return record


def revise(record: dict[str, Any], rng: random.Random, when: datetime) -> dict[str, Any]:
    """The next version of a record, as a cataloguer's edit makes it (docs/benchmarks.md)."""
    w = Writer(rng)
    # A copy of what the edit touches (the fields); the rest is shared, never mutated (a deep
    # copy of an archive's megabytes of components would dominate a 10-put mix).
    new = {**record, "fields": copy.deepcopy(record["fields"])}
    new["modified"] = when.isoformat()
    fields = new["fields"]
    fields[rng.randrange(len(fields))]["sf"][0][1] = w.sentence()
    fields.append(w.field("650"))
    return new


def log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


# The catalogue size mix: (class, share, size range in bytes).
SIZE_MIX: tuple[tuple[str, float, tuple[int, int]], ...] = (
    ("small", 0.90, (800, 4 * KB)),
    ("medium", 0.09, (4 * KB + 1, 100 * KB)),
    ("large", 0.01, (1 * MB, 5 * MB)),
)


def size_mix(count: int, seed: int = SEED) -> list[Body]:
    """`count` records of exactly the mix's shares (rounded), sizes log-uniform (large: uniform)."""
    rng = random.Random(seed)
    # The rarer classes get their rounded share (at least one record each); small ones the rest.
    quotas = {name: max(1, round(count * share)) for name, share, _ in SIZE_MIX[1:]}
    quotas[SIZE_MIX[0][0]] = count - sum(quotas.values())
    plan: list[tuple[str, int]] = []
    for name, _share, (low, high) in SIZE_MIX:
        for _ in range(quotas[name]):
            size = rng.randint(low, high) if name == "large" else log_uniform(rng, low, high)
            plan.append((name, size))
    rng.shuffle(plan)
    bodies = []
    for n, (size_class, target) in enumerate(plan):
        id = f"b{seed % 1000:03d}{n:06d}"
        record = make_record(id, target, random.Random(f"{seed}/{n}"))
        bodies.append(Body(id, record, len(canonical(record)), size_class))
    return bodies


def timestamp(day: int, second: int = 0) -> datetime:
    """A fixed point in the past: workload times never depend on the wall clock."""
    return EPOCH + timedelta(days=day, seconds=second)


@dataclass(frozen=True)
class Samples:
    """Two versions of a small (2 KB, a typical catalogue record) and of a large record (1 MB:
    the small end of the 1-5 MB class, over any inline limit)."""

    small: tuple[dict[str, Any], dict[str, Any]]
    large: tuple[dict[str, Any], dict[str, Any]]

    @classmethod
    def build(cls, seed: int = SEED) -> Samples:
        def pair(size: int, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
            first = make_record(f"{name}-sample", size, random.Random(f"{seed}/{name}"))
            return first, revise(first, random.Random(f"{seed}/{name}/v2"), timestamp(2))

        return cls(small=pair(2 * KB, "small"), large=pair(MB, "large"))
