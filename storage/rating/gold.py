"""Gold items in THUMB rating: captions whose acceptable answers are known, seeded into
annotators' stage-1 queues to measure how well each rates.

Gold items live in their own tables (`gold_image`, `gold_caption`, `gold_answer`,
`gold_setting`), never in image/caption/rating: no analysis, report, agreement, export,
`thumb status` pipeline count or protocol rule reads those, so a gold item cannot reach
one (exclusion by construction). What reads them is here:

- `read_gold` / `import_gold`: the gold file (CSV or JSONL), checked like every user's
  file (each problem names file:line; all or nothing, in one transaction).
- `gold_settings` / `set_gold_settings`: the rate (share of a stage-1 queue that is gold)
  and whether a failed item's reason is shown after the image; `gold_share`: what the
  rate gives with the gold images there are (fewer than it wants: a lower share).
- `GoldSeeds`: the gold images of one annotator's stage-1 session, interleaved among the
  real ones (each in the same place in every session of the annotator, `placed`) with
  the same shapes (`ImageItem`, `CaptionGroup`; negative ids, which no real row has), and
  their answers.
- `gold_results` / `gold_accuracy`: per annotator and gold caption, the first complete
  answer (the scored one: going back after the feedback cannot change it) and whether it
  was right, with the answer now where it was changed; per annotator, the tally.
"""

from __future__ import annotations

import json
import random
import re
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path, PurePath

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    Update,
    and_,
    false,
    func,
    literal,
    literal_column,
    select,
    update,
)

from rubrics import PENALTY_KEYS, SCORE_KEYS, Rubric
from storage.db.engine import write_transaction
from storage.errors import InputError, Problem, Problems
from storage.events import log_change
from storage.imports.images import ImageFolder, checked_image
from storage.imports.import_files import read_records
from storage.imports.untrusted import KEY, NUMBER, TEXT
from storage.models import (
    Annotator,
    Event,
    GoldAnswer,
    GoldCaption,
    GoldImage,
    GoldSetting,
    Image,
    Stage,
    utcnow,
)
from storage.rating.protocol import complete_clause, is_complete, served_by_team
from storage.rating.rating_desk import (
    EMPTY_RATING,
    RATING_FIELDS,
    CaptionGroup,
    ImageItem,
    RatingDesk,
    Undone,
    group_of,
)
from storage.rubric_registry import project_rubric

DEFAULT_RATE = 0.1
MAX_RATE = 0.5  # the database's CHECK too: more gold than real work is no campaign
EPSILON = 1e-9

REQUIRED = ("image", "caption", *SCORE_KEYS, "reason")
OPTIONAL = ("path", *PENALTY_KEYS)
SCORED = (*SCORE_KEYS, *PENALTY_KEYS)  # what decides whether an answer is right
GOLD_SCHEMA = {"image": KEY, "path": TEXT, "caption": TEXT,
               **dict.fromkeys(SCORE_KEYS, KEY), **dict.fromkeys(PENALTY_KEYS, NUMBER),
               "reason": TEXT}
# (levels of at most 9 digits: int() refuses a number of thousands, and no scale is so wide)
_RANGE = re.compile(r"\s*(-?\d{1,9})\s*(?:-\s*(-?\d{1,9})\s*)?")


# --- the gold file ---------------------------------------------------------------------

@dataclass(frozen=True)
class GoldRow:
    """One gold caption of the file, checked."""

    line: int
    image: str
    path: str | None
    caption: str
    ranges: dict[str, tuple[int, int]]  # score key -> (min, max)
    penalties: dict[str, float]  # penalty key -> the most an answer may hold
    reason: str


def _score_range(text: str, key: str, rubric: Rubric) -> tuple[int, int] | str:
    """(min, max) from "4" or "4-5", each a level of the dimension's scale; else why not."""
    dimension = rubric.dimension(key)
    scale = f"{dimension.min}-{dimension.max}"
    match = _RANGE.fullmatch(text)
    if match is None:
        return (f"{key} must be a level of the rubric's scale {scale} or a range like "
                f"{dimension.max - 1}-{dimension.max}, not {text!r}")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) is not None else low
    if low not in dimension.scale or high not in dimension.scale:
        return f"{key} {text.strip()} is outside the rubric's scale {scale}"
    if low > high:
        return f"{key} range {text.strip()} runs backwards (write {high}-{low})"
    return low, high


def _penalty_max(text: str, key: str, rubric: Rubric) -> float | str:
    """The most an answer's penalty may hold: 0 (none expected) up to the rubric's cap."""
    if not rubric.has_penalty(key):
        return f"rubric {rubric.signature} has no {key} penalty"
    category = rubric.penalty(key)
    try:
        amount = float(text)
    except ValueError:
        amount = float("nan")
    if not (0 <= amount <= category.max_total + EPSILON):
        return (f"{key} must be the most an answer may hold, between 0 and "
                f"{category.max_total:g} (the rubric's {category.label.lower()} amounts: "
                f"{category.allowed_text()}), not {text!r}")
    return amount


