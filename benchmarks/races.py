"""Races on the THUMB protocol, on SQLite or PostgreSQL: processes released at the same
instant by a `multiprocessing.Barrier` act through the session API the screens use, and
the database is checked for protocol violations afterwards. Two races are on match
verification: one annotator in two processes at once (never two batches held at once,
never an answer silently overwritten), and one process taking the other's batch over (its
later answers refused). `tests/test_races.py` runs a
short version of every race; run this module for the long one and the throughput run:

    python -m benchmarks.races [--trials 200] [--postgres URL] [--reference REV]

It prints, per race, the trials, violations and errors (unhandled exceptions such as
"database is locked"), then 8 processes x 1,000 ratings: ratings lost and duplicated and
the p50/p99 commit latency (target p99 <= 50 ms on SQLite WAL). With `--reference REV`
(default: the last commit before the protocol was checked under the lock) the same races
run on that commit's code, extracted with `git archive`, in the same run: the "before"
column. The harness uses only API that both have."""

from __future__ import annotations

import argparse
import csv
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import import_module
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "46b8259"  # main before the protocol ran in one locked transaction
# The modules as the tree running this file names them: a reference tree predates #25's
# renames and #46's storage/rating/ (an installed thumb-tui would otherwise lend it
# today's modules by those names)
SESSIONS_MODULE, QUEUES_MODULE = next(
    (sessions, queues) for sessions, queues in (
        ("storage.rating.rating_sessions", "storage.rating.project_queues"),
        ("storage.rating_sessions", "storage.project_queues"),
        ("storage.annotation", "storage.workflow"))
    if (ROOT / f"{sessions.replace('.', '/')}.py").is_file())
RACES = ("stage-1 take", "two reviewers", "edit vs review", "queue walk",
         "match: one annotator twice", "match: take-over")
MATCH_RACES = RACES[4:]
CAPTIONS_PER_IMAGE = 2
WALKERS = 8
MATCH_ANSWERS_CAP = 400  # a take-over race's first process stops after this many answers


@dataclass
class RaceResult:
    race: str
    trials: int
    violations: int
    errors: int
    seconds: float
    error_sample: str = ""


@dataclass
class ThroughputResult:
    processes: int
    ratings: int
    saved: int
    lost: int
    duplicated: int
    errors: int
    p50_ms: float
    p99_ms: float
    seconds: float
    error_sample: str = ""


# -- the project ---------------------------------------------------------------------------


def _png(path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (4, 4), (200, 30, 30)).save(path)


