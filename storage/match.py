"""Match verification in storage: the project's image-caption collection, models' proposals,
batches with gold items, claims, answers (the `MatchSession` behind the verification
screen) and named positive sets.

Every answer is committed as it is made, in one transaction with its event-log row, so a
killed process loses nothing; a batch is claimed in the same locked transaction that checks
it is still free. One process verifies as an annotator at a time (`MatchHold`): a session
takes the annotator's hold in the locked transaction that resumes or claims their batch,
and every answer checks, in its own transaction and under the hold row's lock, that the
session still holds it, so a second process is refused, or takes over and the first one's
later answers are refused: never two batches open at once, never a silent overwrite."""

from __future__ import annotations

import io
import json
import os
import random
import secrets
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, Row, func, select, text, update
from sqlalchemy.exc import DBAPIError

from rubrics.escape import name_refusal, printable
from rubrics.match import ANSWER_VALUES
from storage.db.engine import BulkInsert, DatabaseBusy, run_write, write_transaction
from storage.events import log_change
from storage.models import (
    Annotator,
    Caption,
    Event,
    Image,
    ImageReference,
    MatchBatch,
    MatchBatchItem,
    MatchClaim,
    MatchHold,
    MatchModel,
    MatchPair,
    MatchProposal,
    MatchVerification,
    PositivePair,
    PositiveSet,
    utcnow,
)
from storage.rating.protocol import ProtocolError

# Pairs are coded image_id * PAIR_CODE + caption_id (database ids) in NumPy arrays.
PAIR_CODE = 1 << 32
ORIGINAL = "original"
# A PostgreSQL advisory lock that serialises claims (any constant).
_PG_CLAIM_LOCK = 0x6D61746368
# A holder not seen for this long is gone (a process that died on another machine: one on
# this machine is known gone at once, by its pid); a session on screen is seen at least
# every HOLD_HEARTBEAT_S (`MatchSession.keep_alive`), one that answers at every answer.
HOLD_LEASE = timedelta(minutes=5)
HOLD_HEARTBEAT_S = 60.0
_HOLD_REFRESH = timedelta(seconds=15)  # answers refresh `seen_at` at most this often


class MatchError(ValueError):
    """A match-verification request that cannot be carried out; the message says why."""


def check_set_name(name: str) -> None:
    """Refuse a new positive set's name that breaks the rule for names
    (`rubrics.escape.name_refusal`), file names included: the set's eccv-json export is
    `NAME_image_to_caption.json`, so `../../x` would name a file out of the folder."""
    if (problem := name_refusal(name, in_file_names=True)) is not None:
        raise MatchError(f"the positive set name '{printable(name[:60], newlines=False)}': "
                         f"{problem}")


class BatchHeld(ProtocolError):
    """Another process verifies as this annotator: this session was not opened."""


class HoldLost(ProtocolError):
    """Another process took this annotator's verification over: nothing more is saved by
    this session."""


@contextmanager
def locked(engine: Engine) -> Iterator[Connection]:
    """A transaction holding the write lock from its first statement, so a check and the
    write it guards see the same database (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory
    transaction lock)."""
    with write_transaction(engine) as connection:
        _serialise_claims(connection)
        yield connection