def read_gold(path: Path, rubric: Rubric, problems: Problems, *,
              allow_outside_images: bool = False) -> list[GoldRow]:
    """The gold captions of a CSV or JSONL file: image (a key of the gold image, never a
    project image's), path (optional: the image file, relative to the gold file), caption,
    precision and recall (a level, or a range like 4-5, of the rubric's scale), each
    penalty (optional: the most an answer may hold, 0 when left out: none expected) and
    reason. Problems go to `problems`, each naming its line."""
    records = read_records(path, schema=GOLD_SCHEMA, problems=problems)
    known = set(REQUIRED) | set(OPTIONAL)
    columns = set().union(*(record.keys() for _, record in records))
    missing = sorted(set(REQUIRED) - columns)
    if missing and records:
        strange = sorted(columns - known)
        raise InputError([Problem(path, 1, f"missing column(s): {', '.join(missing)} "
                                           f"(a gold file has {', '.join(REQUIRED)}; "
                                           f"optional {', '.join(OPTIONAL)})"
                                  + (f"; unknown: {', '.join(strange)}" if strange else ""))])
    rows: list[GoldRow] = []
    seen: dict[tuple[str, str], int] = {}
    paths: dict[str, tuple[str | None, int]] = {}
    unknown_at: dict[str, int] = {}
    # image files next to the gold file: inside its folder (unless allowed out), and open
    images = ImageFolder(path.parent, allow_outside=allow_outside_images)
    for line, record in records:
        for column in sorted(set(record) - known):
            unknown_at.setdefault(column, line)
    for column, line in sorted(unknown_at.items(), key=lambda item: item[1]):
        problems.add(1 if path.suffix.lower() == ".csv" else line,
                     f"unknown column {column!r} (a gold file has {', '.join(REQUIRED)}; "
                     f"optional {', '.join(OPTIONAL)})")
    for line, record in records:
        if set(record) - known:
            continue
        values = {c: ("" if record.get(c) is None else str(record[c]).strip())
                  for c in known}
        empty = [c for c in REQUIRED if not values[c]]
        if empty:
            problems.add(line, f"empty {', '.join(empty)}")
            continue
        found: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        for key in SCORE_KEYS:
            got = _score_range(values[key], key, rubric)
            if isinstance(got, str):
                found.append(got)
            else:
                ranges[key] = got
        penalties: dict[str, float] = {}
        for key in PENALTY_KEYS:
            if values[key]:
                got_max = _penalty_max(values[key], key, rubric)
                if isinstance(got_max, str):
                    found.append(got_max)
                else:
                    penalties[key] = got_max
        image_path: str | None = None
        if values["path"]:
            image_path, problem = checked_image(images, values["path"])
            if problem:
                found.append(problem)
        key = (values["image"], values["caption"])
        if key in seen:
            found.append(f"duplicate gold caption of image {values['image']!r} "
                         f"(first on line {seen[key]})")
        before = paths.get(values["image"])
        if before is not None and before[0] != image_path and not found:
            found.append(f"image {values['image']!r} has another path on line {before[1]}")
        for message in found:
            problems.add(line, message)
        if found:
            continue
        seen[key] = line
        paths.setdefault(values["image"], (image_path, line))
        rows.append(GoldRow(line, values["image"], image_path, values["caption"], ranges,
                            penalties, values["reason"]))
    return rows


