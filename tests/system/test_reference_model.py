"""The reference-model check: generated histories of puts, deletes, purges, clock ticks and
reads, run against the store on in-process moto and on dynalite, every step compared with the
model of the README's rules (vhs_testing/model.py): outcome, version, `get`, `get(version=)` and
`history`, with out-of-date reads injected (vhs_testing/lagging.py); and coalesced ingest batches
compared with the same messages written one by one.

What the histories hold, so that the rules' corners are common rather than lucky:

* a handful of timestamps, so equal `updated_at` (ties broken by hash, then content type) and
  writes arriving out of order are the rule; writes drawn again from the same pool, so
  duplicates are too;
* bodies around the inline threshold: incompressible bytes just under, at and just over it,
  compressible bytes at and over the most the store tries to compress, small JSON, and
  records with parts (inline, in S3, the same parts in another order, another part type);
* deletes and purges (of live, deleted and unknown ids), and a clock that moves in seconds
  against retention by count, age and after_delete, with delta history on and off;
* out-of-date reads: a step freezes what eventually consistent reads of the ids return
  (GetItem, BatchGetItem) until a later step catches up. A writer that reads first then plans
  from an old item, and a store with `consistent_reads=False` reads the old state.

Docs allow one difference from the sequential model, which the check allows and no other: a
duplicate decided on an out-of-date read may be reported `unchanged` where the item now calls
it `stale` (docs/design.md, "One write per version"); its version is still the one current
when the put returns.

`VHS_MODEL_EXAMPLES=N` runs N generated histories per backend and N batches (by default 20 on
moto, 8 on dynalite and 10 batches, for `make test`); docs/reliability.md, "The reference
model", gives the long run's command and figures.
"""

from __future__ import annotations

import base64
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

from vhs import RecordNotFound, Retention, VersionedHybridStore
from vhs.errors import RecordDeleted, VersionNotRetained
from vhs_testing.backends import Backend, open_backend
from vhs_testing.dictionaries import CODECS, ZLIB_CODEC
from vhs_testing.lagging import LaggingDynamoDB
from vhs_testing.model import JSON, Delete, ModelStore, Part, Put, Version, Write, claimed

EXAMPLES = int(os.environ.get("VHS_MODEL_EXAMPLES", "0")) or None
# Default examples per test, small enough for `make test` (docs/reliability.md has the long run).
DEFAULT_EXAMPLES = {"inprocess": 20, "dynalite": 8, "coalesce": 10}

THRESHOLD = 64  # inline_threshold: small, so that bodies either side of it stay small
COMPRESSIBLE = 16  # the store tries to compress bodies up to this many thresholds
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMES = [T0 + timedelta(seconds=s) for s in range(4)]
NAMES = ["alpha", "gamma/δ"]