def _write_project(folder: Path, images: int, *, rated_by: str | None = None,
                   double_every: int = 0) -> list[Path]:
    """CSV files of a project with `images` images of two captions each: the captions,
    and (with `rated_by`) complete stage-1 ratings by that annotator."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    captions, ratings = folder / "captions.csv", folder / "ratings.csv"
    with captions.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "image_id", "system", "caption", "double_rating"])
        for number in range(images):
            image = f"images/{number:05d}.png"
            _png(folder / image)
            double = "true" if double_every and number % double_every == 0 else "false"
            for system in range(CAPTIONS_PER_IMAGE):
                writer.writerow([image, f"race{number:05d}", f"S{system}",
                                 f"Caption {system} of picture {number}.", double])
    files = [captions]
    if rated_by:
        with ratings.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image_id", "system", "caption", "annotator", "stage",
                             "precision", "recall"])
            for number in range(images):
                for system in range(CAPTIONS_PER_IMAGE):
                    writer.writerow([f"race{number:05d}", f"S{system}",
                                     f"Caption {system} of picture {number}.", rated_by, 1,
                                     4, 4])
        files.append(ratings)
    return files


def drop_everything(url: str) -> None:
    """Empty a disposable PostgreSQL database: every table goes (its triggers with it)."""
    from sqlalchemy import MetaData, create_engine, text

    engine = create_engine(url)
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.begin() as connection:
        if "event_log" in metadata.tables:
            connection.execute(text("DROP TRIGGER IF EXISTS event_log_append_only "
                                    "ON event_log"))
        metadata.drop_all(connection)
    engine.dispose()


def fresh_project(target: str, folder: Path, images: int, **options: object) -> None:
    """A new database at `target` (a SQLite path, or a disposable PostgreSQL URL whose
    tables are dropped first) holding the generated project."""
    from storage import import_captions, open_database

    if "://" in target:
        drop_everything(target)
    else:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    engine = open_database(target)
    for file in _write_project(folder, images, **options):  # type: ignore[arg-type]
        import_captions(engine, file, actor="race-setup")
    engine.dispose()


def fresh_match_project(target: str, folder: Path, batches: int) -> None:
    """A project with a synthetic model's proposals packed into at least `batches` batches
    of four pairs (two candidates, one known positive, one known negative)."""
    import numpy as np

    from metrics.retrieval.match import ScoreFile
    from reports.match import make_batches, propose, top_lists_from_matrix
    from storage import open_database
    from storage.match import collection

    images = max(batches // 2 + 10, 20)
    fresh_project(target, folder, images)
    engine = open_database(target)
    items = collection(engine)
    scores = np.random.default_rng(0).random(
        (len(items.image_keys), len(items.caption_keys))).astype(np.float32)
    lists = top_lists_from_matrix(ScoreFile(scores, items.image_keys, items.caption_keys),
                                  items, Path("synthetic"), directions=("i2t", "t2i"),
                                  depth=5, sample=None, seed=0)
    propose(engine, lists, model="synthetic", signature="synthetic", direction="both",
            top_k=2, sample=None, seed=0, actor="race-setup")
    plan = make_batches(engine, size=4, redundancy=1, seed=0, negatives_beyond=5,
                        actor="race-setup", gold_systems=("S0",))  # S0's are true here
    engine.dispose()
    if len(plan) < batches:
        raise RuntimeError(f"the race project has {len(plan)} batches, not {batches}")


# -- what the workers do ---------------------------------------------------------------------


class _Crashes:
    """One process's unhandled exceptions (such as "database is locked"): counted, as the
    issue measured them, with the first one's text as a sample."""

    def __init__(self) -> None:
        self.count, self.sample = 0, ""

    def add(self, exc: Exception) -> None:
        self.count += 1
        self.sample = self.sample or f"{type(exc).__name__}: {exc}"[:200]


def _index(session, image_id: int) -> int | None:
    return next((i for i, image in enumerate(session.images) if image.id == image_id), None)


def _rate_image(session, image_id: int, values: Callable[[object], dict]) -> bool:
    """Open the image and save `values(group)` for each caption group; False when the
    protocol refuses (the screens then move on)."""
    protocol_error = import_module(QUEUES_MODULE).ProtocolError

    index = _index(session, image_id)
    if index is None:
        return False
    try:
        for group in session.open_image(index):
            session.set_values(group, values(group), image_index=index, focus=0)
    except protocol_error:
        return False
    return True


@dataclass(frozen=True)
class TeamLogins:
    """Race as a PostgreSQL team's annotators (`storage.team`): each annotator of the race
    logs in as their own role, `<name>_<suffix>`, which is also their annotator name;
    `run_race` makes the team once the project exists (the caller drops the roles)."""

    prefix: str
    suffix: str
    password: str

    def name(self, base: str) -> str:
        return f"{base}_{self.suffix}"

    def url(self, target: str, base: str) -> str:
        from sqlalchemy.engine import make_url

        return make_url(target).set(username=self.name(base), password=self.password
                                    ).render_as_string(hide_password=False)

    def make(self, target: str, names: list[str]) -> None:
        from storage import make_engine
        from storage.team import TeamRoles, add_member, init_team

        engine = make_engine(target)
        init_team(engine, TeamRoles.named(self.prefix))
        for base in names:
            add_member(engine, self.name(base), lead=False, password=self.password)
        engine.dispose()


RACE_ANNOTATORS = ("alice", "bob", *(f"ann{k}" for k in range(WALKERS)))