def import_gold(engine: Engine, path: str | Path, *, actor: str, rate: float | None = None,
                feedback: bool | None = None, allow_outside_images: bool = False,
                replace: bool = False) -> int:
    """Import a gold file (all or nothing, in one transaction; every problem names its
    file:line) with the project's rubric; returns the number of gold captions added or
    corrected. A gold image's key may not be a project image's (the annotator would see it
    twice); a caption already gold for its image is refused, or with `replace` takes the
    file's ranges, penalties and reason (answers stay, judged by the new ones; logged)."""
    path = Path(path)
    problems = Problems(path)
    if rate is not None:
        check_rate(rate)
    rubric = project_rubric(engine)
    rows = read_gold(path, rubric, problems, allow_outside_images=allow_outside_images)
    if not rows and not problems.items:
        raise InputError([Problem(path, 1, "no gold captions found")])
    gold_image, gold_caption = GoldImage.__table__, GoldCaption.__table__
    with write_transaction(engine) as connection:
        keys = sorted({row.image for row in rows})
        project = set(connection.execute(select(Image.__table__.c.key)
                                         .where(Image.__table__.c.key.in_(keys))).scalars())
        existing = {row.key: row for row in connection.execute(
            select(gold_image).where(gold_image.c.key.in_(keys)))}
        known = {(row.key, row.text): row for row in connection.execute(
            select(gold_image.c.key, gold_caption)
            .join(gold_caption, gold_caption.c.gold_image_id == gold_image.c.id)
            .where(gold_image.c.key.in_(keys)))}
        for row in rows:
            if row.image in project:
                problems.add(row.line, f"image {row.image!r} is a project image; a gold "
                                       "image needs a key of its own")
            elif (row.image, row.caption) in known and not replace:
                problems.add(row.line, f"duplicate gold caption of image {row.image!r} "
                                       "(already imported; --replace corrects it)")
            elif row.image in existing and row.path not in (None, existing[row.image].path):
                problems.add(row.line, f"gold image {row.image!r} was imported with "
                                       "another path")
        problems.raise_if_any()
        change_id = uuid.uuid4().hex
        image_ids = {key: existing[key].id for key in existing}
        for row in rows:
            if row.image not in image_ids:
                values = {"key": row.image, "path": row.path}
                image_ids[row.image] = connection.execute(gold_image.insert().values(
                    **values, created_at=utcnow())).inserted_primary_key[0]
                log_change(connection, actor=actor, action="import", table="gold_image",
                           row_id=image_ids[row.image], new=values, change_id=change_id)
            values = {"gold_image_id": image_ids[row.image], "text": row.caption,
                      **{f"{key}_{end}": row.ranges[key][index] for key in SCORE_KEYS
                         for index, end in enumerate(("min", "max"))},
                      **{f"{key}_max": row.penalties.get(key, 0.0) for key in PENALTY_KEYS},
                      "reason": row.reason, "rubric": rubric.signature}
            old = known.get((row.image, row.caption))
            if old is not None:  # --replace: the file's answer key and reason, logged
                changed = {k: v for k, v in values.items() if old._mapping[k] != v}
                if changed:
                    connection.execute(gold_caption.update().where(
                        gold_caption.c.id == old.id).values(**changed))
                    log_change(connection, actor=actor, action="update",
                               table="gold_caption", row_id=old.id,
                               old={k: old._mapping[k] for k in changed}, new=changed,
                               change_id=change_id)
                continue
            caption_id = connection.execute(gold_caption.insert().values(
                **values, created_at=utcnow())).inserted_primary_key[0]
            log_change(connection, actor=actor, action="import", table="gold_caption",
                       row_id=caption_id, new=values, change_id=change_id)
        if rate is not None or feedback is not None:
            _store_settings(connection, actor, rate, feedback)
    return len(rows)


# --- settings --------------------------------------------------------------------------

@dataclass(frozen=True)
class GoldSettings:
    rate: float = DEFAULT_RATE
    feedback: bool = False


def check_rate(rate: float) -> None:
    if not (0 <= rate <= MAX_RATE):
        raise ValueError(f"the gold rate is the share of a stage-1 queue that is gold: "
                         f"between 0 and {MAX_RATE:g}, not {rate:g}")


def _read_settings(connection: Connection) -> GoldSettings:
    table = GoldSetting.__table__
    row = connection.execute(select(table.c.rate, table.c.feedback)).first()
    return GoldSettings() if row is None else GoldSettings(float(row.rate), bool(row.feedback))


def gold_settings(engine: Engine) -> GoldSettings:
    """The project's gold rate and feedback setting (the defaults until one is set)."""
    with engine.connect() as connection:
        return _read_settings(connection)


def _store_settings(connection: Connection, actor: str, rate: float | None,
                    feedback: bool | None) -> GoldSettings:
    table = GoldSetting.__table__
    old = _read_settings(connection)
    new = GoldSettings(old.rate if rate is None else float(rate),
                       old.feedback if feedback is None else bool(feedback))
    values = {"rate": new.rate, "feedback": new.feedback}
    if connection.execute(select(table.c.id)).first() is None:
        connection.execute(table.insert().values(id=1, updated_at=utcnow(), **values))
    else:
        connection.execute(update(table).where(table.c.id == 1)
                           .values(updated_at=utcnow(), **values))
    log_change(connection, actor=actor, action="update", table="gold_setting", row_id=1,
               old={"rate": old.rate, "feedback": old.feedback}, new=values)
    return new


def set_gold_settings(engine: Engine, *, actor: str, rate: float | None = None,
                      feedback: bool | None = None) -> GoldSettings:
    """Change the gold rate and/or feedback (logged); returns the settings now."""
    if rate is not None:
        check_rate(rate)
    with write_transaction(engine) as connection:
        return _store_settings(connection, actor, rate, feedback)


# --- accuracy --------------------------------------------------------------------------

def answer_is_right(answer: dict[str, object], caption: dict[str, object]) -> bool:
    """A complete answer is right when every score lies within its range and every
    penalty is at most its acceptable amount."""
    return is_complete(answer) and all(
        caption[f"{key}_min"] <= answer[key] <= caption[f"{key}_max"]  # type: ignore[operator]
        for key in SCORE_KEYS) and all(
        float(answer[key] or 0.0) <= float(caption[f"{key}_max"]) + EPSILON  # type: ignore[arg-type]
        for key in PENALTY_KEYS)


