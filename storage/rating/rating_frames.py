"""The ratings as the analyses read them: every rating, the final scores per caption,
the pairs of ratings that agreement compares, who contributed, and the project's counts.
Tidy frames in, no statistics here (those are `metrics/`); metric scores are
`storage/metric_scores.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Engine, func, select

from rubrics import PENALTY_KEYS, SCORE_KEYS
from storage.models import (
    RATING_VALUE_FIELDS,
    Annotator,
    Caption,
    FluencyCheck,
    Image,
    ImageReference,
    Rating,
    Resolution,
    Stage,
)
from storage.rating.image_flags import not_flagged
from storage.rating.project_queues import primary_first_ratings
from storage.rating.protocol import complete_clause, complete_rows

RATING_VALUE_COLUMNS = [
    *RATING_VALUE_FIELDS, "note", "seconds", "rubric", "created_at", "updated_at",
]

if TYPE_CHECKING:  # pandas loads where a frame is built: `thumb status` needs none
    import numpy as np
    import pandas as pd


def with_totals(frame: pd.DataFrame, engine: Engine) -> pd.DataFrame:
    """Add `total` from each rating's own rubric, as stored in the database (NaN while a
    score is missing)."""
    from storage.rubric_registry import stored_rubrics

    rubrics = stored_rubrics(engine)
    frame = frame.copy()
    frame["total"] = float("nan")
    for signature, index in frame.groupby("rubric").groups.items():
        rubric = rubrics[str(signature)]
        # as floats: a column that is all None (P only, R not yet) is of object dtype, and
        # pandas 3 refuses to put its object result into the float column
        part = frame.loc[index, [*SCORE_KEYS, *PENALTY_KEYS]].astype("float64")
        weighted = sum(d.weight * part[d.key] for d in rubric.dimensions)
        frame.loc[index, "total"] = weighted - part[list(PENALTY_KEYS)].sum(axis=1)
    return frame


def ratings_frame(engine: Engine, *, flagged: bool = True) -> pd.DataFrame:
    """Every rating, one row each, with caption, image and annotator; ordered by caption.
    Without `flagged`, none of an image flagged as broken (`storage.rating.image_flags`)."""
    import pandas as pd

    rating, caption, image, annotator = (
        Rating.__table__, Caption.__table__, Image.__table__, Annotator.__table__
    )
    query = (
        select(
            rating.c.id.label("rating_id"), caption.c.id.label("caption_id"),
            image.c.key.label("image_id"), caption.c.system, caption.c.text.label("caption"),
            annotator.c.name.label("annotator"), rating.c.stage,
            *[rating.c[name] for name in RATING_VALUE_COLUMNS],
        )
        .join(caption, rating.c.caption_id == caption.c.id)
        .join(image, caption.c.image_id == image.c.id)
        .join(annotator, rating.c.annotator_id == annotator.c.id)
        .order_by(caption.c.import_order, rating.c.stage, rating.c.id)
    )
    if not flagged:
        query = query.where(not_flagged(image.c.id))
    with engine.connect() as connection:
        frame = pd.read_sql(query, connection)
    return with_totals(frame, engine)


def final_scores(engine: Engine, *, flagged: bool = True) -> pd.DataFrame:
    """One row per caption with its final complete rating: a resolution (final stage) over
    stage 2 over stage 1; within a stage, the first rating made. A native speaker's fluency
    check, where there is one, sets the fluency penalty. `final_source` says which.
    Without `flagged`, none of an image flagged as broken (the report leaves them out)."""
    import pandas as pd

    from storage.rating.project_queues import disagreements

    frame = ratings_frame(engine, flagged=flagged)
    complete = complete_rows(frame)
    check, resolution, annotator = (FluencyCheck.__table__, Resolution.__table__,
                                    Annotator.__table__)
    with engine.connect() as connection:
        checks = pd.read_sql(select(check.c.caption_id, check.c.fluency, check.c.fluency_type),
                             connection)
        resolvers = dict(connection.execute(
            select(resolution.c.caption_id, annotator.c.name)
            .join(annotator, resolution.c.resolver_id == annotator.c.id)).all())
    resolved = set(resolvers)
    # A final-stage rating counts when it is the resolver's; on a disagreement still open,
    # someone's unfinished resolution does not replace the stage-2 values.
    unresolved = {c for d in disagreements(engine) for c in d.caption_ids}
    final_stage = complete["stage"] == int(Stage.FINAL)
    by_resolver = pd.Series([resolvers.get(caption_id, name) == name for caption_id, name in
                             zip(complete["caption_id"], complete["annotator"], strict=True)],
                            index=complete.index, dtype=bool)
    counts = ~final_stage | (by_resolver & ~complete["caption_id"].isin(unresolved))
    ordered = complete[counts].sort_values(["caption_id", "stage", "rating_id"],
                                           ascending=[True, False, True])
    place = {caption_id: n for n, caption_id in enumerate(complete["caption_id"].unique())}
    final = ordered.drop_duplicates("caption_id").sort_values(
        "caption_id", key=lambda ids: ids.map(place)).reset_index(drop=True)  # import order
    final["final_source"] = final["stage"].map(
        {1: "stage 1", 2: "stage 2", 3: "final"}).where(
        ~((final["stage"] == 3) & final["caption_id"].isin(resolved)), "resolution")
    if len(checks):
        final = final.merge(checks, on="caption_id", how="left", suffixes=("", "_checked"))
        has_check = final["fluency_checked"].notna()
        final.loc[has_check, "fluency"] = final.loc[has_check, "fluency_checked"]
        final.loc[has_check, "fluency_type"] = final.loc[has_check, "fluency_type_checked"]
        final.loc[has_check, "final_source"] += " + fluency round"
        final = with_totals(final.drop(columns=["fluency_checked", "fluency_type_checked"]),
                            engine)
    return final


def captions_per_image(engine: Engine) -> dict[str, int]:
    """image key (the frames' `image_id`) -> how many captions it has: what Table 3
    compares a rated caption set against, so that a partly rated image counts for no
    system."""
    caption, image = Caption.__table__, Image.__table__
    with engine.connect() as connection:
        return dict(connection.execute(
            select(image.c.key, func.count()).join(caption, caption.c.image_id == image.c.id)
            .group_by(image.c.key)).all())


def image_of_caption(engine: Engine, caption_id: int) -> tuple[str, str | None]:
    """The key and file path of the image a caption describes."""
    image, caption = Image.__table__, Caption.__table__
    with engine.connect() as connection:
        key, path = connection.execute(
            select(image.c.key, image.c.path).join(caption, caption.c.image_id == image.c.id)
            .where(caption.c.id == caption_id)).one()
    return key, path


def references_by_image(engine: Engine) -> dict[str, list[str]]:
    ref, image = ImageReference.__table__, Image.__table__
    query = (
        select(image.c.key, ref.c.text)
        .join(image, ref.c.image_id == image.c.id)
        .order_by(ref.c.image_id, ref.c.position)
    )
    result: dict[str, list[str]] = {}
    with engine.connect() as connection:
        for key, text in connection.execute(query):
            result.setdefault(key, []).append(text)
    return result


def project_status(engine: Engine) -> dict[str, object]:
    """Counts and progress: what `thumb status` prints."""
    image, caption, rating = Image.__table__, Caption.__table__, Rating.__table__
    with engine.connect() as connection:
        count = lambda table: connection.execute(select(func.count()).select_from(table)).scalar()  # noqa: E731
        systems = dict(
            connection.execute(
                select(caption.c.system, func.count()).group_by(caption.c.system)
                .order_by(caption.c.system)
            ).all()
        )
        complete = complete_clause(rating)
        per_stage = {
            Stage(stage).label: (total, done)
            for stage, total, done in connection.execute(
                select(rating.c.stage, func.count(),
                       func.count(rating.c.id).filter(complete))
                .group_by(rating.c.stage).order_by(rating.c.stage)
            )
        }
        rated_captions = connection.execute(
            select(func.count(func.distinct(rating.c.caption_id))).where(complete)
        ).scalar()
        captions_per_image = (
            select(caption.c.image_id, func.count().label("n")).group_by(caption.c.image_id)
        ).subquery()
        rated_per_image = (
            select(caption.c.image_id, func.count(func.distinct(caption.c.id)).label("n"))
            .join(rating, rating.c.caption_id == caption.c.id)
            .where(complete)
            .group_by(caption.c.image_id)
        ).subquery()
        complete_images = connection.execute(
            select(func.count())
            .select_from(captions_per_image)
            .join(rated_per_image, captions_per_image.c.image_id == rated_per_image.c.image_id)
            .where(captions_per_image.c.n == rated_per_image.c.n)
        ).scalar()
        from storage.rating.image_flags import broken_images
        from storage.rating.project_queues import disagreements, fluency_queue

        return {
            "unresolved": len(disagreements(engine)),
            "fluency_pending": len(fluency_queue(engine)),
            "double_images": connection.execute(
                select(func.count()).where(image.c.double_rating.is_(True))).scalar(),
            "images": count(image),
            "captions": count(caption),
            "references": count(ImageReference.__table__),
            "annotators": count(Annotator.__table__),
            "systems": systems,
            "ratings_per_stage": per_stage,
            "rated_captions": rated_captions,
            "complete_images": complete_images,
            "broken_images": broken_images(engine),
        }


def rating_pairs(engine: Engine, dimensions: Sequence[str]) -> pd.DataFrame:
    """One row per caption and compared pair of ratings: kind (`blind`: the two blind
    stage-1 ratings of a double-rated image; `stage1-vs-stage2`: the reviewed stage-1
    rating and its review), the two annotators (`annotator_a`, `annotator_b`: two columns,
    since a name may hold any separator), image, and for each dimension the two values
    (`<dimension>_a`, `<dimension>_b`). Images flagged as broken are left out, as in the
    report. Built column by column: a project has a pair per caption."""
    import numpy as np
    import pandas as pd

    ratings = complete_rows(ratings_frame(engine, flagged=False))
    ratings["fluency_error"] = (ratings["fluency"] > 0).astype(float)
    caption, image = Caption.__table__, Image.__table__
    with engine.connect() as connection:
        primary = {c: r["id"] for c, r in primary_first_ratings(connection,
                                                                reviewed=True).items()}
        double = set(connection.execute(
            select(caption.c.id).join(image, caption.c.image_id == image.c.id)
            .where(image.c.double_rating.is_(True))).scalars())
    # blind: a double-rated caption's first two complete stage-1 ratings (the frame is in
    # caption order, then by rating id: the order they were made)
    first = ratings[(ratings["stage"] == 1) & ratings["caption_id"].isin(double)]
    place = first.groupby("caption_id").cumcount()
    earlier, later = first[place == 0], first[place == 1]
    earlier = earlier[earlier["caption_id"].isin(later["caption_id"])]
    both, at = pd.concat([earlier, later]), np.arange(len(later))
    swap = _swapped_to_pair_order(earlier["annotator"].to_numpy(),
                                  later["annotator"].to_numpy())
    blind_a = both.iloc[np.where(swap, at + len(at), at)]
    blind_b = both.iloc[np.where(swap, at, at + len(at))]
    # stage 1 vs stage 2: each caption's first complete review and the rating it reviewed
    second = ratings[ratings["stage"] == 2].drop_duplicates("caption_id")
    second = second[second["caption_id"].isin(primary)]
    reviewed = ratings.set_index("rating_id").loc[second["caption_id"].map(primary)]
    pairs = [_pair_columns("blind", blind_a, blind_b, dimensions),
             _pair_columns("stage1-vs-stage2", reviewed, second, dimensions)]
    if not any(len(part) for part in pairs):
        return pd.DataFrame()
    return pd.concat([part for part in pairs if len(part)], ignore_index=True)


def _swapped_to_pair_order(earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
    """Which blind pairs of ratings to swap so that each pair of annotators comes in one
    order throughout: the order of their first shared caption's two ratings. Cohen's kappa
    needs a first and a second rater, which blind raters are not; a pair's own kappa is
    the same either way round, but the kappa pooled over pairs is not, and an order by
    name moved it when an annotator was renamed."""
    import numpy as np

    order: dict[frozenset[str], str] = {}  # a pair -> its first rater
    for a, b in zip(earlier, later, strict=True):
        order.setdefault(frozenset((a, b)), a)
    return np.array([order[frozenset((a, b))] != a
                     for a, b in zip(earlier, later, strict=True)], dtype=bool)


def _pair_columns(kind: str, a: pd.DataFrame, b: pd.DataFrame, dimensions: Sequence[str]
                  ) -> pd.DataFrame:
    """`rating_pairs`' rows of one kind from two frames of ratings, paired row by row."""
    import pandas as pd

    columns: dict[str, object] = {
        "kind": kind, "caption_id": a["caption_id"].to_numpy(),
        "image": a["image_id"].to_numpy(), "annotator_a": a["annotator"].to_numpy(),
        "annotator_b": b["annotator"].to_numpy()}
    for dimension in dimensions:
        columns[f"{dimension}_a"] = a[dimension].to_numpy(dtype=float)
        columns[f"{dimension}_b"] = b[dimension].to_numpy(dtype=float)
    return pd.DataFrame(columns)


def contributing_annotators(engine: Engine) -> list[str]:
    """Everyone whose work is in the scores: raters at any stage and fluency checkers."""
    annotator = Annotator.__table__
    with engine.connect() as connection:
        return sorted(connection.execute(
            select(annotator.c.name).where(
                annotator.c.id.in_(select(Rating.__table__.c.annotator_id))
                | annotator.c.id.in_(select(FluencyCheck.__table__.c.checker_id)))
        ).scalars())


def fluency_checkers(engine: Engine) -> set[str]:
    """Native speakers whose fluency-round verdicts set final fluency penalties."""
    annotator, check = Annotator.__table__, FluencyCheck.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(annotator.c.name).join(check, check.c.checker_id == annotator.c.id)
        ).scalars())