def _session(target: str, name: str, stage: int):
    from storage import make_engine
    from storage.models import Stage

    session_class = import_module(SESSIONS_MODULE).AnnotationSession
    return session_class(make_engine(target), name, stage=Stage(stage))


def _worker(role: int, race: str, target: str, image_ids: list[int],
            logins: TeamLogins | None, barrier, results, _done) -> None:
    """One process of a race: wait at the barrier before each trial, then act."""
    stage = {"two reviewers": 2, "edit vs review": 2 - role}.get(race, 1)
    name = {"edit vs review": ("bob", "alice")}.get(race, RACE_ANNOTATORS[2:])[role]
    session = (_session(target, name, stage) if logins is None else
               _session(logins.url(target, name), logins.name(name), stage))
    crashes, seen = _Crashes(), {}
    for image_id in image_ids if race != "queue walk" else [None]:
        barrier.wait()
        try:
            if race == "queue walk":
                for walked in [image.id for image in list(session.images)]:
                    _rate_image(session, walked, lambda _: {"precision": 3, "recall": 3})
            elif race == "edit vs review" and stage == 1:
                _rate_image(session, image_id, lambda _: {"precision": 2})
            elif race == "edit vs review":
                index = _index(session, image_id)
                groups = [] if index is None else session.open_image(index)
                seen[image_id] = {c: g.reference["precision"] for g in groups
                                  for c in g.caption_ids if g.reference}
            elif race == "two reviewers":
                _rate_image(session, image_id, lambda g: dict(g.reference))
            else:
                _rate_image(session, image_id, lambda _: {"precision": 3})
        except Exception as exc:
            crashes.add(exc)
    results.put((role, crashes.count, crashes.sample, seen))


def _match_session(engine, *, take_over: bool = False):
    """alice's verification session (taking her batch over from another process where this
    code can; code without a take-over just opens a second session)."""
    import inspect

    from storage.match import MatchSession

    if take_over and "take_over" in inspect.signature(MatchSession).parameters:
        return MatchSession(engine, "alice", take_over=True)
    return MatchSession(engine, "alice")


def _close(session) -> None:
    if session is not None and hasattr(session, "close"):
        session.close()


def _match_worker(role: int, race: str, target: str, trials: list[int], barrier, results,
                  done) -> None:
    """One of the two processes verifying as alice, for each trial.

    One annotator twice: both start a session at the same instant (every other trial
    alice has a batch open already, which both would resume), wait until both have
    started or been refused, then answer every pair of what they hold (role 0 answers 1,
    role 1 answers 4). Take-over: role 0 holds alice's batch and, from the instant both
    are released, keeps answering its pairs but the last (1) until it is refused or
    role 1 is done; role 1 takes the batch over at that instant and answers every pair 4.
    Each reports the answers it was told were saved, and what it held once both had
    started. Every process passes every barrier, whatever happens in between."""
    import storage.match  # noqa: F401  (loaded before the first trial, as in later ones)
    from storage import make_engine
    from storage.rating.protocol import ProtocolError

    engine = make_engine(target)
    crashes = _Crashes()
    held: list[tuple[int, int, int | None]] = []  # (trial, role, claim held)
    saved: list[tuple[int, int, int, int]] = []  # (trial, claim, item, answer) in order
    twice, take_over = race == MATCH_RACES[0], race == MATCH_RACES[1]

    for trial in trials:
        session = None
        try:
            if twice and role == 0 and trial % 2 == 0:
                _close(_match_session(engine))  # leaves alice's batch open, nobody on it
            if take_over and role == 0:
                done.clear()
                session = _match_session(engine)
        except Exception as exc:
            crashes.add(exc)
        barrier.wait()  # released together
        if twice or role == 1:
            try:
                session = _match_session(engine, take_over=take_over)
            except ProtocolError:
                session = None  # told: alice verifies in the other process
            except Exception as exc:
                crashes.add(exc)
        if twice:
            barrier.wait()  # both have started or been refused; nobody has answered yet
        claim = None if session is None else session.claim_id
        held.append((trial, role, claim))
        try:
            if claim is not None:
                pairs = range(len(session.items))
                if take_over and role == 0:
                    pairs = [i for _ in range(MATCH_ANSWERS_CAP) for i in pairs[:-1]]
                for count, index in enumerate(pairs):
                    if take_over and role == 0 and (done.is_set()
                                                    or count >= MATCH_ANSWERS_CAP):
                        break
                    session.answer(index, 1 if role == 0 else 4)
                    saved.append((trial, claim, session.items[index].item_id,
                                  1 if role == 0 else 4))
        except ProtocolError:
            pass  # told: this process no longer holds alice's batch
        except Exception as exc:
            crashes.add(exc)
        finally:
            if take_over and role == 1:
                done.set()
        try:
            _close(session)
        except Exception as exc:
            crashes.add(exc)
        barrier.wait()  # the trial is over: both sessions closed
    engine.dispose()
    results.put((role, crashes.count, crashes.sample, {"held": held, "saved": saved}))