# On a PostgreSQL team database (`storage.team`) an annotator's role may not write a gold
# answer's `first_*` columns, so the first answer is recorded by this function, which the
# team's owner role runs: `first_answer_update` for one answer row of the session's own
# annotator, at the server's time.
FIRST_ANSWER_FUNCTION = "thumb_gold_first_answer"


def first_answer_update(answer_row: ColumnElement[int], annotator: ColumnElement[int],
                        at: ColumnElement[datetime]) -> Update:
    """Keep the answer's values as its `first_*` columns (at `at`) if it is the
    annotator's, complete, and has no first answer yet: the answer its accuracy scores
    from then on, which no later change replaces."""
    answer = GoldAnswer.__table__
    return (update(answer)
            .where(answer.c.id == answer_row, answer.c.annotator_id == annotator,
                   answer.c.first_answered_at.is_(None), complete_clause(answer))
            .values(first_answered_at=at,
                    **{f"first_{key}": answer.c[key] for key in SCORED}))


def first_right_clause() -> ColumnElement[bool]:
    """`answer_is_right` in SQL, of a gold answer's first answer (`first_*`) against its
    caption's key (gold_answer joined to gold_caption): false, never NULL, for an
    incomplete one."""
    answer, caption = GoldAnswer.__table__, GoldCaption.__table__
    right = and_(*(answer.c[f"first_{key}"].between(caption.c[f"{key}_min"],
                                                     caption.c[f"{key}_max"])
                   for key in SCORE_KEYS),
                 *(func.coalesce(answer.c[f"first_{key}"], 0.0)
                   <= caption.c[f"{key}_max"] + EPSILON for key in PENALTY_KEYS))
    return func.coalesce(right, false())


@dataclass(frozen=True)
class GoldAccuracy:
    """One annotator's gold record: captions answered (completely), how many of those first
    answers were right, the share, and how many answers were changed afterwards."""

    annotator: str
    answered: int
    correct: int
    accuracy: float  # correct / answered (a row exists only with answered > 0)
    changed: int = 0  # answers that differ now from the first (scored) one


@dataclass(frozen=True)
class GoldResult:
    """One annotator's answer to one gold caption, for the lead: the first complete answer
    (the scored one), whether it was right, and the answer now where it was changed."""

    annotator: str
    image: str  # the lead's key of the gold image
    caption: str
    answer: dict[str, object]  # the first complete answer: scores and penalties
    right: bool
    changed_to: dict[str, object] | None  # the answer now, where it differs from `answer`


def _limits() -> list:
    caption = GoldCaption.__table__
    return [caption.c[f"{key}_{end}"] for key in SCORE_KEYS for end in ("min", "max")] + [
        caption.c[f"{key}_max"] for key in PENALTY_KEYS]


def gold_results(database: Engine | Connection) -> list[GoldResult]:
    """Every annotator's first complete answer to each gold caption (by annotator, gold
    image key, caption), judged by the caption's ranges, with the answer now if changed."""
    answer, caption, annotator, image = (GoldAnswer.__table__, GoldCaption.__table__,
                                         Annotator.__table__, GoldImage.__table__)
    query = (select(annotator.c.name, image.c.key, caption.c.text,
                    *[answer.c[key] for key in SCORED],
                    *[answer.c[f"first_{key}"] for key in SCORED], *_limits())
             .select_from(answer)
             .join(caption, caption.c.id == answer.c.gold_caption_id)
             .join(image, image.c.id == caption.c.gold_image_id)
             .join(annotator, annotator.c.id == answer.c.annotator_id)
             .where(answer.c.first_answered_at.is_not(None))
             .order_by(annotator.c.name, image.c.key, caption.c.id))
    if isinstance(database, Engine):
        with database.connect() as connection:
            rows = connection.execute(query).all()
    else:
        rows = database.execute(query).all()
    results = []
    for row in rows:
        values = row._mapping
        first = {key: values[f"first_{key}"] for key in SCORED}
        now = {key: values[key] for key in SCORED}
        results.append(GoldResult(row.name, row.key, row.text, first,
                                  answer_is_right(first, dict(values)),
                                  None if now == first else now))
    return results


def gold_accuracy(database: Engine | Connection) -> list[GoldAccuracy]:
    """Per annotator with any complete gold answer (by name): answered, correct (of the
    first complete answers), changed since."""
    tally: dict[str, list[int]] = {}
    for result in gold_results(database):
        counts = tally.setdefault(result.annotator, [0, 0, 0])
        counts[0] += 1
        counts[1] += result.right
        counts[2] += result.changed_to is not None
    return [GoldAccuracy(name, answered, correct, correct / answered, changed)
            for name, (answered, correct, changed) in sorted(tally.items())]