def _serialise_claims(connection: Connection) -> None:
    """Take the claims' lock in this write transaction (PostgreSQL: an advisory
    transaction lock; SQLite's write transaction holds the database already)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_CLAIM_LOCK})


# -- the collection -------------------------------------------------------------------------

@dataclass(frozen=True)
class Collection:
    """The project's images and captions with their keys. A caption's key is its
    `caption_id` from the import when it has one, else `<image key>/<system>`."""

    image_ids: np.ndarray
    image_keys: list[str]
    caption_ids: np.ndarray
    caption_keys: list[str]
    caption_image: np.ndarray  # the image id of each caption

    def image_index(self) -> dict[str, int]:
        return {key: i for i, key in enumerate(self.image_keys)}

    def caption_index(self) -> dict[str, int]:
        return {key: i for i, key in enumerate(self.caption_keys)}


def load_collection(connection: Connection) -> Collection:
    image, caption = Image.__table__, Caption.__table__
    images = connection.execute(select(image.c.id, image.c.key).order_by(image.c.id)).all()
    key_of = {row.id: row.key for row in images}
    captions = connection.execute(
        select(caption.c.id, caption.c.image_id, caption.c.system, caption.c.external_id)
        .order_by(caption.c.import_order)).all()
    keys = [row.external_id or f"{key_of[row.image_id]}/{row.system}" for row in captions]
    if len(set(keys)) != len(keys):
        twice = pd.Series(keys)[pd.Series(keys).duplicated()].iloc[0]
        raise MatchError(f"caption key {twice!r} names two captions; give captions distinct "
                         "caption_id values")
    return Collection(np.array([r.id for r in images], dtype=np.int64),
                      [r.key for r in images],
                      np.array([r.id for r in captions], dtype=np.int64), keys,
                      np.array([r.image_id for r in captions], dtype=np.int64))


def collection(engine: Engine) -> Collection:
    with engine.connect() as connection:
        return load_collection(connection)


def caption_texts(engine: Engine) -> tuple[list[str | None], list[str]]:
    """The image paths and caption texts of the collection, in its order (for scorers)."""
    image, caption = Image.__table__, Caption.__table__
    with engine.connect() as connection:
        paths = list(connection.execute(select(image.c.path).order_by(image.c.id)).scalars())
        texts = list(connection.execute(select(caption.c.text).order_by(caption.c.import_order))
                     .scalars())
    return paths, [text.strip() for text in texts]


# -- proposals ------------------------------------------------------------------------------

TopLists = dict[str, tuple[np.ndarray, np.ndarray]]


def pack_top_lists(lists: TopLists) -> bytes:
    buffer = io.BytesIO()
    arrays = {}
    for direction, (queries, items) in lists.items():
        arrays[f"{direction}_queries"] = queries.astype(np.int32)
        arrays[f"{direction}_items"] = items.astype(np.int32)
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack_top_lists(blob: bytes) -> TopLists:
    with np.load(io.BytesIO(blob)) as data:
        return {direction: (data[f"{direction}_queries"].astype(np.int64),
                            data[f"{direction}_items"].astype(np.int64))
                for direction in ("i2t", "t2i") if f"{direction}_queries" in data}


@dataclass(frozen=True)
class ProposalSummary:
    model: str
    proposals: int
    new_pairs: int
    pairs_total: int


def model_names(connection: Connection) -> list[str]:
    table = MatchModel.__table__
    return list(connection.execute(select(table.c.name).order_by(table.c.id)).scalars())


def check_new_model(engine: Engine, name: str) -> None:
    with engine.connect() as connection:
        if name in model_names(connection):
            raise MatchError(f"model {name!r} has proposed already; give this run another "
                             "--model name")


def query_sample(engine: Engine) -> tuple[int | None, int | None, str] | None:
    """The query sampling (N, seed) the first model used, with its name, if any model ran."""
    table = MatchModel.__table__
    with engine.connect() as connection:
        row = connection.execute(select(table.c.queries_sample, table.c.seed, table.c.name)
                                 .order_by(table.c.id).limit(1)).first()
    return None if row is None else (row.queries_sample, row.seed, row.name)


def record_proposals(engine: Engine, *, model: str, signature: str, direction: str,
                     top_k: int, depth: int, top_lists: TopLists, candidates: pd.DataFrame,
                     sample: int | None, seed: int | None, actor: str) -> ProposalSummary:
    """Store a model's ranked lists and its candidates (columns image, caption, direction,
    rank: database ids), merged with other models' candidates: one pair row per
    image-caption pair, one proposal row per model, direction and rank. One transaction."""
    proposal, model_table = MatchProposal.__table__, MatchModel.__table__
    with locked(engine) as connection:
        if model in model_names(connection):
            raise MatchError(f"model {model!r} has proposed already; give this run another "
                             "--model name")
        model_id = connection.execute(model_table.insert().values(
            name=model, signature=signature, direction=direction, top_k=top_k, depth=depth,
            queries_sample=sample, seed=seed, top_lists=pack_top_lists(top_lists),
            created_at=utcnow())).inserted_primary_key[0]
        codes = (candidates["image"].to_numpy(np.int64) * PAIR_CODE
                 + candidates["caption"].to_numpy(np.int64))
        before = _count(connection, MatchPair.__table__)
        pair_ids = _pair_ids_of(connection, codes)
        BulkInsert(connection, proposal.insert(), ("pair_id", "model_id", "direction", "rank"))(
            zip(pair_ids.tolist(), [model_id] * len(codes), candidates["direction"].tolist(),
                candidates["rank"].tolist(), strict=True))
        total = _count(connection, MatchPair.__table__)
        log_change(connection, actor=actor, action="create", table="match_model",
                   row_id=model_id, new={"name": {"model": model, "signature": signature,
                                                  "proposals": len(codes),
                                                  "new_pairs": total - before}})
    return ProposalSummary(model, len(codes), total - before, total)


def _count(connection: Connection, table) -> int:
    return connection.execute(select(func.count()).select_from(table)).scalar_one()


def _pair_codes(connection: Connection, after_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(codes, ids) of the pairs with an id above `after_id`, sorted by code."""
    cursor = connection.connection.cursor()  # plain tuples: no Row objects for NumPy
    try:
        cursor.execute("SELECT id, image_id, caption_id FROM match_pair WHERE id > "
                       f"{int(after_id)}")
        found = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 3)
    finally:
        cursor.close()
    codes = found[:, 1] * PAIR_CODE + found[:, 2]
    order = np.argsort(codes)
    return codes[order], found[order, 0]