def _run_processes(worker: Callable[..., None], processes: int, *args: object,
                   timeout: float = 1800) -> list[tuple]:
    """`processes` fresh processes of `worker(role, *args, barrier, results, done)`, sharing
    one barrier (that releases them together), one results queue and one event: what each
    put in the queue."""
    context = get_context("spawn")
    barrier, results, done = context.Barrier(processes), context.Queue(), context.Event()
    workers = [context.Process(target=worker, args=(role, *args, barrier, results, done))
               for role in range(processes)]
    for worker_process in workers:
        worker_process.start()
    outcomes: list[tuple] = []
    deadline = time.monotonic() + timeout
    while len(outcomes) < len(workers):
        try:
            outcomes.append(results.get(timeout=1))
        except queue.Empty:
            # a worker that died without its outcome (its traceback is on stderr) would
            # leave the others at the barrier: stop them rather than wait for the timeout
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for worker_process in workers:
                    worker_process.kill()
                raise RuntimeError(f"{worker.__name__}: {len(outcomes)} of {len(workers)} "
                                   f"processes reported; exit codes {dead or 'none yet'}"
                                   ) from None
    for worker_process in workers:
        worker_process.join()
    return outcomes


def _run_workers(target: str, race: str, processes: int, image_ids: list[int],
                 logins: TeamLogins | None = None) -> tuple[int, str, dict]:
    """The race's processes: their errors, the first error's text, and what they saw."""
    match = race in MATCH_RACES
    outcomes = (_run_processes(_match_worker, 2, race, target, image_ids) if match else
                _run_processes(_worker, processes, race, target, image_ids, logins))
    errors = sum(outcome[1] for outcome in outcomes)
    sample = next((outcome[2] for outcome in outcomes if outcome[2]), "")
    if match:
        return errors, sample, {"held": [h for o in outcomes for h in o[3]["held"]],
                                "saved": [s for o in sorted(outcomes) for s in o[3]["saved"]]}
    return errors, sample, {k: v for outcome in outcomes for k, v in outcome[3].items()}


# -- what counts as a violation --------------------------------------------------------------


def _raters(target: str, stage: int) -> dict[int, set[int]]:
    from sqlalchemy import select

    from storage import make_engine
    from storage.models import Caption, Rating

    rating, caption = Rating.__table__, Caption.__table__
    engine = make_engine(target)
    with engine.connect() as connection:
        rows = connection.execute(
            select(caption.c.image_id, rating.c.annotator_id)
            .join(caption, rating.c.caption_id == caption.c.id)
            .where(rating.c.stage == stage).distinct()).all()
    engine.dispose()
    raters: dict[int, set[int]] = {}
    for image_id, annotator_id in rows:
        raters.setdefault(image_id, set()).add(annotator_id)
    return raters