@dataclass(frozen=True)
class GoldShare:
    """What a gold rate gives a stage-1 list of all the project's images: the gold images
    it wants, those there are to seed, and the share of the list they will be."""

    asked: float
    real_images: int
    wanted: int
    gold_images: int

    @property
    def seeded(self) -> int:
        return min(self.wanted, self.gold_images)

    @property
    def rate(self) -> float:
        listed = self.real_images + self.seeded
        return self.seeded / listed if listed else 0.0

    @property
    def short(self) -> bool:
        """Too few gold images to reach the rate asked."""
        return self.gold_images < self.wanted


def gold_share(engine: Engine) -> GoldShare:
    """The project's gold rate against its images and the gold images on its rubric (the
    ones a session can seed)."""
    caption = GoldCaption.__table__
    with engine.connect() as connection:
        rate = _read_settings(connection).rate
        real = connection.execute(select(func.count()).select_from(Image.__table__)
                                  ).scalar_one()
        gold = connection.execute(
            select(func.count(caption.c.gold_image_id.distinct()))
            .where(caption.c.rubric == project_rubric(connection).signature)).scalar_one()
    return GoldShare(rate, real, wanted_gold(real, rate), gold)


def gold_count(connection: Connection) -> int:
    return connection.execute(select(func.count()).select_from(GoldCaption.__table__)
                              ).scalar_one()


# --- seeding into a stage-1 session ------------------------------------------------------

def is_gold(item_id: int) -> bool:
    """Gold images and captions carry negative ids in a session (no real row has one)."""
    return item_id < 0


def _shown_key(key: str, path: str | None) -> str:
    """What a session calls a gold image: its file's name without the extension, as the
    screens show a project image's (the lead's gold key is never shown to an annotator)."""
    return PurePath(path).stem if path else key


def wanted_gold(real_images: int, rate: float) -> int:
    """How many gold images make `rate` the gold share of a list of `real_images`."""
    return round(rate * real_images / (1 - rate)) if real_images and rate < 1 else 0


def seeded_gold(connection: Connection, annotator: str, annotator_id: int | None,
                real_images: int, rate: float, rubric: str
                ) -> tuple[list[ImageItem], dict[int, list[int]], dict[int, set[int]]]:
    """The gold images an annotator's stage-1 list of `real_images` holds: those they have
    answered (each stays, once), then more in an order seeded by their name until the
    gold share is `rate` (of the list); only gold captions on the session's `rubric`
    (signature). Returns them, their captions and the captions the annotator has
    complete (ids negative)."""
    gold_image, gold_caption = GoldImage.__table__, GoldCaption.__table__
    answer = GoldAnswer.__table__
    images = connection.execute(select(gold_image.c.id, gold_image.c.key, gold_image.c.path)
                                .order_by(gold_image.c.id)).all()
    captions_of: dict[int, list[int]] = {}
    for caption_id, image_id in connection.execute(
            select(gold_caption.c.id, gold_caption.c.gold_image_id)
            .where(gold_caption.c.rubric == rubric).order_by(gold_caption.c.id)):
        captions_of.setdefault(-image_id, []).append(-caption_id)
    answered: dict[int, set[int]] = {}
    if annotator_id is not None:
        for caption_id, image_id, complete in connection.execute(
                select(gold_caption.c.id, gold_caption.c.gold_image_id,
                       complete_clause(answer))
                .join(answer, answer.c.gold_caption_id == gold_caption.c.id)
                .where(answer.c.annotator_id == annotator_id)):
            done = answered.setdefault(-image_id, set())
            if complete:
                done.add(-caption_id)
    rng = random.Random(f"thumb-gold:{annotator}")
    order = [ImageItem(-row.id, _shown_key(row.key, row.path), row.path) for row in images
             if -row.id in captions_of]
    rng.shuffle(order)
    chosen = [item for item in order if item.id in answered]
    chosen += [item for item in order if item.id not in answered][
        :max(0, wanted_gold(real_images, rate) - len(chosen))]
    return chosen, captions_of, answered


def placed(real: list[ImageItem], gold: list[ImageItem], annotator: str,
           id_span: tuple[int, int]) -> list[ImageItem]:
    """The real images in their order (by id) with each gold image just before the first
    real one whose id reaches the gold image's anchor: a point among the project's ids
    (`id_span`: lowest and highest; each of the places before one of them, or after the
    last, as likely) drawn from the annotator's name and the gold image alone. So a gold
    image keeps its place among the real images from session to session as they keep
    theirs, whichever gold images were answered or are seeded with it."""
    low, high = id_span
    anchors = {item.id: low - 1 + (high - low + 2) * random.Random(
        f"thumb-gold-place:{annotator}:{-item.id}").random() for item in gold}
    waiting = sorted(gold, key=lambda item: (anchors[item.id], item.id))
    merged: list[ImageItem] = []
    for image in real:
        while waiting and anchors[waiting[0].id] <= image.id:
            merged.append(waiting.pop(0))
        merged.append(image)
    return merged + waiting