def _noise(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


# Incompressible: just under, at and just over the threshold (zlib cannot shrink them, so they
# are stored as given); compressible: at and over the largest body worth compressing.
BYTES = [
    _noise(THRESHOLD - 1, 1),
    _noise(THRESHOLD, 2),
    _noise(THRESHOLD + 1, 3),
    b"a" * (THRESHOLD * COMPRESSIBLE),
    b"b" * (THRESHOLD * COMPRESSIBLE + 1),
]
JSONS = [{"n": 0}, {"n": 1}, {"n": 1, "s": "é"}, [1, 2, 3], "x" * (THRESHOLD * 2)]
PARTS = [
    (Part("scan", _noise(THRESHOLD * 4, 4), "image/tiff"),),
    (Part("scan", _noise(THRESHOLD * 4, 4), "image/tiff"), Part("ocr", b"page one", "text/plain")),
    (Part("ocr", b"page one", "text/plain"), Part("scan", _noise(THRESHOLD * 4, 4), "image/tiff")),
    (Part("ocr", b"page one"),),
    (Part("ocr", b"page two", "text/plain"), Part("thumb", b"t" * THRESHOLD)),
]
CONTENT_TYPES = [None, None, JSON, "application/cbor", "text/plain"]
RETENTIONS = st.builds(
    Retention,
    versions=st.sampled_from([0, 1, 2, 5]),
    age=st.sampled_from([None, timedelta(seconds=2), timedelta(seconds=5)]),
    after_delete=st.sampled_from([timedelta(0), timedelta(seconds=3), None, timedelta(days=30)]),
)


@dataclass(frozen=True)
class Tick:
    seconds: int


@dataclass(frozen=True)
class Lag:
    """From here, eventually consistent reads return the items as they are now."""


@dataclass(frozen=True)
class CatchUp:
    """From here, eventually consistent reads are up to date again."""


@dataclass(frozen=True)
class Read:
    name: str


Step = Write | Tick | Lag | CatchUp | Read


def _put(name: str, record: Any, at: datetime, content_type: str | None, parts: tuple) -> Put:
    if not isinstance(record, bytes) and content_type not in (None, JSON):
        content_type = None  # a JSON record is JSON: other types are for bytes
    return Put(name, claimed(record, content_type), at, content_type, parts)


# Puts without parts (the only kind an ingest message can carry without staging), and with.
plain_puts = st.builds(
    _put,
    st.sampled_from(NAMES),
    st.sampled_from(JSONS + BYTES),
    st.sampled_from(TIMES),
    st.sampled_from(CONTENT_TYPES),
    st.just(()),
)
puts = st.one_of(
    plain_puts,
    st.builds(
        _put,
        st.sampled_from(NAMES),
        st.sampled_from(JSONS[:2]),
        st.sampled_from(TIMES),
        st.just(None),
        st.sampled_from(PARTS),
    ),
)
deletes = st.builds(Delete, st.sampled_from(NAMES), st.sampled_from(TIMES), purge=st.booleans())


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    """A pool of writes, each written once, in time order (so that histories build up and
    deletes have versions to drop) or as drawn (out of order), with other steps between them:
    a write of the pool again (a duplicate), clock ticks, lags, catch-ups and reads."""
    names = NAMES[: draw(st.integers(1, len(NAMES)))]
    pool = draw(st.lists(st.one_of(puts, deletes), min_size=2, max_size=7))
    pool = [replace(w, id=names[NAMES.index(w.id) % len(names)]) for w in pool]
    if draw(st.booleans()):
        pool.sort(key=lambda w: w.at)
    between = st.one_of(
        st.sampled_from(pool),
        st.builds(Tick, st.integers(0, 4)),
        st.builds(Tick, st.integers(0, 4)),
        st.just(Lag()),
        st.just(CatchUp()),
        st.builds(Read, st.sampled_from(names)),
    )
    steps: list[Step] = []
    for write in pool:
        steps += [write, *draw(st.lists(between, max_size=3))]
    return steps


def note(what: str) -> None:
    """Count `what` in hypothesis's statistics (--hypothesis-show-statistics), when in a test."""
    if currently_in_test_context():
        event(what)


class Clock:
    """The store's clock, moved only by the history's ticks (retention is a function of it)."""

    def __init__(self) -> None:
        self.now = float(int(datetime.now(UTC).timestamp()))

    def __call__(self) -> float:
        return self.now


class Run:
    """One history against one store: the store, a reader that reads eventually consistently,
    and the model (and the model as the lagging reads see it)."""

    def __init__(
        self, backend: Backend, retention: Retention, delta_history: bool, codec: str = ZLIB_CODEC
    ) -> None:
        self.namespace = f"{uuid.uuid4().hex[:8]}-"
        backend.codec = codec  # ZSTD_CODEC: stores that write with the test dictionary
        self.clock = Clock()
        self.dynamodb = LaggingDynamoDB(backend.dynamodb)
        options: dict[str, Any] = {
            "inline_threshold": THRESHOLD,
            "retention": retention,
            "clock": self.clock,
            "delta_history": delta_history,
            "dynamodb_client": self.dynamodb,
        }
        self.store = backend.store(**options)
        self.reader = backend.store(consistent_reads=False, **options)
        self.model = ModelStore(
            retention.versions,
            age=_seconds(retention.age),
            after_delete=_seconds(retention.after_delete),
        )
        self.seen = self.model  # what eventually consistent reads see

    def id(self, name: str) -> str:
        return self.namespace + name

    def step(self, step: Step) -> None:
        if isinstance(step, Tick):
            self.clock.now += step.seconds
        elif isinstance(step, Lag):
            self.dynamodb.lag(self.store.table_name, [self.id(n) for n in NAMES])
            self.seen = self.model.copy()
        elif isinstance(step, CatchUp):
            self.dynamodb.catch_up()
            self.seen = self.model
        elif isinstance(step, Read):
            check_reads(self.reader, self.seen, self.id(step.name), step.name, self.clock.now)
            check_reads(self.store, self.model, self.id(step.name), step.name, self.clock.now)
        else:
            self.write(step)

    def write(self, write: Write) -> None:
        seen = self.seen.current(write.id)
        outcome, version = self.model.apply(write, self.clock.now)
        result = apply(self.store, write, self.id(write.id))
        lagging = " (lagging)" if self.dynamodb.lagging else ""
        note(f"{type(write).__name__} {result.outcome}{lagging}")
        assert result.version == version, (write, result)
        if result.outcome != outcome:
            note("a duplicate decided on an out-of-date read")
            assert _duplicate_of_what_was_read(write, seen, outcome, result.outcome), (
                write,
                result,
                outcome,
            )
        if isinstance(write, Put):
            assert result.content_hash == write.content_hash, write
        else:
            assert result.purged == (write.purge and self.model.purged(write.id)), write
        # Every version is read at the history's reads and at its end: after a write, the
        # history and the latest (a history lists what get(version=n) must find).
        check_reads(
            self.store, self.model, self.id(write.id), write.id, self.clock.now, every_version=False
        )


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def _duplicate_of_what_was_read(
    write: Write, seen: Version | None, expected: str, outcome: str
) -> bool:
    """The documented exception: a put that its out-of-date read found to be the current
    version's duplicate reports `unchanged`, where the item now makes it `stale`."""
    return (
        isinstance(write, Put)
        and (expected, outcome) == ("stale", "unchanged")
        and seen is not None
        and seen.order_key == write.order_key
    )


def apply(store: VersionedHybridStore, write: Write, id: str) -> Any:
    if isinstance(write, Put):
        parts = {p.name: p.argument() for p in write.parts} or None
        return store.put(
            id, write.record, updated_at=write.at, content_type=write.content_type, parts=parts
        )
    return store.delete(id, deleted_at=write.at, purge=write.purge)


def check_reads(
    store: VersionedHybridStore,
    model: ModelStore,
    id: str,
    name: str,
    now: float,
    *,
    every_version: bool = True,
) -> None:
    """`history`, `get` and (with `every_version`) `get(version=n)` of every number up to one
    past the current one, as the model has them at `now`."""
    expected = model.history(name, now)
    if not expected:
        with pytest.raises(RecordNotFound):
            store.history(id)
        with pytest.raises(RecordNotFound):
            store.get(id)
        return
    got = [
        (
            i.version,
            i.updated_at,
            i.content_hash,
            i.deleted,
            i.content_type,
            i.size,
            {n: (p.content_hash, p.size, p.content_type) for n, p in i.parts.items()},
        )
        for i in store.history(id)
    ]
    assert got == [
        (
            v.number,
            v.at,
            None if v.deleted else v.content_hash,
            v.deleted,
            v.content_type,
            v.size,
            v.part_infos(),
        )
        for v in expected
    ], name
    current = expected[-1]
    held = len(model.versions[name]) - len(expected)
    note(f"history: {len(expected)} retained, {held} no longer")
    _check_get(store, id, None, None if current.deleted else current)
    for number in range(1, current.number + 2 if every_version else 1):
        version = model.retained(name, number, now)
        _check_get(store, id, number, None if version is None or version.deleted else version)
    if every_version:
        _check_as_of(store, model, id, name, now)


def _check_as_of(store: VersionedHybridStore, model: ModelStore, id: str, name: str, now: float):
    """`locate(as_of=)` at every write time of the id's versions, a second before each and
    now, and `locate(source_as_of=)` at every timestamp of the histories, a microsecond before
    each and a second after the last, as the model answers them at `now`."""
    written = {v.written_at for v in model.versions[name]}
    for moment in sorted({*written, *(w - 1 for w in written), now}):
        when = datetime.fromtimestamp(moment, UTC)
        _check_located(store, id, {"as_of": when}, model.as_of(name, moment, now))
    stamps = [*TIMES, *(t - timedelta(microseconds=1) for t in TIMES), TIMES[-1] + timedelta(1)]
    for stamp in stamps:
        _check_located(store, id, {"source_as_of": stamp}, model.as_of(name, stamp, now))
    answer, number = model.as_of(name, now, now)
    if answer == "found":  # and the body, through get: the version's, as get(version=) reads it
        assert store.get(id, as_of=datetime.fromtimestamp(now, UTC)).body == (
            store.get(id, number).body
        )


def _check_located(store: VersionedHybridStore, id: str, at: dict[str, Any], expected) -> None:
    answer, number = expected
    note(f"as of: {answer}")
    if answer == "found":
        assert store.locate(id, **at).version == number, (id, at)
        return
    with pytest.raises(RecordNotFound) as raised:
        store.locate(id, **at)
    kind = {"deleted": RecordDeleted, "not retained": VersionNotRetained}.get(answer)
    if kind is None:  # not yet written: neither of the two
        assert type(raised.value) is RecordNotFound, (id, at, raised.value)
    else:
        assert isinstance(raised.value, kind), (id, at, answer, raised.value)
        assert answer != "deleted" or raised.value.version == number, (id, at)


def _check_get(store: VersionedHybridStore, id: str, number: int | None, version: Version | None):
    if version is None:
        with pytest.raises(RecordNotFound):
            store.get(id, number)
        return
    record = store.get(id, number)
    assert (record.version, record.updated_at, record.content_type) == (
        version.number,
        version.at,
        version.type,
    ), (id, number)
    assert record.body == version.body, (id, number)
    assert record.content_hash == version.content_hash, (id, number)
    assert {n: (p.content_hash, p.size, p.content_type) for n, p in record.parts.items()} == (
        version.part_infos()
    )
    for part in version.parts:
        assert record.part(part.name) == part.data, (id, number, part.name)


# --- the backends --------------------------------------------------------------------------


@pytest.fixture
def model_backend(request: pytest.FixtureRequest, backend_name: str) -> Iterator[Backend]:
    """One backend for all of a test's examples: each history uses ids of its own."""
    moto = request.getfixturevalue("moto_server") if backend_name == "dynalite" else None
    dynalite = request.getfixturevalue("dynalite_server") if backend_name == "dynalite" else None
    with open_backend(backend_name, moto, dynalite) as backend:
        yield backend


def examples(kind: str) -> settings:
    return settings(
        max_examples=EXAMPLES or DEFAULT_EXAMPLES[kind],
        deadline=None,
        # One backend serves every example (each history has ids of its own).
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


def run_history(backend: Backend, steps, retention, delta_history, codec=ZLIB_CODEC) -> None:
    run = Run(backend, retention, delta_history, codec)
    for step in steps:
        run.step(step)
    for name in NAMES:
        run.dynamodb.catch_up()
        check_reads(run.store, run.model, run.id(name), name, run.clock.now)


def corners(test: Any) -> Any:
    """The rules' corners as fixed histories, tried before the generated ones: a delete that
    drops its history at once (after_delete 0) or once its window has passed, a put after
    that (what was dropped stays dropped), a purge of a deleted id, and the age boundary."""
    put0, put1, put2 = (Put("alpha", {"n": n}, TIMES[n]) for n in range(3))
    deleted, purge = Delete("alpha", TIMES[1]), Delete("alpha", TIMES[0], purge=True)
    read = Read("alpha")
    for steps, retention in [
        ([put0, deleted, put2], Retention(2, after_delete=timedelta(0))),
        ([put0, deleted, Tick(2), read, Tick(1), read, put2], Retention(2, after_delete=None)),
        ([put0, deleted, Tick(2), read, Tick(1), read, put2, read], Retention(2)),
        (
            [put0, deleted, Tick(2), read, Tick(1), read, put2, read],
            Retention(2, after_delete=timedelta(seconds=3)),
        ),
        ([put0, deleted, purge, put2, read], Retention(5)),
        (
            [put0, put1, Tick(1), read, Tick(1), read, Tick(1), read],
            Retention(5, timedelta(seconds=1)),
        ),
        ([put0, put1, Tick(2), read, Tick(1), read], Retention(5, timedelta(seconds=2))),
    ]:
        for codec in CODECS:
            test = example(steps=steps, retention=retention, delta_history=True, codec=codec)(test)
    return test


@pytest.mark.parametrize("backend_name", ["inprocess"])
@examples("inprocess")
@corners
@given(
    steps=histories(),
    retention=RETENTIONS,
    delta_history=st.booleans(),
    codec=st.sampled_from(CODECS),
)
def test_every_step_is_as_the_model_says_on_moto(
    model_backend, steps, retention, delta_history, codec
):
    run_history(model_backend, steps, retention, delta_history, codec)


@pytest.mark.parametrize("backend_name", ["dynalite"])
@examples("dynalite")
@corners
@given(
    steps=histories(),
    retention=RETENTIONS,
    delta_history=st.booleans(),
    codec=st.sampled_from(CODECS),
)
def test_every_step_is_as_the_model_says_on_dynalite(
    model_backend, steps, retention, delta_history, codec
):
    run_history(model_backend, steps, retention, delta_history, codec)


# --- coalesced batches -----------------------------------------------------------------------

batch_writes = st.one_of(plain_puts, plain_puts, deletes)


def message(write: Write, id: str) -> dict[str, Any]:
    """The ingest message (docs/ingest.md) that asks for `write`."""
    body: dict[str, Any] = {"id": id, "updated_at": write.at.isoformat()}
    if isinstance(write, Delete):
        return body | {"deleted": True} | ({"purge": True} if write.purge else {})
    if not isinstance(write.record, bytes):
        return body | {"record": write.record}
    typed = {"content_type": write.content_type} if write.content_type is not None else {}
    return body | {"body_base64": base64.b64encode(write.record).decode()} | typed


def beats(other: Write, n: int, write: Write, m: int) -> bool:
    """Whether `other` (message n) certainly beats `write` (message m) in a batch: a later
    updated_at, or the same and a higher key, or the same key earlier in the batch
    (docs/ingest.md, "Hot ids"; every message here has its key known before any download)."""
    if other.at != write.at:
        return other.at > write.at
    return other.order_key > write.order_key or (other.order_key == write.order_key and n < m)


@pytest.mark.parametrize("backend_name", ["inprocess"])
@examples("coalesce")
@given(
    before=st.lists(batch_writes, max_size=4),
    batch=st.lists(batch_writes, min_size=2, max_size=10),
    retention=RETENTIONS,
)
def test_a_coalesced_batch_is_as_its_messages_written_one_by_one(
    model_backend, monkeypatch, before, batch, retention
):
    """The ingest handler's batch: messages of one id reduced to their winner. Each written
    message's outcome and version are the model's, its writes one after another in batch order
    (one writer at a time, so that two written messages of one id, a purge and its winner,
    have an order); every other message has the outcome and version it would have written
    right after a written message that certainly beats it; and every id ends as the model,
    and, without purges (whose effect depends on order), as the whole batch written one by
    one winner first."""
    from vhs.ingest import batch as batching
    from vhs.ingest.ingestor import Ingestor
    from vhs_testing.events import message_event

    monkeypatch.setattr(batching, "CONCURRENCY", 1)
    run = Run(model_backend, retention, delta_history=True)
    for write in before:
        run.write(write)
    worker = Ingestor(run.store, sqs_client=None, dlq_url="", staging=None)
    records = message_event(*(message(w, run.id(w.id)) for w in batch))["Records"]

    results = batching.ingest_batch(worker, records)

    assert all(not isinstance(r, BaseException) for r in results), results
    writers = [
        n
        for n, write in enumerate(batch)
        if (isinstance(write, Delete) and write.purge)
        or not any(
            o.id == write.id and beats(o, k, write, n) for k, o in enumerate(batch) if k != n
        )
    ]
    after: dict[int, ModelStore] = {}
    for n in writers:
        assert (results[n].outcome, results[n].version) == run.model.apply(
            batch[n], run.clock.now
        ), (n, batch)
        after[n] = run.model.copy()
    for n, write in enumerate(batch):
        if n in writers:
            continue
        outcomes = {
            after[k].copy().apply(write, run.clock.now)
            for k in writers
            if batch[k].id == write.id and beats(batch[k], k, write, n)
        }
        assert (results[n].outcome, results[n].version) in outcomes, (n, batch, results)
    note(f"{len(batch) - len(writers)} of {len(batch)} coalesced")
    for name in NAMES:
        check_reads(run.store, run.model, run.id(name), name, run.clock.now)
    if not any(isinstance(w, Delete) and w.purge for w in before + batch):
        one_by_one = ModelStore(
            retention.versions,
            age=_seconds(retention.age),
            after_delete=_seconds(retention.after_delete),
        )
        first = sorted(range(len(batch)), key=lambda n: (batch[n].order_key, -n), reverse=True)
        for write in [*before, *(batch[n] for n in first)]:
            one_by_one.apply(write, run.clock.now)
        for name in NAMES:
            assert one_by_one.history(name, run.clock.now) == run.model.history(name, run.clock.now)


# --- what the model check found -------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["inprocess", "dynalite"])
def test_a_put_planned_from_a_read_before_a_purge_of_the_deleted_id_is_written(model_backend):
    """A purge of an id already deleted removes its history without changing its version or
    current entry. A put planned from a read before it (out of date, or raced) must be refused
    as "not as read" and planned again, not fail: its condition asked `size(p)` of an item
    that no longer has `p`, which moto refuses with a ValueError (dynalite reads it as
    false). Found by the long run (a put with parts last); the history reduced by hand."""
    put0, put1 = (Put("alpha", {"n": n}, TIMES[n]) for n in range(2))
    deleted, purge = Delete("alpha", TIMES[2]), Delete("alpha", TIMES[2], purge=True)
    steps = [put0, put1, deleted, Lag(), purge, Put("alpha", {"n": 3}, TIMES[3]), Read("alpha")]
    run_history(model_backend, steps, Retention(5), True)


@pytest.mark.parametrize("backend_name", ["inprocess", "dynalite"])
def test_a_trim_that_finds_the_history_purged_is_refused_not_raised(model_backend):
    """The same missing `p` for a trim: a blind write's trim that lands after a purge of the
    deleted id (which removes `p`, leaving `v`) is a write that finds the item changed, so it
    returns False; moto raised ValueError on size() of the missing attribute, which the
    writer's trim does not catch."""
    store = model_backend.store()
    id = model_backend.id(f"trim-{uuid.uuid4().hex[:8]}")
    for n in range(3):
        store.put(id, {"n": n}, updated_at=TIMES[n])
    store.delete(id, deleted_at=TIMES[3])
    seen = store.index.read_for_write(id, consistent=True)
    store.delete(id, deleted_at=TIMES[3], purge=True)
    assert store.index.read(id).history == ()
    assert store.index.trim(id, seen, count=1) is False
