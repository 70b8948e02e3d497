"""The project dashboard behind `thumb status` and `thumb next`: how far each stage of the
THUMB pipeline is, what each annotator did and what waits for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from functools import cached_property
from typing import NamedTuple

from sqlalchemy import Connection, Engine, Table, and_, func, select

from storage.models import (
    Annotator,
    Assignment,
    BisonAnswer,
    BisonItem,
    Caption,
    FluencyCheck,
    Image,
    Rating,
    Resolution,
    Stage,
    utcnow,
)
from storage.rating.gold import gold_accuracy, gold_count, gold_waiting
from storage.rating.image_flags import BrokenImage, broken_images, flagged_by, flagged_image_ids
from storage.rating.project_queues import (
    Disagreement,
    primary_first_ratings,
    project_disagreements,
    project_fluency_queue,
    settleable_by,
)
from storage.rating.protocol import (
    ImageState,
    complete_clause,
    holding_clause,
    is_retired,
    may_check_fluency,
    open_images,
    read_states,
    started_clause,
)
from storage.rubric_registry import project_rubric
from storage.team import may_read


@dataclass(frozen=True)
class StageProgress:
    """One pipeline stage: how many units (images or captions) wait to be started, are in
    progress or are done; `not_ready` still wait for an earlier stage."""

    stage: str
    unit: str
    waiting: int
    in_progress: int
    done: int
    not_ready: int = 0


# the pipeline row of images whose final scores were imported before their stage 1 ended
SCORED_ELSEWHERE = "final scores imported"


@dataclass(frozen=True)
class Work:
    """Something an annotator can do now, as the command that does it."""

    command: str
    count: int
    noun: str  # singular: "image"
    purpose: str  # "to rate (stage 1)"

    @property
    def description(self) -> str:
        """`1 image to rate (stage 1)`, `3 images ...`."""
        return f"{self.count} {self.noun}{'' if self.count == 1 else 's'} {self.purpose}"


@dataclass(frozen=True)
class AnnotatorProgress:
    name: str
    native_english: bool | None
    rated_images: int  # stage 1, every caption scored
    rating_images: int  # stage 1, started and not finished
    reviewed_images: int
    reviewing_images: int
    resolved_captions: int
    fluency_verdicts: int
    bison_answers: int
    waiting: list[Work] = field(default_factory=list)
    gold_answered: int = 0  # gold captions answered (complete), never in the counts above
    gold_correct: int = 0  # of those, answered within the acceptable ranges


@dataclass(frozen=True)
class HeldClaim:
    """A claim that holds its image (`storage.rating.protocol.holding_clause`): whose, which
    image and stage, how many captions of it they rated there, and its age: seconds since
    they last worked on the image (a killed session's grows until `thumb release`)."""

    annotator: str
    image: str
    stage: int
    rated_captions: int
    age_seconds: float


@dataclass(frozen=True)
class Dashboard:
    images: int
    captions: int
    systems: dict[str, int]
    stages: list[StageProgress]
    annotators: list[AnnotatorProgress]
    broken_images: list[BrokenImage]
    bison_items: int
    gold_captions: int = 0  # gold items (storage.rating.gold): apart from images and captions
    claims: list[HeldClaim] = field(default_factory=list)  # oldest first


def held_claims(connection: Connection) -> list[HeldClaim]:
    """Every claim that holds its image, the oldest (longest untouched) first."""
    claim, image, person = Assignment.__table__, Image.__table__, Annotator.__table__
    caption, rating = Caption.__table__, Rating.__table__
    rated = (select(caption.c.image_id, rating.c.annotator_id, rating.c.stage,
                    func.count().label("captions"))
             .join(caption, rating.c.caption_id == caption.c.id)
             .group_by(caption.c.image_id, rating.c.annotator_id, rating.c.stage).subquery())
    now = utcnow()
    claims = []
    for name, key, stage, captions, seen in connection.execute(
            select(person.c.name, image.c.key, claim.c.stage,
                   func.coalesce(rated.c.captions, 0), claim.c.last_viewed_at)
            .join(person, person.c.id == claim.c.annotator_id)
            .join(image, image.c.id == claim.c.image_id)
            .outerjoin(rated, and_(rated.c.image_id == claim.c.image_id,
                                   rated.c.annotator_id == claim.c.annotator_id,
                                   rated.c.stage == claim.c.stage))
            .where(holding_clause(claim)).order_by(claim.c.last_viewed_at, claim.c.id)):
        seen = seen if seen.tzinfo else seen.replace(tzinfo=UTC)  # SQLite's naive UTC
        claims.append(HeldClaim(name, key, stage, captions,
                                max(0.0, (now - seen).total_seconds())))
    return claims


def _finished_and_started(connection: Connection) -> tuple[dict, dict]:
    """(stage, annotator id) -> image ids they finished (every caption scored) and image
    ids they started: rated any of, or hold (a claim that nobody else may take, though
    nothing is rated yet: an open screen, or a killed session's until `thumb release`)."""
    caption, rating, claim = Caption.__table__, Rating.__table__, Assignment.__table__
    sizes = dict(connection.execute(
        select(caption.c.image_id, func.count()).group_by(caption.c.image_id)).all())
    complete = complete_clause(rating)
    finished: dict[tuple[int, int], set[int]] = {}
    started: dict[tuple[int, int], set[int]] = {}
    for image_id, stage, annotator_id, scored in connection.execute(
            select(caption.c.image_id, rating.c.stage, rating.c.annotator_id,
                   func.count(rating.c.id).filter(complete))
            .join(caption, rating.c.caption_id == caption.c.id)
            .group_by(caption.c.image_id, rating.c.stage, rating.c.annotator_id)
    ).all():  # fetched whole: row by row costs more than the reading on a large project
        started.setdefault((stage, annotator_id), set()).add(image_id)
        if scored == sizes[image_id]:
            finished.setdefault((stage, annotator_id), set()).add(image_id)
    for image_id, stage, annotator_id in connection.execute(
            select(claim.c.image_id, claim.c.stage, claim.c.annotator_id)
            .where(holding_clause(claim))):
        started.setdefault((stage, annotator_id), set()).add(image_id)
    return finished, started


class _ProjectReads:
    """What the pipeline's counts and every annotator's work are counted from, each a pass
    over the project's ratings: read once per command, on first use, however many
    annotators ask."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @cached_property
    def progress(self) -> tuple[dict, dict]:
        """`_finished_and_started`."""
        return _finished_and_started(self.connection)

    @cached_property
    def states(self) -> dict[int, ImageState]:
        """Every image's state (`read_states`): which are past stage 1, who may resolve."""
        return read_states(self.connection)

    @cached_property
    def reviewed(self) -> dict[int, dict[str, object]]:
        """The stage-1 ratings that stage 2 reviewed, which both queues below compare."""
        return primary_first_ratings(self.connection, reviewed=True)

    @cached_property
    def disagreements(self) -> list[Disagreement]:
        """Every disagreement, resolved ones too (`Disagreement.resolved`)."""
        return project_disagreements(self.connection, self.reviewed)

    @cached_property
    def fluency_waiting(self) -> int:
        """Captions waiting for the fluency round."""
        return len(project_fluency_queue(self.connection, self.reviewed))

    def to_resolve(self, resolver: str) -> int:
        """Open disagreements that `resolver` may settle."""
        unresolved = [item for item in self.disagreements if not item.resolved]
        return len(settleable_by(resolver, unresolved, self.states))


def _by_stage(per_annotator: dict[tuple[int, int], set[int]], stage: Stage
              ) -> dict[int, int]:
    """image id -> how many annotators it has at `stage`."""
    counts: dict[int, int] = {}
    for (at, _), images in per_annotator.items():
        if at == int(stage):
            for image_id in images:
                counts[image_id] = counts.get(image_id, 0) + 1
    return counts


def _image_stages(connection: Connection, reads: _ProjectReads) -> list[StageProgress]:
    image = Image.__table__
    finished, started = reads.progress
    double = {row.id: bool(row.double_rating) for row in connection.execute(
        select(image.c.id, image.c.double_rating))}
    first_done, first_started = _by_stage(finished, Stage.FIRST), _by_stage(started,
                                                                            Stage.FIRST)
    second_done, second_started = _by_stage(finished, Stage.SECOND), _by_stage(
        started, Stage.SECOND)
    ready = {image_id for image_id, state in reads.states.items() if state.stage_one_over}

    def split(images: list[int], done: dict[int, int], begun: dict[int, int], need: int
              ) -> tuple[int, int, int]:
        finished_here = sum(1 for i in images if done.get(i, 0) >= need)
        going = sum(1 for i in images if done.get(i, 0) < need and begun.get(i, 0) >= need)
        return len(images) - finished_here - going, going, finished_here

    # final scores brought by an import (the THUMB release) close an image whose stage 1
    # never ended: no stage waits for it any more, so it has a row of its own
    scored_elsewhere = {image_id for image_id, state in reads.states.items()
                        if state.closed and not state.stage_one_over}
    everything = [i for i in double if i not in scored_elsewhere and reads.states[i].to_rate]
    doubles = [i for i in everything if double[i]]
    out = flagged_image_ids(connection)  # flagged as broken: out of review
    reviewed = [i for i in everything if i not in out]
    reviewable = [i for i in reviewed if i in ready]
    stages = [
        StageProgress("stage 1", "images", *split(everything, first_done, first_started, 1)),
        StageProgress("second blind rating", "images",
                      *split(doubles, first_done, first_started, 2)),
        StageProgress("review", "images", *split(reviewable, second_done, second_started, 1),
                      not_ready=len(reviewed) - len(reviewable)),
    ]
    if scored_elsewhere:
        stages.append(StageProgress(SCORED_ELSEWHERE, "images", 0, 0, len(scored_elsewhere)))
    return stages


def _caption_stages(connection: Connection, reads: _ProjectReads) -> list[StageProgress]:
    rating = Rating.__table__
    every = reads.disagreements
    open_ = {item.caption_id for item in every if not item.resolved}
    begun = set(connection.execute(select(rating.c.caption_id).where(
        rating.c.stage == int(Stage.FINAL), started_clause(rating))).scalars())
    going = len(open_ & begun)
    checked = connection.execute(
        select(func.count()).select_from(FluencyCheck.__table__)).scalar_one()
    stages = [StageProgress("resolution", "captions", len(open_) - going, going,
                            len(every) - len(open_))]
    rubric = project_rubric(connection)
    if rubric.has_penalty("fluency"):  # the native speakers' round, named as the rubric does
        stages.append(StageProgress(f"{rubric.penalty('fluency').label.lower()} round",
                                    "captions", reads.fluency_waiting, 0, checked))
    return stages


def nothing_open_at_stage_one(engine: Engine, name: str) -> str:
    """Why stage 1 opens no image to `name`, in counts of the project's images: none yet,
    or those `name` rated through stage 1 (no longer open to them) and those the others
    have taken or closed."""
    annotator, image = Annotator.__table__, Image.__table__
    with engine.connect() as connection:
        total = _count(connection, image)
        annotator_id = connection.execute(select(annotator.c.id).where(
            annotator.c.name == name)).scalar_one_or_none()
        finished, _ = _finished_and_started(connection)
        retired = is_retired(connection, name)
    if retired:
        return ("No image is open to you: you are retired (the lead's `thumb annotator "
                "retire`), and a retired annotator takes no new image.")
    if not total:
        return ("No image is open to you at stage 1: the project has none yet (import some "
                "with `thumb import FILE`).")
    yours = len(finished.get((int(Stage.FIRST), annotator_id), ()))
    return (f"No image is open to you at stage 1: of the project's {total} images, you "
            f"rated {yours} through stage 1 (no longer open to you at this stage) and "
            f"{total - yours} are taken or closed by other annotators. `thumb next "
            "--annotator NAME` says what waits for you.")


def work_for(engine: Engine, name: str) -> list[Work]:
    """What `name` can do now, each as the command to run (empty when nothing waits)."""
    with engine.connect() as connection:
        return _work_for(connection, name, _ProjectReads(connection))


def _work_for(connection: Connection, name: str, reads: _ProjectReads) -> list[Work]:
    annotator = Annotator.__table__
    row = connection.execute(select(annotator.c.id, annotator.c.native_english)
                             .where(annotator.c.name == name)).one_or_none()
    finished, _ = reads.progress
    listed = open_images(connection, name, Stage.FIRST, reads.states)  # as a session lists
    if row is None:  # a newcomer may take any image not full
        rateable = listed
        reviewable: set[int] = set()
        checks_fluency = False
    else:
        skip = flagged_by(connection, row.id)
        rateable = (listed - skip - finished.get((int(Stage.FIRST), row.id), set()))
        reviewable = (open_images(connection, name, Stage.SECOND, reads.states) - skip
                      - finished.get((int(Stage.SECOND), row.id), set()))
        checks_fluency = may_check_fluency(row.native_english)
    # on a team database BISON is the leads' work: an annotator's role cannot read it
    bison = may_read(connection, BisonItem.__tablename__)
    bison_total = connection.execute(
        select(func.count()).select_from(BisonItem.__table__)).scalar_one() if bison else 0
    answered = 0 if row is None or not bison else connection.execute(
        select(func.count()).select_from(BisonAnswer.__table__).where(
            BisonAnswer.__table__.c.annotator_id == row.id,
            BisonAnswer.__table__.c.answer.is_not(None))).scalar_one()
    # the gold images their stage-1 session seeds in look like any to rate
    gold = gold_waiting(connection, name, None if row is None else row.id, len(listed))
    work = [
        Work("annotate", len(rateable) + gold, "image", "to rate (stage 1)"),
        Work("review", len(reviewable), "image", "to review (stage 2)"),
        Work("resolve", reads.to_resolve(name) if row is not None else 0, "disagreement",
             "to resolve"),
        Work("fluency-round", reads.fluency_waiting if checks_fluency else 0, "caption",
             "for the fluency round"),
        Work("bison annotate", bison_total - answered, "BISON item", "to answer"),
    ]
    return [item for item in work if item.count]


def _stages(connection: Connection, reads: _ProjectReads) -> list[StageProgress]:
    """The pipeline per stage."""
    return _image_stages(connection, reads) + _caption_stages(connection, reads)


def _count(connection: Connection, table: Table) -> int:
    return connection.execute(select(func.count()).select_from(table)).scalar_one()


class ProjectSize(NamedTuple):
    """The project's images, captions and systems (in the order of their first caption,
    the order of the report's tables)."""

    images: int
    captions: int
    systems: list[str]


def project_size(engine: Engine) -> ProjectSize:
    """The project's images, captions and systems: an early report names them all, not
    only those rated so far."""
    caption = Caption.__table__
    with engine.connect() as connection:
        systems = connection.execute(select(caption.c.system).group_by(caption.c.system)
                                     .order_by(func.min(caption.c.import_order))).scalars()
        return ProjectSize(_count(connection, Image.__table__), _count(connection, caption),
                           list(systems))


def pipeline_stages(engine: Engine) -> list[StageProgress]:
    """The pipeline per stage as `thumb status` counts it, without the per-annotator work
    lists that status adds (each of those reads the queues again): what the monitor and the
    report show."""
    with engine.connect() as connection:
        return _stages(connection, _ProjectReads(connection))


def dashboard(engine: Engine) -> Dashboard:
    """Everything `thumb status` shows, read in a handful of grouped queries."""
    image, caption, annotator = Image.__table__, Caption.__table__, Annotator.__table__
    with engine.connect() as connection:
        reads = _ProjectReads(connection)
        stages = _stages(connection, reads)
        finished, started = reads.progress
        systems = dict(connection.execute(
            select(caption.c.system, func.count()).group_by(caption.c.system)
            .order_by(caption.c.system)).all())
        resolved = dict(connection.execute(
            select(Resolution.__table__.c.resolver_id, func.count())
            .group_by(Resolution.__table__.c.resolver_id)).all())
        verdicts = dict(connection.execute(
            select(FluencyCheck.__table__.c.checker_id, func.count())
            .group_by(FluencyCheck.__table__.c.checker_id)).all())
        answers = BisonAnswer.__table__
        bison = dict(connection.execute(
            select(answers.c.annotator_id, func.count()).where(answers.c.answer.is_not(None))
            .group_by(answers.c.annotator_id)).all())
        people = connection.execute(select(annotator.c.id, annotator.c.name,
                                           annotator.c.native_english)
                                    .order_by(annotator.c.name)).all()
        counts = [_count(connection, table) for table in (image, caption, BisonItem.__table__)]
        gold = {row.annotator: row for row in gold_accuracy(connection)}
        gold_captions = gold_count(connection)
        work = {name: _work_for(connection, name, reads) for _, name, _ in people}
        claims = held_claims(connection)

    def progress(annotator_id: int, stage: Stage) -> tuple[int, int]:
        done = finished.get((int(stage), annotator_id), set())
        return len(done), len(started.get((int(stage), annotator_id), set()) - done)

    annotators = [
        AnnotatorProgress(name, native, *progress(annotator_id, Stage.FIRST),
                          *progress(annotator_id, Stage.SECOND),
                          resolved.get(annotator_id, 0), verdicts.get(annotator_id, 0),
                          bison.get(annotator_id, 0), work[name],
                          *((gold[name].answered, gold[name].correct) if name in gold
                            else (0, 0)))
        for annotator_id, name, native in people
    ]
    return Dashboard(counts[0], counts[1], systems, stages, annotators,
                     broken_images(engine), counts[2], gold_captions, claims)