def gold_waiting(connection: Connection, annotator: str, annotator_id: int | None,
                 real_images: int) -> int:
    """How many gold images the annotator's stage-1 list holds unfinished (`thumb next`
    counts them with the images to rate, as the session does)."""
    if not gold_count(connection):
        return 0
    chosen, captions_of, answered = seeded_gold(
        connection, annotator, annotator_id, real_images, _read_settings(connection).rate,
        project_rubric(connection).signature)
    return sum(len(answered.get(item.id, ())) < len(captions_of[item.id]) for item in chosen)


class GoldSeeds:
    """The gold images seeded into one annotator's stage-1 session (their desk's
    worklist) and their answers. Which gold images, and where, follow from the
    annotator's name (a seeded shuffle): the ones they have answered stay, and more are
    taken until the gold share of the list is the rate; each in its own place among the
    real images (`placed`), the same in every session."""

    def __init__(self, desk: RatingDesk) -> None:
        self.desk = desk
        real = list(desk.images)
        image = Image.__table__
        with desk.engine.connect() as connection:
            self.settings = _read_settings(connection)
            chosen, captions_of, answered = seeded_gold(
                connection, desk.annotator, desk.annotator_id, len(real), self.settings.rate,
                desk.rubric.signature)
            # the project's ids (on a team database, those the annotator's role may read)
            low, high = connection.execute(select(func.min(image.c.id),
                                                  func.max(image.c.id))).one()
        merged = placed(real, chosen, desk.annotator, (low or 0, high or 0))
        self.image_ids = {item.id for item in chosen}
        desk.add_undoer("gold", self.undo)  # gold answer changes join the desk's undo
        desk.worklist = desk.worklist.including(
            merged, {item.id: captions_of[item.id] for item in chosen},
            {item.id: answered.get(item.id, set()) for item in chosen})

    def holds(self, image_id: int | None) -> bool:
        return image_id is not None and image_id in self.image_ids

    # -- reading ----------------------------------------------------------------------

    def _rows(self, connection: Connection, annotator_id: int | None, where) -> list:
        """Gold captions matching `where` with this annotator's answer values, shaped as
        the desk's caption rows (id, text, the rating fields; ids negative)."""
        caption, answer = GoldCaption.__table__, GoldAnswer.__table__
        return connection.execute(
            select((-caption.c.id).label("id"), caption.c.text,
                   caption.c.gold_image_id, *[answer.c[f] for f in RATING_FIELDS])
            .select_from(caption)
            .outerjoin(answer, and_(answer.c.gold_caption_id == caption.c.id,
                                    answer.c.annotator_id == annotator_id))
            .where(where).order_by(caption.c.id)).all()

    def _seed(self, image_id: int) -> int:
        return zlib.crc32(f"{self.desk.annotator}:{image_id}".encode())

    def open_image(self, index: int) -> list[CaptionGroup]:
        """The gold image's captions as any image's (identical texts merged, shuffled);
        its time starts. Nothing is claimed: the protocol does not apply to gold."""
        image = self.desk.images[index]
        with self.desk.engine.connect() as connection:
            rows = self._rows(connection, self.desk.annotator_id,
                              GoldCaption.__table__.c.gold_image_id == -image.id)
        return self.desk.show(image.id, rows, self._seed(image.id))

    def index_of_caption(self, caption_id: int) -> int:
        with self.desk.engine.connect() as connection:
            image_id = connection.execute(
                select(GoldCaption.__table__.c.gold_image_id)
                .where(GoldCaption.__table__.c.id == -caption_id)).scalar_one()
        return self.desk.index_of(-image_id)

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        caption = GoldCaption.__table__
        with self.desk.engine.connect() as connection:
            image_id = connection.execute(select(caption.c.gold_image_id)
                                          .where(caption.c.id == -caption_id)).scalar_one()
            rows = self._rows(connection, self.desk.annotator_id,
                              caption.c.gold_image_id == image_id)
        return group_of(rows, image_id, caption_id)

    def _complete(self, connection: Connection, me: int, image_id: int) -> dict[int, set[int]]:
        caption, answer = GoldCaption.__table__, GoldAnswer.__table__
        done = set(connection.execute(
            select(-caption.c.id).join(answer, and_(
                answer.c.gold_caption_id == caption.c.id, answer.c.annotator_id == me,
                complete_clause(answer)))
            .where(caption.c.gold_image_id == -image_id)).scalars())
        return {image_id: done}

    # -- changing ---------------------------------------------------------------------

    def set_values(self, group: CaptionGroup, values: dict[str, object], *,
                   image_index: int, elapsed: float) -> CaptionGroup:
        """Answer the gold captions of the group: `gold_answer` rows (with event-log rows,
        like a rating's), never a rating."""
        desk = self.desk
        desk.validate(values, group.values)
        changed = {f: v for f, v in values.items() if group.values.get(f) != v}
        if not changed:
            return group
        image_id = desk.images[image_index].id

        change_id = uuid.uuid4().hex

        def write(connection: Connection, me: int) -> dict[int, set[int]]:
            for position, caption_id in enumerate(group.caption_ids):
                self._write(connection, me, caption_id, changed, change_id, action="update",
                            seconds=elapsed if position == 0 else 0.0)
            return self._complete(connection, me, image_id)

        desk.worklist.settle(desk.write(write))
        desk.remember("gold", change_id)
        return replace(group, values={**group.values, **changed})

    def _write(self, connection: Connection, me: int, caption_id: int,
               values: dict[str, object], change_id: str, *, action: str,
               reverts: str | None = None, seconds: float = 0.0) -> None:
        answer = GoldAnswer.__table__
        now = utcnow()
        row = connection.execute(select(answer).where(
            answer.c.gold_caption_id == -caption_id, answer.c.annotator_id == me)
        ).one_or_none()
        old = (dict(EMPTY_RATING) if row is None
               else {f: getattr(row, f) for f in RATING_FIELDS})
        if row is None:
            answer_id = connection.execute(answer.insert().values(
                gold_caption_id=-caption_id, annotator_id=me,
                rubric=self.desk.rubric.signature, seconds=seconds, created_at=now,
                updated_at=now, **{**EMPTY_RATING, **values})
            ).inserted_primary_key[0]
        else:
            answer_id = row.id
            connection.execute(update(answer).where(answer.c.id == answer_id).values(
                updated_at=now, seconds=answer.c.seconds + seconds, **values))
        if row is None or row.first_answered_at is None:
            _record_first_answer(connection, answer_id, me, now)
        log_change(connection, actor=self.desk.annotator, action=action,
                   table="gold_answer", row_id=answer_id, old=old, new=values,
                   change_id=change_id, reverts=reverts)

    def undo(self, change_id: str) -> Undone | None:
        """Take back one gold answer change of this session (logged as an undo): the gold
        image, the fields and one caption it touched; None if already taken back."""
        event, answer = Event.__table__, GoldAnswer.__table__

        def undo(connection: Connection, me: int) -> tuple | None:
            if connection.execute(select(event.c.id).where(event.c.reverts == change_id)
                                  .limit(1)).first() is not None:
                return None
            events = connection.execute(
                select(event.c.row_id, event.c.field_name, event.c.old_value)
                .where(event.c.change_id == change_id).order_by(event.c.id.desc())).all()
            if not events:
                return None
            restore: dict[int, dict[str, object]] = {}
            for row in events:
                restore.setdefault(row.row_id, {})[row.field_name] = json.loads(row.old_value)
            caption_of = {answer_id: -caption_id for answer_id, caption_id in connection.execute(
                select(answer.c.id, answer.c.gold_caption_id).where(answer.c.id.in_(restore)))}
            undo_id = uuid.uuid4().hex
            for answer_id, values in restore.items():
                self._write(connection, me, caption_of[answer_id], values, undo_id,
                            action="undo", reverts=change_id)
            image_id = -connection.execute(
                select(GoldCaption.__table__.c.gold_image_id).where(
                    GoldCaption.__table__.c.id == -next(iter(caption_of.values())))
            ).scalar_one()
            return events, caption_of, image_id, self._complete(connection, me, image_id)

        done = self.desk.write(undo)
        if done is None:
            return None
        events, caption_of, image_id, complete = done
        self.desk.worklist.settle(complete)
        fields = list(dict.fromkeys(row.field_name for row in reversed(events)))
        return Undone(image_id, fields, next(iter(caption_of.values())))

    # -- feedback ---------------------------------------------------------------------

    def feedback_for(self, image_id: int | None) -> str | None:
        """With feedback on: the reasons of the gold captions of this image that the
        annotator answered (completely) and got wrong; None otherwise."""
        if not self.settings.feedback or not self.holds(image_id) or (
                self.desk.annotator_id is None):
            return None
        with self.desk.engine.connect() as connection:
            if served_by_team(connection, FEEDBACK_FUNCTION):
                served = getattr(func, FEEDBACK_FUNCTION)(-image_id)  # type: ignore[operator]
                rows = connection.execute(select(literal_column("*")).select_from(served)).all()
            else:
                rows = connection.execute(feedback_query(
                    literal(-image_id), literal(self.desk.annotator_id))).all()  # type: ignore[operator]
        wrong = [f"“{_shortened(row.text)}”: {row.reason}" for row in rows]
        if not wrong:
            return None
        return "About the previous image: " + "\n".join(dict.fromkeys(wrong))