def _pair_ids_of(connection: Connection, codes: np.ndarray) -> np.ndarray:
    """The pair id of every pair code, creating the pairs that do not exist yet."""
    known_codes, known_ids = _pair_codes(connection)
    wanted = np.unique(codes)
    position = np.minimum(np.searchsorted(known_codes, wanted), max(len(known_codes) - 1, 0))
    missing = wanted if len(known_codes) == 0 else wanted[known_codes[position] != wanted]
    if len(missing):
        last = int(known_ids.max()) if len(known_ids) else 0
        BulkInsert(connection, MatchPair.__table__.insert(), ("image_id", "caption_id"))(
            zip((missing // PAIR_CODE).tolist(), (missing % PAIR_CODE).tolist(), strict=True))
        new_codes, new_ids = _pair_codes(connection, last)
        known_codes = np.concatenate([known_codes, new_codes])
        known_ids = np.concatenate([known_ids, new_ids])
        order = np.argsort(known_codes)
        known_codes, known_ids = known_codes[order], known_ids[order]
    return known_ids[np.searchsorted(known_codes, codes)]


def model_top_lists(engine: Engine) -> dict[str, TopLists]:
    table = MatchModel.__table__
    with engine.connect() as connection:
        return {row.name: unpack_top_lists(row.top_lists) for row in connection.execute(
            select(table.c.name, table.c.top_lists).order_by(table.c.id))}


def model_settings(engine: Engine) -> pd.DataFrame:
    table = MatchModel.__table__
    with engine.connect() as connection:
        rows = connection.execute(select(
            table.c.name, table.c.signature, table.c.direction, table.c.top_k, table.c.depth,
            table.c.queries_sample, table.c.seed).order_by(table.c.id)).all()
    return pd.DataFrame(rows, columns=["model", "signature", "direction", "top_k", "depth",
                                       "queries_sample", "seed"])


# -- batches --------------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchInputs:
    """What a batch planner needs, read in the transaction that writes its plan."""

    candidates: np.ndarray  # (n, 2) image and caption ids of proposed pairs in no batch
    models: list[tuple[str, int, TopLists]]  # name, depth of its lists, the lists
    used_codes: np.ndarray  # codes of every pair proposed or in a batch
    collection: Collection
    gold_captions: set[int]  # captions already a known positive in some batch
    true_captions: np.ndarray  # positions of the captions known to be true of their image
    usable_images: np.ndarray  # ids of the images no one flagged as broken


# A planned batch: (image id, caption id, gold) per position; gold is None for a candidate.
BatchPlan = list[list[tuple[int, int, str | None]]]


def _same_text(text: str) -> str:
    """A caption or reference as compared to tell a repeated reference: case and spacing
    aside."""
    return " ".join(text.split()).casefold()


def true_caption_positions(connection: Connection, items: Collection,
                           systems: tuple[str, ...], flagged: set[int]) -> np.ndarray:
    """Positions in `items` of the captions known to be true of their own image, the
    known positives' pool (ECCV Caption's are the original COCO pairs, written by people
    for the image): a caption that repeats one of its image's references, or any caption
    of a system in `systems` (named trusted by the lead). Captions of the images
    `flagged` as broken are left out."""
    caption, reference = Caption.__table__, ImageReference.__table__
    references = {(image_id, _same_text(text)) for image_id, text in connection.execute(
        select(reference.c.image_id, reference.c.text))}
    true_ids = {row.id for row in connection.execute(
        select(caption.c.id, caption.c.image_id, caption.c.system, caption.c.text))
        if row.image_id not in flagged and (
            row.system in systems or (row.image_id, _same_text(row.text)) in references)}
    return np.flatnonzero([c in true_ids for c in items.caption_ids.tolist()])


def check_gold_systems(connection: Connection, systems: tuple[str, ...]) -> None:
    """Every system named trusted is a system of the project's captions."""
    caption = Caption.__table__
    known = set(connection.execute(select(caption.c.system).distinct()).scalars())
    unknown = next((s for s in systems if s not in known), None)
    if unknown is not None:
        raise MatchError(f"--gold-system {unknown!r} is not a system of the project's "
                         f"captions: {', '.join(map(repr, sorted(known)))}")


def create_batches(engine: Engine, planner: Callable[[BatchInputs], BatchPlan], *,
                   redundancy: int, seed: int, gold_systems: tuple[str, ...],
                   settings: dict[str, object], actor: str) -> BatchPlan:
    """Read what `planner` needs, let it pack the batches, and write them, in one locked
    transaction (two runs at once cannot batch a pair twice). Known positives come from
    `true_caption_positions` (references repeated as captions, `gold_systems`' captions);
    pairs on images flagged as broken are neither candidates nor gold."""
    from storage.rating.image_flags import flagged_image_ids, not_flagged

    if redundancy < 1:
        raise MatchError(f"redundancy must be at least 1, not {redundancy}")
    pair, item, batch = MatchPair.__table__, MatchBatchItem.__table__, MatchBatch.__table__
    model = MatchModel.__table__
    with locked(engine) as connection:
        models = [(m.name, m.depth, unpack_top_lists(m.top_lists)) for m in connection.execute(
            select(model.c.name, model.c.depth, model.c.top_lists).order_by(model.c.id))]
        if not models:
            raise MatchError("no proposals yet: run `thumb match propose` first")
        if not _count(connection, MatchProposal.__table__):
            raise MatchError("no model has proposed a pair yet (each model's top --top-k "
                             "held only known positives: captions' own images): run "
                             "`thumb match propose` with a larger --top-k, under another "
                             "--model name")
        check_gold_systems(connection, gold_systems)
        batched = select(item.c.pair_id)
        proposed = select(MatchProposal.__table__.c.pair_id)
        candidates = np.array(connection.execute(
            select(pair.c.image_id, pair.c.caption_id)
            .where(pair.c.id.in_(proposed), pair.c.id.not_in(batched),
                   not_flagged(pair.c.image_id))
            .order_by(pair.c.id)).all(), dtype=np.int64).reshape(-1, 2)
        if len(candidates) == 0:
            raise MatchError("every proposed pair is in a batch already (or on an image "
                             "flagged as broken)")
        items = load_collection(connection)
        flagged = flagged_image_ids(connection)
        true_captions = true_caption_positions(connection, items, gold_systems, flagged)
        if len(true_captions) == 0:
            raise MatchError(
                "no caption is known to be true of its image, so no batch can hold a known "
                "positive: name a system whose captions are right (e.g. --gold-system "
                "Human), or import references that some captions repeat")
        usable_images = np.array([i for i in items.image_ids.tolist() if i not in flagged],
                                 dtype=np.int64)
        used = np.array(connection.execute(select(pair.c.image_id, pair.c.caption_id)).all(),
                        dtype=np.int64).reshape(-1, 2)
        used = np.sort(used[:, 0] * PAIR_CODE + used[:, 1])
        gold_captions = set(connection.execute(select(pair.c.caption_id).join(
            item, item.c.pair_id == pair.c.id).where(item.c.gold == "positive")).scalars())
        plan = planner(BatchInputs(candidates, models, used, items, gold_captions,
                                   true_captions, usable_images))
        codes = np.array([i * PAIR_CODE + c for members in plan for i, c, _ in members],
                         dtype=np.int64)
        pair_of = dict(zip(codes.tolist(), _pair_ids_of(connection, codes).tolist(),
                           strict=True))
        now = utcnow()
        rows = []
        for members in plan:
            batch_id = connection.execute(batch.insert().values(
                seed=seed, redundancy=redundancy, created_at=now)).inserted_primary_key[0]
            rows += [{"batch_id": batch_id, "pair_id": pair_of[i * PAIR_CODE + c],
                      "position": position, "gold": gold}
                     for position, (i, c, gold) in enumerate(members)]
        connection.execute(item.insert(), rows)
        log_change(connection, actor=actor, action="create", table="match_batch",
                   new={"batches": {"batches": len(plan), "redundancy": redundancy,
                                    "seed": seed, **settings}})
    return plan


# -- the verification session ---------------------------------------------------------------

@dataclass(frozen=True)
class PairView:
    """One pair as the annotator sees it: never which model proposed it, nor whether it is
    a gold item."""

    item_id: int
    image_id: int
    image_key: str
    image_path: str | None
    caption: str
    answer: int | None
    flagged: bool = False  # someone flagged the image as broken: the pair is not asked

    @property
    def settled(self) -> bool:
        """Nothing is left to do on this pair: answered, or its image flagged."""
        return self.answer is not None or self.flagged


@dataclass(frozen=True)
class MatchProgress:
    batch_number: int  # 1-based among this annotator's batches
    batch_done: int
    batch_total: int
    answered: int  # answers given on the project, by everyone (active claims)
    needed: int  # answers the project's batches need (pairs x redundancy)


class MatchSession:
    """One annotator's verification work: the batch they hold (claimed in a locked
    transaction), its pairs in their own seeded order, answers committed at once with an
    event-log row, undo, and where they were (a restart resumes there).

    One process verifies as an annotator at a time: the session takes the annotator's
    hold when it opens (BatchHeld if another live process has it, unless `take_over`),
    every write checks that it still has it (HoldLost once another process took over),
    and `close` gives it back."""

    def __init__(self, engine: Engine, annotator: str, *,
                 clock: Callable[[], float] = time.monotonic,
                 seed_source: Callable[[], int] | None = None,
                 take_over: bool = False) -> None:
        from storage.rating.rating_sessions import register_annotator

        self.engine, self.annotator = engine, annotator
        self._clock = clock
        self._seed = seed_source or (lambda: secrets.randbits(31))
        self.token = uuid.uuid4().hex  # this session, in the hold it takes
        self._seen = utcnow()
        register_annotator(engine, annotator, None)
        with engine.connect() as connection:
            self.annotator_id = connection.execute(select(Annotator.__table__.c.id).where(
                Annotator.__table__.c.name == annotator)).scalar_one()
        self.claim_id: int | None = None
        self.items: list[PairView] = []
        self.focus = self._stored_focus = 0
        self._shown: tuple[int, float] | None = None
        self._batch_number = 0
        counts = match_counts(engine)
        self._answered, self._needed = counts["answers"], counts["needed"]

        def open_work(connection: Connection) -> int | None:
            _serialise_claims(connection)
            self._take_hold(connection, take_over=take_over)
            return self._open_claim(connection) or self._claim_new(connection)

        claim_id = run_write(engine, open_work)
        self._load(claim_id if claim_id is not None else self._last_claim())

    # -- the hold: one process per annotator --------------------------------------------------

    def _hold_row(self, connection: Connection):
        """The annotator's hold, locked until the transaction ends (PostgreSQL: FOR UPDATE;
        SQLite: the write transaction holds the database)."""
        hold = MatchHold.__table__
        return connection.execute(select(hold).where(hold.c.annotator_id == self.annotator_id)
                                  .with_for_update()).one_or_none()

    def _take_hold(self, connection: Connection, *, take_over: bool) -> None:
        hold = MatchHold.__table__
        row = self._hold_row(connection)
        now = utcnow()
        host, pid = _this_process()
        values = {"token": self.token, "host": host, "pid": pid, "taken_at": now,
                  "seen_at": now}
        if row is None:
            connection.execute(hold.insert().values(annotator_id=self.annotator_id, **values))
            return
        if not take_over and not _holder_gone(row, now):
            raise BatchHeld(
                f"{self.annotator} is verifying in another thumb process ({_holder(row)}); "
                "one process per annotator, so that no answer overwrites another. Quit it "
                "there, or take the batch over here with --take-over (that process's "
                "answers are refused from then on)")
        connection.execute(update(hold).where(hold.c.id == row.id).values(**values))
        log_change(connection, actor=self.annotator, action="update", table="match_hold",
                   row_id=row.id, old={"holder": _holder(row)},
                   new={"holder": f"process {pid} on {host}"})

    def _check_hold(self, connection: Connection) -> None:
        """Raise HoldLost unless this session still holds the annotator's verification;
        call it in the transaction of the write it guards, before that write. Refreshes
        when the holder was last seen."""
        row = self._hold_row(connection)
        if row is None or row.token != self.token:
            by = (f"by another thumb process ({_holder(row)})" if row is not None else
                  "by another thumb process, which has ended since")
            raise HoldLost(f"{self.annotator}'s verification was taken over {by}; nothing "
                           "more is saved here: quit (q) and go on there")
        now = utcnow()
        if now - self._seen >= _HOLD_REFRESH:
            connection.execute(update(MatchHold.__table__)
                               .where(MatchHold.__table__.c.id == row.id)
                               .values(seen_at=now))
            self._seen = now

    def keep_alive(self) -> None:
        """Tell other processes that this session is still here (the screen calls it every
        HOLD_HEARTBEAT_S). Raises HoldLost once another process has taken over; a busy or
        unreachable database is left for the next call (the next answer says so)."""
        def refresh(connection: Connection) -> None:
            self._seen = datetime.min.replace(tzinfo=UTC)  # refresh now
            self._check_hold(connection)

        with suppress(DatabaseBusy, DBAPIError):
            run_write(self.engine, refresh, attempts=2)

    def close(self) -> None:
        """End the session: give the hold back, so that the annotator can verify in another
        process at once (their batch stays theirs). A database error here is left: the
        hold of a process that has ended is replaced anyway."""
        hold = MatchHold.__table__
        with suppress(DatabaseBusy, DBAPIError):
            run_write(self.engine, lambda connection: connection.execute(hold.delete().where(
                hold.c.annotator_id == self.annotator_id, hold.c.token == self.token)))

    # -- claims -----------------------------------------------------------------------------

    def _claims(self, connection: Connection) -> list:
        claim = MatchClaim.__table__
        return connection.execute(select(claim.c.id, claim.c.status).where(
            claim.c.annotator_id == self.annotator_id).order_by(claim.c.id)).all()

    def _open_claim(self, connection: Connection) -> int | None:
        """The annotator's first active claim with pairs left to answer (a pair on an image
        flagged as broken is not asked)."""
        from storage.rating.image_flags import not_flagged

        claim, item, verification = (MatchClaim.__table__, MatchBatchItem.__table__,
                                     MatchVerification.__table__)
        pair = MatchPair.__table__
        answered = select(verification.c.item_id).where(
            verification.c.claim_id == claim.c.id, verification.c.answer.is_not(None))
        left = (select(func.count()).select_from(item)
                .join(pair, pair.c.id == item.c.pair_id)
                .where(item.c.batch_id == claim.c.batch_id, item.c.id.not_in(answered),
                       not_flagged(pair.c.image_id)).scalar_subquery())
        return connection.execute(
            select(claim.c.id).where(claim.c.annotator_id == self.annotator_id,
                                     claim.c.status == "active", left > 0)
            .order_by(claim.c.id).limit(1)).scalar()

    def _last_claim(self) -> int | None:
        with self.engine.connect() as connection:
            active = [c.id for c in self._claims(connection) if c.status == "active"]
        return active[-1] if active else None

    def _claim_new(self, connection: Connection) -> int | None:
        """Claim the first batch that still needs verifiers and that this annotator has not
        held (call it in a `locked` transaction). None when there is none."""
        batch, claim = MatchBatch.__table__, MatchClaim.__table__
        holders = (select(func.count()).select_from(claim)
                   .where(claim.c.batch_id == batch.c.id, claim.c.status == "active")
                   .scalar_subquery())
        mine = select(claim.c.batch_id).where(claim.c.annotator_id == self.annotator_id)
        batch_id = connection.execute(
            select(batch.c.id).where(holders < batch.c.redundancy, batch.c.id.not_in(mine))
            .order_by(batch.c.id).limit(1)).scalar()
        if batch_id is None:
            return None
        claim_id = connection.execute(claim.insert().values(
            batch_id=batch_id, annotator_id=self.annotator_id, shuffle_seed=self._seed(),
            status="active", focus=0, claimed_at=utcnow())).inserted_primary_key[0]
        log_change(connection, actor=self.annotator, action="create", table="match_claim",
                   row_id=claim_id, new={"batch_id": batch_id})
        return claim_id

    def claim_next(self) -> int | None:
        """The annotator's next batch, loaded: a batch of theirs with pairs left to answer
        (one open batch at a time), else the first batch that still needs verifiers and
        that they have not held, checked and claimed in one locked transaction that also
        checks this session's hold (HoldLost). None when there is none. DatabaseBusy when
        other processes held the database through every attempt (nothing was claimed)."""
        def claim(connection: Connection) -> int | None:
            _serialise_claims(connection)
            self._check_hold(connection)
            return self._open_claim(connection) or self._claim_new(connection)

        claim_id = run_write(self.engine, claim)
        if claim_id is not None:
            self._load(claim_id)
        return claim_id

    def _load(self, claim_id: int | None) -> None:
        from storage.rating.image_flags import flagged_image_ids

        self.claim_id, self.items, self._shown = claim_id, [], None
        if claim_id is None:
            return
        claim, item, pair = MatchClaim.__table__, MatchBatchItem.__table__, MatchPair.__table__
        image, caption, verification = (Image.__table__, Caption.__table__,
                                        MatchVerification.__table__)
        with self.engine.connect() as connection:
            row = connection.execute(select(claim).where(claim.c.id == claim_id)).one()
            answers = dict(connection.execute(
                select(verification.c.item_id, verification.c.answer)
                .where(verification.c.claim_id == claim_id)).all())
            flagged = flagged_image_ids(connection)
            rows = connection.execute(
                select(item.c.id, image.c.id.label("image_id"), image.c.key, image.c.path,
                       caption.c.text)
                .join(pair, pair.c.id == item.c.pair_id)
                .join(image, image.c.id == pair.c.image_id)
                .join(caption, caption.c.id == pair.c.caption_id)
                .where(item.c.batch_id == row.batch_id).order_by(item.c.position)).all()
            self._batch_number = sum(1 for c in self._claims(connection) if c.id <= claim_id)
        views = [PairView(r.id, r.image_id, r.key, r.path, r.text.strip(),
                          answers.get(r.id), r.image_id in flagged) for r in rows]
        random.Random(row.shuffle_seed).shuffle(views)
        self.items = views
        self.focus = self._stored_focus = min(row.focus, max(len(views) - 1, 0))

    # -- answering --------------------------------------------------------------------------

    def show(self, index: int) -> None:
        """The annotator now looks at pair `index`: time from here counts towards it, and a
        restart comes back to it (stored at once, one short try: when the database is busy
        or the hold is lost, the next answer or move stores it)."""
        self._shown = (self.items[index].item_id, self._clock())
        self.focus = index
        if index == self._stored_focus:
            return

        def store(connection: Connection) -> bool:
            try:  # only while this session holds the annotator's work
                self._check_hold(connection)
            except HoldLost:
                return False
            self._write_focus(connection, index)
            return True

        with suppress(DatabaseBusy):
            if run_write(self.engine, store, attempts=1):
                self._stored_focus = index

    def _write_focus(self, connection: Connection, index: int) -> None:
        connection.execute(update(MatchClaim.__table__)
                           .where(MatchClaim.__table__.c.id == self.claim_id)
                           .values(focus=index))

    def _elapsed(self, item_id: int) -> float:
        if self._shown is None or self._shown[0] != item_id:
            return 0.0
        now = self._clock()
        elapsed = max(0.0, now - self._shown[1])
        self._shown = (item_id, now)
        return elapsed

    def _check_active(self, connection: Connection) -> None:
        status = connection.execute(select(MatchClaim.__table__.c.status).where(
            MatchClaim.__table__.c.id == self.claim_id).with_for_update()).scalar_one()
        if status != "active":
            raise ProtocolError("this batch was reassigned after quality control; your "
                                "answers on it no longer count")

    def answer(self, index: int, value: int) -> int | None:
        """Record `value` (1-4) for pair `index` with the time spent on it, commit it with an
        event-log row, and return the batch's next unanswered pair (None when the batch is
        complete), stored in the same transaction as where the annotator now is.
        DatabaseBusy when other processes held the database through every attempt: nothing
        was written, and the time spent on the pair counts towards the next attempt."""
        if value not in ANSWER_VALUES:
            raise ValueError(f"answer must be 1-4, not {value!r}")
        view = self.items[index]
        if view.flagged:
            raise ProtocolError("the image of this pair is flagged as broken: the pair is not "
                                "asked")
        following = self._next_to_answer(index)
        shown = self._shown
        seconds = self._elapsed(view.item_id)

        def save(connection: Connection) -> int | None:
            self._check_hold(connection)
            self._check_active(connection)
            old = self._write(connection, self.claim_id, view.item_id, value, seconds,
                              uuid.uuid4().hex, action="update")
            if following is not None:
                self._write_focus(connection, following)
            return old

        try:
            old = run_write(self.engine, save)
        except Exception:  # nothing was written
            self._shown = shown
            raise
        if following is not None:
            self._stored_focus = following
        if old is None:
            self._answered += 1
        self.items[index] = replace(view, answer=value)
        return following

    def flag_broken(self, index: int, reason: str) -> int | None:
        """Flag the image of pair `index` as broken, with `reason`, as every task flags an
        image (`storage.rating.image_flags`: for everyone, listed by `thumb status`, until the
        lead's `thumb image unflag`): no pair on it is asked or decided, so this batch's
        pairs on it are done. Returns the batch's next pair to answer (None when none is).
        ProtocolError when the session lost its hold or the batch was reassigned;
        DatabaseBusy when other processes held the database through every attempt."""
        from storage.rating.image_flags import flag_image

        view = self.items[index]

        def save(connection: Connection) -> None:
            self._check_hold(connection)
            self._check_active(connection)
            flag_image(connection, view.image_id, self.annotator_id, self.annotator, reason)

        run_write(self.engine, save)
        self.items = [replace(v, flagged=True) if v.image_id == view.image_id else v
                      for v in self.items]
        return self._next_to_answer(index)

    def _write(self, connection: Connection, claim_id: int | None, item_id: int,
               value: int | None, seconds: float, change_id: str, *, action: str,
               reverts: str | None = None) -> int | None:
        """Upsert the answer in claim `claim_id`, add the seconds, log old -> new. Returns
        the old answer."""
        table = MatchVerification.__table__
        now = utcnow()
        row = connection.execute(select(table.c.id, table.c.answer).where(
            table.c.claim_id == claim_id, table.c.item_id == item_id)).one_or_none()
        if row is None:
            old = None
            row_id = connection.execute(table.insert().values(
                claim_id=claim_id, item_id=item_id, answer=value, seconds=seconds,
                created_at=now, updated_at=now)).inserted_primary_key[0]
        else:
            old, row_id = row.answer, row.id
            connection.execute(update(table).where(table.c.id == row_id).values(
                answer=value, seconds=table.c.seconds + seconds, updated_at=now))
        log_change(connection, actor=self.annotator, action=action,
                   table="match_verification", row_id=row_id, old={"answer": old},
                   new={"answer": value}, change_id=change_id, reverts=reverts)
        return old

    def undo(self) -> int | None:
        """Revert this annotator's latest answer not yet undone (switching to its batch if
        needed). Returns the index of the pair it touched, or None if nothing is left.
        DatabaseBusy when other processes held the database through every attempt."""
        event, verification = Event.__table__, MatchVerification.__table__
        claim = MatchClaim.__table__
        undone = select(event.c.reverts).where(event.c.reverts.is_not(None))

        def revert(connection: Connection) -> tuple[Row, int | None] | None:
            self._check_hold(connection)
            last = connection.execute(
                select(event.c.change_id, event.c.row_id, event.c.old_value)
                .where(event.c.actor == self.annotator, event.c.action == "update",
                       event.c.table_name == "match_verification",
                       event.c.change_id.not_in(undone))
                .order_by(event.c.id.desc()).limit(1)).first()
            if last is None:
                return None
            target = connection.execute(
                select(verification.c.claim_id, verification.c.item_id, verification.c.answer,
                       claim.c.status)
                .join(claim, claim.c.id == verification.c.claim_id)
                .where(verification.c.id == last.row_id)).one()
            if target.status != "active":
                raise ProtocolError("that answer's batch was reassigned after quality "
                                    "control")
            previous = json.loads(last.old_value)
            self._write(connection, target.claim_id, target.item_id, previous, 0.0,
                        uuid.uuid4().hex, action="undo", reverts=last.change_id)
            return target, previous

        reverted = run_write(self.engine, revert)
        if reverted is None:
            return None
        target, previous = reverted
        self._answered += (previous is not None) - (target.answer is not None)
        if target.claim_id != self.claim_id:
            self._load(target.claim_id)
        index = next(i for i, v in enumerate(self.items) if v.item_id == target.item_id)
        view = self.items[index]
        self.items[index] = replace(view, answer=previous)
        return index

    # -- where the annotator is --------------------------------------------------------------

    @property
    def batch_complete(self) -> bool:
        return bool(self.items) and all(v.settled for v in self.items)

    def _next_to_answer(self, index: int) -> int | None:
        """The batch's next pair to answer other than `index` (None when none is)."""
        count = len(self.items)
        return next((i % count for i in range(index + 1, index + count)
                     if not self.items[i % count].settled), None)

    def next_unanswered(self, after: int) -> int | None:
        """The batch's next pair after `after` still to answer (None when none is)."""
        count = len(self.items)
        return next((i % count for i in range(after + 1, after + 1 + count)
                     if not self.items[i % count].settled), None)

    def progress(self) -> MatchProgress:
        done = sum(v.settled for v in self.items)
        return MatchProgress(self._batch_number, done, len(self.items), self._answered,
                             self._needed)


def _this_process() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()


def _running(pid: int) -> bool:
    """Whether a process with this id runs on this machine (where that cannot be asked
    without side effects, as on Windows, it counts as running: the lease decides)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        return True
    return True


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _holder_gone(row, now: datetime) -> bool:
    """A hold whose process has ended: not seen for HOLD_LEASE, or on this machine with
    no process of its id."""
    if now - _aware(row.seen_at) > HOLD_LEASE:
        return True
    return row.host == socket.gethostname() and not _running(row.pid)


def _holder(row) -> str:
    seen = _aware(row.seen_at).astimezone(UTC)
    return f"process {row.pid} on {row.host}, last active {seen:%Y-%m-%d %H:%M:%S} UTC"


# -- reading answers ------------------------------------------------------------------------

def verification_frame(engine: Engine) -> pd.DataFrame:
    """Every answered verification: batch, claim, status, annotator, image and caption ids
    and keys, gold, answer, seconds, answered_at, the proposing models with their ranks
    (`models`: 'name:direction:rank' joined by ';', empty for gold items), and whether
    someone flagged the image as broken (`image_flagged`: the answer then decides nothing)."""
    from storage.rating.image_flags import flagged_image_ids

    claim, item, pair = MatchClaim.__table__, MatchBatchItem.__table__, MatchPair.__table__
    verification, annotator = MatchVerification.__table__, Annotator.__table__
    proposal, model = MatchProposal.__table__, MatchModel.__table__
    with engine.connect() as connection:
        items = load_collection(connection)
        rows = connection.execute(
            select(item.c.batch_id.label("batch"), claim.c.id.label("claim"), claim.c.status,
                   annotator.c.name.label("annotator"), pair.c.id.label("pair"),
                   pair.c.image_id.label("image"), pair.c.caption_id.label("caption"),
                   item.c.gold, verification.c.answer, verification.c.seconds,
                   verification.c.updated_at.label("answered_at"))
            .select_from(verification)
            .join(claim, claim.c.id == verification.c.claim_id)
            .join(annotator, annotator.c.id == claim.c.annotator_id)
            .join(item, item.c.id == verification.c.item_id)
            .join(pair, pair.c.id == item.c.pair_id)
            .where(verification.c.answer.is_not(None))
            .order_by(verification.c.id)).all()
        proposed = connection.execute(
            select(proposal.c.pair_id, model.c.name, proposal.c.direction, proposal.c.rank)
            .join(model, model.c.id == proposal.c.model_id)
            .order_by(proposal.c.pair_id, model.c.id, proposal.c.direction)).all()
        flagged = flagged_image_ids(connection)
    frame = pd.DataFrame(rows, columns=["batch", "claim", "status", "annotator", "pair",
                                        "image", "caption", "gold", "answer", "seconds",
                                        "answered_at"])
    labels: dict[int, list[str]] = {}
    for pair_id, name, direction, rank in proposed:
        labels.setdefault(pair_id, []).append(f"{name}:{direction}:{rank}")
    frame["models"] = frame["pair"].map(lambda p: ";".join(labels.get(p, [])))
    image_key = dict(zip(items.image_ids.tolist(), items.image_keys, strict=True))
    caption_key = dict(zip(items.caption_ids.tolist(), items.caption_keys, strict=True))
    frame.insert(6, "image_key", frame["image"].map(image_key))
    frame.insert(8, "caption_key", frame["caption"].map(caption_key))
    frame["answer"] = frame["answer"].astype("Int64")
    frame["image_flagged"] = frame["image"].isin(flagged)
    return frame


def match_counts(engine: Engine) -> dict[str, int]:
    """How far the project's match verification has come."""
    claim, verification = MatchClaim.__table__, MatchVerification.__table__
    batch, item = MatchBatch.__table__, MatchBatchItem.__table__
    with engine.connect() as connection:
        def count(statement) -> int:
            return connection.execute(statement).scalar_one()

        return {
            "models": _count(connection, MatchModel.__table__),
            "pairs": _count(connection, MatchPair.__table__),
            "batches": _count(connection, batch),
            "claims": _count(connection, claim),
            "rejected": count(select(func.count()).select_from(claim)
                              .where(claim.c.status == "rejected")),
            "answers": count(select(func.count()).select_from(verification)
                             .join(claim, claim.c.id == verification.c.claim_id)
                             .where(claim.c.status == "active",
                                    verification.c.answer.is_not(None))),
            "needed": count(select(func.coalesce(func.sum(batch.c.redundancy), 0))
                            .select_from(item).join(batch, batch.c.id == item.c.batch_id)),
        }


def proposal_frame(engine: Engine) -> pd.DataFrame:
    """Every proposal: model, direction, rank, image and caption ids."""
    proposal, model, pair = (MatchProposal.__table__, MatchModel.__table__,
                             MatchPair.__table__)
    with engine.connect() as connection:
        rows = connection.execute(
            select(model.c.name, proposal.c.direction, proposal.c.rank, pair.c.image_id,
                   pair.c.caption_id)
            .join(model, model.c.id == proposal.c.model_id)
            .join(pair, pair.c.id == proposal.c.pair_id)).all()
    return pd.DataFrame(rows, columns=["model", "direction", "rank", "image", "caption"])


def reject_claims(engine: Engine, claims: list[tuple[int, str]], *, actor: str) -> int:
    """Mark (batch, annotator) claims rejected after quality control: their answers leave
    the aggregation and the batch is open to another verifier. Returns how many changed."""
    claim, annotator = MatchClaim.__table__, Annotator.__table__
    changed = 0
    with locked(engine) as connection:
        for batch_id, name in claims:
            row = connection.execute(
                select(claim.c.id, claim.c.status).join(
                    annotator, annotator.c.id == claim.c.annotator_id)
                .where(claim.c.batch_id == batch_id, annotator.c.name == name)).one_or_none()
            if row is None:
                raise MatchError(f"{name} holds no claim on batch {batch_id}")
            if row.status == "rejected":
                continue
            connection.execute(update(claim).where(claim.c.id == row.id)
                               .values(status="rejected"))
            log_change(connection, actor=actor, action="update", table="match_claim",
                       row_id=row.id, old={"status": "active"}, new={"status": "rejected"})
            changed += 1
    return changed


# -- positive sets --------------------------------------------------------------------------

PositiveMaps = dict[str, dict[str, list[str]]]  # direction -> query key -> item keys


def positive_set_names(engine: Engine) -> list[str]:
    table = PositiveSet.__table__
    with engine.connect() as connection:
        return [ORIGINAL, *connection.execute(select(table.c.name).order_by(table.c.id))
                .scalars()]


def original_maps(connection: Connection) -> PositiveMaps:
    """The project's own positives: every caption with its image."""
    items = load_collection(connection)
    image_key = dict(zip(items.image_ids.tolist(), items.image_keys, strict=True))
    return pair_maps((image_key[i], c) for i, c in zip(
        items.caption_image.tolist(), items.caption_keys, strict=True))


def pair_maps(pairs: Iterable[tuple[str, str]]) -> PositiveMaps:
    """eccv-caption style maps {i2t: {image: [captions]}, t2i: {caption: [images]}} of a
    set of (image, caption) key pairs."""
    maps: PositiveMaps = {"i2t": {}, "t2i": {}}
    for image, caption in dict.fromkeys(pairs):
        maps["i2t"].setdefault(image, []).append(caption)
        maps["t2i"].setdefault(caption, []).append(image)
    return maps


def load_positive_set(engine: Engine, name: str) -> PositiveMaps:
    table, pairs = PositiveSet.__table__, PositivePair.__table__
    with engine.connect() as connection:
        if name == ORIGINAL:
            return original_maps(connection)
        set_id = connection.execute(select(table.c.id).where(table.c.name == name)).scalar()
        if set_id is None:
            known = ", ".join(positive_set_names(engine))
            raise MatchError(f"no positive set named {name!r} (known: {known})")
        rows = connection.execute(select(pairs.c.direction, pairs.c.query_key,
                                         pairs.c.item_key).where(pairs.c.set_id == set_id)
                                  .order_by(pairs.c.id)).all()
    maps: PositiveMaps = {"i2t": {}, "t2i": {}}
    for direction, query, item in rows:
        maps[direction].setdefault(query, []).append(item)
    return maps


@dataclass(frozen=True)
class PositiveCounts:
    """The size of a positive set: its image-caption pairs, and the entries of each
    direction's map (a pair is in one or both: ECCV Caption's maps are not symmetric)."""

    pairs: int
    i2t: int
    t2i: int

    @classmethod
    def of(cls, maps: PositiveMaps) -> PositiveCounts:
        i2t = {(query, item) for query, items in maps.get("i2t", {}).items()
               for item in items}
        t2i = {(item, query) for query, items in maps.get("t2i", {}).items()
               for item in items}
        return cls(len(i2t | t2i), len(i2t), len(t2i))


def store_positive_set(engine: Engine, name: str, maps: PositiveMaps, *, source: str,
                       actor: str, replace: bool = False) -> PositiveCounts:
    """Store a named positive set (all or nothing); with `replace`, an existing set of that
    name is replaced (logged as an update). Returns its size."""
    check_set_name(name)
    if name == ORIGINAL:
        raise MatchError(f"{ORIGINAL!r} is the project's own positive set; choose another "
                         "name")
    table, pairs = PositiveSet.__table__, PositivePair.__table__
    rows = [{"direction": direction, "query_key": str(query), "item_key": str(item)}
            for direction in ("i2t", "t2i") for query, items in maps.get(direction, {}).items()
            for item in dict.fromkeys(items)]
    with locked(engine) as connection:
        existing = connection.execute(select(table.c.id).where(table.c.name == name)).scalar()
        if existing is not None and not replace:
            raise MatchError(f"a positive set named {name!r} exists already")
        if existing is not None:
            connection.execute(pairs.delete().where(pairs.c.set_id == existing))
            connection.execute(table.delete().where(table.c.id == existing))
        set_id = connection.execute(table.insert().values(
            name=name, source=source, created_at=utcnow())).inserted_primary_key[0]
        for start in range(0, len(rows), 20_000):
            connection.execute(pairs.insert(), [{**r, "set_id": set_id}
                                                for r in rows[start:start + 20_000]])
        log_change(connection, actor=actor, action="import" if existing is None else "update",
                   table="positive_set", row_id=set_id,
                   new={name: {"source": source, "rows": len(rows)}})
    return PositiveCounts.of(maps)


def positive_set_sources(engine: Engine) -> dict[str, str]:
    table = PositiveSet.__table__
    with engine.connect() as connection:
        return {ORIGINAL: "the project's captions with their images",
                **dict(connection.execute(select(table.c.name, table.c.source)).all())}