def _image_ids(target: str) -> dict[int, bool]:
    """image id -> double-rated."""
    from sqlalchemy import select

    from storage import make_engine
    from storage.models import Image

    engine = make_engine(target)
    with engine.connect() as connection:
        rows = connection.execute(select(Image.__table__.c.id,
                                         Image.__table__.c.double_rating)).all()
    engine.dispose()
    return dict(rows)


def _stage_one_precision(target: str) -> dict[int, int]:
    """caption id -> its stage-1 precision (alice's)."""
    from sqlalchemy import select

    from storage import make_engine
    from storage.models import Rating

    rating = Rating.__table__
    engine = make_engine(target)
    with engine.connect() as connection:
        rows = connection.execute(select(rating.c.caption_id, rating.c.precision)
                                  .where(rating.c.stage == 1)).all()
    engine.dispose()
    return dict(rows)


def _final_answers(target: str) -> dict[tuple[int, int], int | None]:
    """(claim id, item id) -> the answer the database holds."""
    from sqlalchemy import select

    from storage import make_engine
    from storage.models import MatchVerification

    table = MatchVerification.__table__
    engine = make_engine(target)
    with engine.connect() as connection:
        rows = connection.execute(select(table.c.claim_id, table.c.item_id,
                                         table.c.answer)).all()
    engine.dispose()
    return {(claim, item): answer for claim, item, answer in rows}


def _match_violations(race: str, target: str, seen: dict) -> int:
    """Trials in which alice held two batches (or one batch twice) at once, or an answer a
    process was told was saved is not what the database holds: silently overwritten by the
    other process. In the take-over race only the taking process's answers count (the
    first process's earlier answers were on the batch before it was taken over)."""
    final = _final_answers(target)
    bad: set[int] = set()
    holders: dict[int, int] = {}
    for trial, _role, claim in seen["held"]:
        holders[trial] = holders.get(trial, 0) + (claim is not None)
    if race == MATCH_RACES[0]:
        bad |= {trial for trial, count in holders.items() if count > 1}
    last: dict[tuple[int, int, int], int] = {}
    for trial, claim, item, answer in seen["saved"]:
        if race == MATCH_RACES[1] and answer != 4:
            continue
        last[(trial, claim, item)] = answer
    bad |= {trial for (trial, claim, item), answer in last.items()
            if final.get((claim, item)) != answer}
    return len(bad)


def match_api_present() -> bool:
    """Whether the tree this file runs in has match verification (a reference commit may
    not; asking the import system could find the installed working tree instead)."""
    return (ROOT / "storage" / "match.py").is_file() and (ROOT / "reports" / "match.py"
                                                          ).is_file()


def run_race(race: str, target: str, trials: int, folder: Path,
             logins: TeamLogins | None = None) -> RaceResult:
    """One race over `trials` images (the queue walk: `trials` images walked by 8; a match
    race: `trials` rounds of two processes verifying as one annotator). With `logins`
    (not for the match races, whose tables a team's annotators do not reach), each
    annotator races as their own role of a team."""
    if race not in RACES:
        raise ValueError(f"unknown race {race!r}; one of {', '.join(RACES)}")
    if logins is not None and race in MATCH_RACES:
        raise ValueError("the match races run without team logins")
    if race in MATCH_RACES:
        fresh_match_project(target, folder, 2 * trials + 2)
        start = time.perf_counter()
        errors, sample, seen = _run_workers(target, race, 2, list(range(trials)))
        seconds = time.perf_counter() - start
        return RaceResult(race, trials, _match_violations(race, target, seen), errors,
                          round(seconds, 2), sample)
    reviewed = race in ("two reviewers", "edit vs review")
    alice = "alice" if logins is None else logins.name("alice")
    fresh_project(target, folder, trials, rated_by=alice if reviewed else None,
                  double_every=10 if race == "queue walk" else 0)
    if logins is not None:
        logins.make(target, list(RACE_ANNOTATORS))
    images = _image_ids(target)
    start = time.perf_counter()
    processes = WALKERS if race == "queue walk" else 2
    errors, sample, seen = _run_workers(target, race, processes, sorted(images), logins)
    seconds = time.perf_counter() - start
    if race == "edit vs review":
        final = _stage_one_precision(target)
        violations = sum(any(final[c] != shown for c, shown in captions.items())
                         for captions in seen.values())
    else:
        raters = _raters(target, 2 if race == "two reviewers" else 1)
        violations = sum(len(raters.get(image_id, ())) > (
            2 if double and race == "queue walk" else 1) for image_id, double in images.items())
    return RaceResult(race, trials, violations, errors, round(seconds, 2), sample)