# On a PostgreSQL team database (`storage.team`) an annotator's role may not read a gold
# caption's key, so the feedback comes from this function, which the team's owner role
# runs: `feedback_query` for one gold image and the session's own annotator.
FEEDBACK_FUNCTION = "thumb_gold_feedback"


def feedback_query(gold_image: ColumnElement[int], annotator: ColumnElement[int]) -> Select:
    """The text and reason of each gold caption of the gold image whose first answer by
    the annotator (the scored one) was wrong, judged here: while the project's feedback
    is on, and never the key itself, so that what the feedback shows an annotator's role
    is what the screen shows after the image, and no caption they have not answered."""
    caption, answer, setting = (GoldCaption.__table__, GoldAnswer.__table__,
                                GoldSetting.__table__)
    return (select(caption.c.text, caption.c.reason)
            .join(answer, and_(answer.c.gold_caption_id == caption.c.id,
                               answer.c.annotator_id == annotator))
            .where(caption.c.gold_image_id == gold_image,
                   answer.c.first_answered_at.is_not(None), ~first_right_clause(),
                   select(setting.c.id).where(setting.c.feedback.is_(True)).exists())
            .order_by(caption.c.id))


def _record_first_answer(connection: Connection, answer_id: int, me: int,
                         now: datetime) -> None:
    """`first_answer_update` of one answer row: on a team database through the owner's
    function (the role may not write `first_*`), elsewhere directly."""
    if served_by_team(connection, FIRST_ANSWER_FUNCTION):
        connection.execute(select(getattr(func, FIRST_ANSWER_FUNCTION)(answer_id)))
    else:
        at = literal(now, GoldAnswer.__table__.c.first_answered_at.type)
        connection.execute(first_answer_update(literal(answer_id), literal(me), at))


