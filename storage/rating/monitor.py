"""What `thumb monitor` reads, as plain frames and dataclasses: every complete rating with
the time recorded on it, the blind pairs agreement compares, the pipeline per stage (the
same as `thumb status`), the broken images and each annotator's gold accuracy. Read only,
each part in one short transaction (SELECTs only, portable SQL: SQLite and PostgreSQL
alike); the statistics are `metrics/stats/campaign.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Engine, and_, func, select
from sqlalchemy.exc import DBAPIError

from rubrics import SCORE_KEYS
from storage.db.engine import DatabaseBusy, _failure
from storage.models import Annotator, Assignment, Caption, Image, Rating
from storage.rating.dashboard import HeldClaim, StageProgress, held_claims, pipeline_stages
from storage.rating.gold import GoldAccuracy, gold_accuracy, gold_count
from storage.rating.image_flags import BrokenImage, broken_images
from storage.rating.protocol import complete_clause
from storage.rating.rating_frames import rating_pairs

if TYPE_CHECKING:
    import pandas as pd

RATING_COLUMNS = ["rating_id", "annotator", "stage", "image_id", "image", "double_rating",
                  "caption_id", *SCORE_KEYS, "seconds", "image_seconds", "image_captions",
                  "sequence"]


PAIR_COLUMNS = ["image", "caption_id", "annotator_a", "annotator_b",
                *[f"{key}_{side}" for key in SCORE_KEYS for side in ("a", "b")]]


class MonitorBusy(DatabaseBusy):
    """A read found the database locked by another process; nothing was read (try again)."""


@dataclass(frozen=True)
class MonitorData:
    """One reading of the project. `ratings`: one row per complete rating (columns
    RATING_COLUMNS; see metrics/stats/campaign.py); `blind_pairs`: one row per caption of a
    double-rated image with two complete stage-1 ratings (image, caption_id,
    precision_a/_b, recall_a/_b); `gold_captions`: how many gold captions the project
    has (0: no gold); `gold`: each annotator's gold accuracy (`storage.rating.gold`), those with
    a complete gold answer only."""

    annotators: list[str]
    ratings: pd.DataFrame
    blind_pairs: pd.DataFrame
    stages: list[StageProgress]
    broken_images: list[BrokenImage]
    gold_captions: int = 0
    gold: list[GoldAccuracy] = field(default_factory=list)
    double_images: int | None = None  # images marked for blind double rating
    claims: list[HeldClaim] = field(default_factory=list)  # held, oldest first


def double_marked(engine: Engine) -> int:
    """How many images are marked for blind double rating (`thumb assign --double`)."""
    image = Image.__table__
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(image).where(
            image.c.double_rating.is_(True))).scalar_one()


def complete_ratings(engine: Engine) -> pd.DataFrame:
    """Every complete rating with its annotator, image, the seconds stored on it (the app
    stores its first pass), the seconds the app recorded on that annotator's image at that
    stage (`image_seconds`, 0 without an assignment), how many captions the image has
    (`image_captions`: whether the annotator has all of it complete) and `sequence`: its
    place in the order ratings were last changed (updated_at, then id)."""
    import pandas as pd

    rating, caption, image, annotator, assignment = (
        Rating.__table__, Caption.__table__, Image.__table__, Annotator.__table__,
        Assignment.__table__)
    captions_of = (select(caption.c.image_id, func.count().label("captions"))
                   .group_by(caption.c.image_id).subquery())
    query = (
        select(rating.c.id, annotator.c.name, rating.c.stage, image.c.id, image.c.key,
               image.c.double_rating, caption.c.id, *[rating.c[key] for key in SCORE_KEYS],
               rating.c.seconds, assignment.c.seconds, captions_of.c.captions)
        .join(caption, rating.c.caption_id == caption.c.id)
        .join(image, caption.c.image_id == image.c.id)
        .join(captions_of, captions_of.c.image_id == image.c.id)
        .join(annotator, rating.c.annotator_id == annotator.c.id)
        .outerjoin(assignment, and_(assignment.c.image_id == caption.c.image_id,
                                    assignment.c.annotator_id == rating.c.annotator_id,
                                    assignment.c.stage == rating.c.stage))
        .where(complete_clause(rating))
        .order_by(rating.c.updated_at, rating.c.id)
    )
    with engine.connect() as connection:
        rows = [(*row, position) for position, row in enumerate(connection.execute(query))]
    frame = pd.DataFrame(rows, columns=RATING_COLUMNS)
    frame = frame.astype({"rating_id": "int64", "stage": "int64", "image_id": "int64",
                          "caption_id": "int64", "seconds": "float64",
                          "image_seconds": "float64", "image_captions": "int64",
                          "sequence": "int64",
                          **dict.fromkeys(SCORE_KEYS, "float64")})
    frame["image_seconds"] = frame["image_seconds"].fillna(0.0)
    frame["double_rating"] = frame["double_rating"].astype(bool)
    return frame


def annotator_names(engine: Engine) -> list[str]:
    annotator = Annotator.__table__
    with engine.connect() as connection:
        return list(connection.execute(
            select(annotator.c.name).order_by(annotator.c.name)).scalars())


def blind_pairs(engine: Engine) -> pd.DataFrame:
    """The blind pairs of P and R, as `thumb agreement` compares them
    (`storage.rating.rating_frames.rating_pairs`, kind `blind`)."""
    pairs = rating_pairs(engine, list(SCORE_KEYS))
    if pairs.empty:
        return _no_pairs()
    return pairs[pairs["kind"] == "blind"][PAIR_COLUMNS].reset_index(drop=True)


def _no_pairs() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(columns=PAIR_COLUMNS)


def gold_reading(engine: Engine) -> tuple[int, list[GoldAccuracy]]:
    """How many gold captions the project has, and each annotator's gold accuracy (as
    `thumb status` and the report count it), in one short transaction."""
    with engine.connect() as connection:
        count = gold_count(connection)
        return count, (gold_accuracy(connection) if count else [])


def blind_fingerprint(ratings: pd.DataFrame) -> tuple:
    """What the blind pairs depend on: the complete stage-1 ratings of double-rated
    images (an unchanged fingerprint means unchanged pairs)."""
    first = ratings[(ratings["stage"] == 1) & ratings["double_rating"]]
    return tuple(first[["rating_id", "caption_id", "annotator", *SCORE_KEYS]]
                 .itertuples(index=False, name=None))


def read_monitor(engine: Engine, previous: MonitorData | None = None) -> MonitorData:
    """Everything the monitor shows, each part read in its own short transaction; the
    blind pairs are taken from `previous` (the last reading) while the ratings they come
    from are unchanged. Raises MonitorBusy when the database is locked (SQLite while
    another process holds an exclusive lock; PostgreSQL lock or serialization
    failures)."""
    try:
        ratings = complete_ratings(engine)
        if previous is not None and blind_fingerprint(previous.ratings) == blind_fingerprint(
                ratings):
            pairs = previous.blind_pairs
        elif not blind_fingerprint(ratings):  # no double-rated image has a rating yet
            pairs = _no_pairs()
        else:
            pairs = blind_pairs(engine)
        gold_captions, gold = gold_reading(engine)
        with engine.connect() as connection:
            claims = held_claims(connection)
        return MonitorData(annotator_names(engine), ratings, pairs, pipeline_stages(engine),
                           broken_images(engine), gold_captions, gold,
                           double_marked(engine), claims)
    except DBAPIError as exc:
        if _failure(exc) == "busy":
            raise MonitorBusy("the database is busy (locked by another process)") from exc
        raise