# -- throughput --------------------------------------------------------------------------------


def _throughput_worker(role: int, target: str, ratings: int, barrier, results, _done
                       ) -> None:
    """Walk the queue, claiming images, and rate P then R of every caption until
    `ratings` commits: each commit's latency and what it saved."""
    protocol_error = import_module(QUEUES_MODULE).ProtocolError

    session = _session(target, f"writer{role}", 1)
    latencies: list[float] = []
    saved: list[tuple[int, str, int]] = []
    crashes = _Crashes()
    barrier.wait()
    for image_id in [image.id for image in list(session.images)]:
        if len(latencies) >= ratings:
            break
        index = _index(session, image_id)
        try:
            groups = [] if index is None else session.open_image(index)
        except protocol_error:
            continue
        except Exception as exc:
            crashes.add(exc)
            continue
        for group in groups:
            for field in ("precision", "recall"):
                if len(latencies) >= ratings:
                    break
                current = group.values[field]
                value = 1 if current is None else int(current) % 5 + 1  # always a change
                start = time.perf_counter()
                try:
                    group = session.set_values(group, {field: value}, image_index=index,
                                               focus=0)
                except protocol_error:
                    break
                except Exception as exc:
                    crashes.add(exc)
                    continue
                latencies.append(time.perf_counter() - start)
                saved.extend((caption, field, value) for caption in group.caption_ids)
    results.put((f"writer{role}", latencies, saved, crashes.count, crashes.sample))


def run_throughput(target: str, folder: Path, processes: int = WALKERS,
                   ratings: int = 1000) -> ThroughputResult:
    """`processes` writers x `ratings` commits through the session API, all started by
    one barrier; then every saved value is looked for in the database."""
    from sqlalchemy import func, select

    from storage import make_engine
    from storage.models import Annotator, Event, Rating

    images = processes * ratings // (2 * CAPTIONS_PER_IMAGE) * 5 // 4 + 10
    fresh_project(target, folder, images)
    start = time.perf_counter()
    outcomes = _run_processes(_throughput_worker, processes, target, ratings, timeout=3600)
    seconds = time.perf_counter() - start
    latencies = sorted(x for outcome in outcomes for x in outcome[1])
    rating, annotator, event = Rating.__table__, Annotator.__table__, Event.__table__
    engine = make_engine(target)
    with engine.connect() as connection:
        stored = {(row.name, row.caption_id): row for row in connection.execute(
            select(annotator.c.name, rating.c.caption_id, rating.c.precision, rating.c.recall)
            .join(annotator, rating.c.annotator_id == annotator.c.id))}
        logged = connection.execute(select(func.count()).where(
            event.c.table_name == "rating", event.c.actor.like("writer%"))).scalar()
    engine.dispose()
    lost, saved = 0, 0
    for name, _, values, _, _ in outcomes:
        last: dict[tuple[int, str], int] = {}
        for caption, field, value in values:
            last[(caption, field)] = value
        saved += len(values)
        lost += sum(1 for (caption, field), value in last.items()
                    if (name, caption) not in stored
                    or getattr(stored[(name, caption)], field) != value)
    duplicated = max(0, logged - saved)  # event log rows beyond the changes saved
    lost += max(0, saved - logged)  # a saved change that left no event
    errors = sum(outcome[3] for outcome in outcomes)
    sample = next((outcome[4] for outcome in outcomes if outcome[4]), "")

    def percentile(share: float) -> float:
        if not latencies:
            return float("nan")
        return round(1000 * latencies[min(len(latencies) - 1,
                                          round(share * (len(latencies) - 1)))], 1)

    return ThroughputResult(processes, ratings, len(latencies), lost, duplicated, errors,
                            percentile(0.5), percentile(0.99), round(seconds, 1), sample)