def _shortened(text: str, limit: int = 40) -> str:
    """A caption named in a message: whole when short, else its start and an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


class GoldFront:
    """What a stage-1 session (`AnnotationSession`) does differently for a gold image, as
    a mixin before `DeskFront`: every member passes a real image or caption on to the
    desk and handles a gold one (negative id) itself; `gold` is None where there is none
    seeded. The screens call the same members either way."""

    desk: RatingDesk
    gold: GoldSeeds | None = None
    _feedback: str | None = None

    def _gold_image(self, index: int) -> bool:
        return self.gold is not None and self.gold.holds(self.desk.images[index].id)

    def open_gold(self, index: int, release: Callable[[Connection, int, int], None]
                  ) -> list[CaptionGroup] | None:
        """Called first by `open_image`: notes the feedback on the image being left, and
        opens a gold image (giving up the claim on a real one left untouched, through
        `release`); None for a real image, which the session opens itself."""
        if self.gold is None:
            return None
        left, image_id = self.desk.opened, self.desk.images[index].id
        if left != image_id:
            self._feedback = self.gold.feedback_for(left)
        if not self.gold.holds(image_id):
            return None
        if left is not None and not is_gold(left):
            self.desk.write(lambda connection, me: release(connection, me, left))
        return self.gold.open_image(index)

    def feedback(self) -> str | None:
        """With gold feedback on, once after leaving a gold image answered wrongly: why
        (the gold caption's reason); None otherwise."""
        text, self._feedback = self._feedback, None
        return text

    def look_at(self, index: int) -> None:
        if self._gold_image(index):
            self.desk.register()
            return
        super().look_at(index)  # type: ignore[misc]

    def remember_position(self, index: int, focus: int) -> None:
        if self._gold_image(index):
            return  # a gold answer keeps its own time (set_values)
        super().remember_position(index, focus)  # type: ignore[misc]

    def set_values(self, group: CaptionGroup, values: dict[str, object], *,
                   image_index: int, focus: int) -> CaptionGroup:
        if self.gold is not None and is_gold(group.caption_ids[0]):
            image_id = self.desk.images[image_index].id
            return self.gold.set_values(group, values, image_index=image_index,
                                        elapsed=self.desk._elapsed(image_id))
        return super().set_values(group, values,  # type: ignore[misc]
                                  image_index=image_index, focus=focus)

    def flag_broken(self, index: int, *args: object, **kwargs: object) -> None:
        if self._gold_image(index):  # nothing to record: the gold image just goes
            self.desk.flagged.add(self.desk.images[index].id)
            return None
        return super().flag_broken(index, *args, **kwargs)  # type: ignore[misc]

    def group_for_caption(self, caption_id: int) -> CaptionGroup:
        if self.gold is not None and is_gold(caption_id):
            return self.gold.group_for_caption(caption_id)
        return super().group_for_caption(caption_id)  # type: ignore[misc]

    def image_index_of_caption(self, caption_id: int) -> int:
        if self.gold is not None and is_gold(caption_id):
            return self.gold.index_of_caption(caption_id)
        return super().image_index_of_caption(caption_id)  # type: ignore[misc]


def seeds_for(desk: RatingDesk) -> GoldSeeds | None:
    """The gold seeded into a stage-1 desk, or None where there is none to seed."""
    if desk.stage != Stage.FIRST:
        return None
    with desk.engine.connect() as connection:
        if not gold_count(connection):
            return None
    seeds = GoldSeeds(desk)
    return seeds if seeds.image_ids else None


__all__ = ["GoldAccuracy", "GoldFront", "GoldResult", "GoldRow", "GoldSeeds", "GoldSettings",
           "GoldShare", "answer_is_right", "check_rate", "gold_accuracy", "gold_results",
           "gold_settings", "gold_share", "import_gold", "is_gold", "read_gold", "seeds_for",
           "set_gold_settings"]