# -- the command line --------------------------------------------------------------------------


def _measure(target_of: Callable[[str], str], trials: int, ratings: int, folder: Path
             ) -> dict[str, object]:
    races = [asdict(run_race(race, target_of(race), trials, folder / _slug(race)))
             for race in RACES if race not in MATCH_RACES or match_api_present()]
    throughput = asdict(run_throughput(target_of("throughput"), folder / "throughput",
                                       ratings=ratings))
    return {"races": races, "throughput": throughput}


def _targets(backend: str, postgres: str | None, folder: Path) -> Callable[[str], str]:
    if backend == "postgresql":
        assert postgres is not None
        return lambda _: postgres
    return lambda name: str(folder / f"{_slug(name)}.db")


def _slug(race: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in race)


def _reference_run(revision: str, backend: str, args: argparse.Namespace) -> dict:
    """The same measurements on `revision`'s code, in a subprocess on its own tree."""
    tree = Path(tempfile.mkdtemp(prefix="thumb-reference-"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        shutil.copy(Path(__file__), tree / "benchmarks" / "races.py")
        command = [sys.executable, "-m", "benchmarks.races", "--json", "--backend", backend,
                   "--trials", str(args.trials), "--ratings", str(args.ratings)]
        if args.postgres:
            command += ["--postgres", args.postgres]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"reference run failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def _table(backend: str, now: dict, before: dict | None) -> str:
    lines = [f"## {backend}", "", "| race | trials | violations | errors | violations "
             "before | errors before |", "|---|---|---|---|---|---|"]
    previous = {r["race"]: r for r in (before or {}).get("races", [])}
    for result in now["races"]:
        old = previous.get(result["race"], {})
        lines.append(f"| {result['race']} | {result['trials']} | {result['violations']} | "
                     f"{result['errors']} | {old.get('violations', '-')} | "
                     f"{old.get('errors', '-')} |")
    size = now["throughput"]
    lines += ["", f"| {size['processes']} x {size['ratings']:,} ratings | saved | lost | "
              "duplicated | errors | p50 ms | p99 ms | seconds |",
              "|---|---|---|---|---|---|---|---|"]
    for label, run in (("now", now), ("before", before)):
        if run:
            t = run["throughput"]
            lines.append(f"| {label} | {t['saved']} | {t['lost']} | {t['duplicated']} | "
                         f"{t['errors']} | {t['p50_ms']} | {t['p99_ms']} | {t['seconds']} |")
    samples = [f"- {label} {r['race']}: {r['error_sample']}"
               for label, run in (("now", now), ("before", before)) if run
               for r in [*run["races"], run["throughput"] | {"race": "throughput"}]
               if r.get("error_sample")]
    return "\n".join(lines + (["", "errors seen:", *samples] if samples else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--ratings", type=int, default=1000, help="per writer (8 writers)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--postgres", default=os.environ.get("THUMB_TEST_POSTGRES"),
                        help="disposable PostgreSQL URL (default: THUMB_TEST_POSTGRES)")
    parser.add_argument("--reference", default=REFERENCE,
                        help="git revision measured as 'before' ('' to skip)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    if not args.postgres:
        backends = [b for b in backends if b != "postgresql"]
    folder = Path(tempfile.mkdtemp(prefix="thumb-races-"))
    try:
        for backend in backends:
            now = _measure(_targets(backend, args.postgres, folder / backend), args.trials,
                           args.ratings, folder / backend)
            if args.json:
                print(json.dumps(now))
                continue
            before = _reference_run(args.reference, backend, args) if args.reference else None
            print(_table(backend, now, before), flush=True)
            print()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
