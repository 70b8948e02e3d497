"""Export captions with their references and ratings to CSV, JSONL or Parquet."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, Select, and_, func, not_, select

from rubrics import PENALTY_KEYS, Rubric
from rubrics.escape import for_spreadsheet
from storage.models import (
    RATING_VALUE_FIELDS,
    Annotator,
    Assignment,
    Caption,
    FluencyCheck,
    Image,
    ImageFlag,
    Rating,
    Resolution,
    Stage,
)
from storage.rating.protocol import complete_clause, complete_rows
from storage.rating.rating_frames import ratings_frame, references_by_image
from storage.rubric_registry import project_rubric, stored_rubrics

TABULAR_FORMATS = ("csv", "jsonl", "parquet")
RATING_COLUMNS = [
    "annotator", "stage", *RATING_VALUE_FIELDS, "note", "seconds", "total", "rubric",
    "created_at", "updated_at", "native_english", "resolution_reasons", "resolution_note",
    "resolved_at",
]
FLUENCY_ROUND_COLUMNS = ["fluency_round", "fluency_round_type", "fluency_round_by",
                         "fluency_round_at"]
# Columns whose cells are lists of objects: JSON arrays in JSON lines, their JSON text in a
# CSV or Parquet cell (the import reads both).
OBJECT_COLUMNS = ("image_flags",)
# Penalty amounts are kept to 6 decimal places (a sum of errors is rounded so); a total's
# digits beyond them are binary noise: 0.7 * 3 + 0.3 * 3 is 2.9999999999999996.
STORED_DECIMALS = 6


def without_float_noise(value: float) -> float:
    """A score as written in a file: 3.0 and 2.6, never 2.9999999999999996 (`round` keeps
    the sign of -0.0, which the THUMB release writes for no penalty)."""
    return round(value, STORED_DECIMALS)


def image_path_in_export(path: str | None, folder: Path) -> str | None:
    """An image's stored path as an export in `folder` writes it: relative to that folder,
    as import resolves it (a stored relative path, which import never made, as it is)."""
    if path is None or not os.path.isabs(path):
        return path
    return os.path.relpath(path, folder)


@dataclass(frozen=True)
class ImagesOutside:
    """Image paths that an export names outside its own folder (through `..`), which
    `thumb import` refuses unless --allow-outside-images: the paths as written, and the
    deepest folder that holds every image of the project, where an export would need
    no such option."""

    paths: list[str]
    holding_folder: str


def images_outside(engine: Engine, out: Path) -> ImagesOutside | None:
    """The image paths of an export written at `out` that lead out of its folder; None
    when every one stays inside."""
    folder = out.resolve().parent
    image = Image.__table__
    with engine.connect() as connection:
        stored = [path for path in connection.execute(
            select(image.c.path).where(image.c.path.is_not(None)).order_by(image.c.id)
        ).scalars() if os.path.isabs(path)]
    written = [image_path_in_export(path, folder) for path in stored]
    outside = [path for path in written if path.split(os.sep, 1)[0] == os.pardir]
    if not outside:
        return None
    return ImagesOutside(outside, os.path.commonpath([os.path.dirname(p) for p in stored]))


def _unused_columns(engine: Engine, signatures: set[str]) -> list[str]:
    """Columns of penalties that none of the exported ratings' rubrics has (the project's
    rubric when there are no ratings): a rubric's file has only its own fields."""
    stored = stored_rubrics(engine)
    rubrics = [stored[s] for s in signatures] or [project_rubric(engine)]
    unused = [key for key in PENALTY_KEYS if not any(r.has_penalty(key) for r in rubrics)]
    fluency_round = FLUENCY_ROUND_COLUMNS if "fluency" in unused else []
    return [*(f for key in unused for f in (key, f"{key}_type")), *fluency_round]


def export_frame(engine: Engine, out: Path, keep_caption_pk: bool = False) -> pd.DataFrame:
    """One row per rating (a caption without ratings gets one row with empty rating fields),
    in the import schema; image paths are written relative to the output file's folder."""
    caption, image, check = Caption.__table__, Image.__table__, FluencyCheck.__table__
    checker = Annotator.__table__.alias("checker")
    query = (
        select(
            caption.c.id.label("caption_pk"), image.c.path.label("image"),
            image.c.key.label("image_id"), caption.c.system, caption.c.text.label("caption"),
            caption.c.external_id.label("caption_id"), image.c.double_rating,
            check.c.fluency.label("fluency_round"),
            check.c.fluency_type.label("fluency_round_type"),
            checker.c.name.label("fluency_round_by"),
            check.c.created_at.label("fluency_round_at"),
        )
        .join(image, caption.c.image_id == image.c.id)
        .outerjoin(check, check.c.caption_id == caption.c.id)
        .outerjoin(checker, check.c.checker_id == checker.c.id)
        .order_by(caption.c.import_order)
    )
    with engine.connect() as connection:
        captions = pd.read_sql(query, connection)
        workflow = pd.read_sql(_workflow_query(), connection)
    captions["double_rating"] = captions["double_rating"].astype(bool)
    captions["fluency_round_at"] = iso_times(captions["fluency_round_at"])
    flags = _image_flags(engine)
    captions.insert(captions.columns.get_loc("double_rating") + 1, "image_flags",
                    captions["image_id"].map(lambda key: flags.get(key)))
    folder = out.resolve().parent
    captions["image"] = captions["image"].map(lambda path: image_path_in_export(path, folder))
    references = references_by_image(engine)
    captions["references"] = captions["image_id"].map(lambda key: references.get(key, []))
    ratings = ratings_frame(engine).rename(columns={"caption_id": "caption_pk"})
    ratings = complete_rows(ratings)  # see in_progress_ratings
    ratings["total"] = ratings["total"].map(without_float_noise)
    ratings["stage"] = ratings["stage"].map(lambda s: Stage(s).label)
    ratings = ratings.merge(image_seconds(engine), on=["image_id", "annotator", "stage"],
                            how="left").merge(workflow, on="rating_id", how="left")
    for column in ("created_at", "updated_at", "resolved_at"):
        ratings[column] = iso_times(ratings[column])
    frame = captions.merge(
        ratings[["caption_pk", *RATING_COLUMNS, "image_seconds"]], on="caption_pk",
        how="left", sort=False,
    )
    frame["native_english"] = pd.Series(
        [None if pd.isna(v) else bool(v) for v in frame["native_english"]], dtype=object,
        index=frame.index)
    unused = _unused_columns(engine, set(ratings["rubric"].dropna()))
    frame = frame.drop(columns=unused)
    return frame if keep_caption_pk else frame.drop(columns="caption_pk")


def iso_times(times: pd.Series) -> pd.Series:
    """Stored times as ISO 8601 text with their time zone, the naive ones SQLite returns
    taken as UTC (as they were written, like `_image_flags`); None where a row has no time
    (text even then, else NaT)."""
    return pd.Series([t.isoformat() if pd.notna(t) else None
                      for t in pd.to_datetime(times, utc=True)],
                     index=times.index, dtype=object)


def _image_flags(engine: Engine) -> dict[str, list[dict[str, str]]]:
    """image key -> its broken-image flags, by annotator, as `image_flags` cells hold them."""
    flag, image, annotator = ImageFlag.__table__, Image.__table__, Annotator.__table__
    flags: dict[str, list[dict[str, str]]] = {}
    with engine.connect() as connection:
        for key, name, reason, flagged_at in connection.execute(
                select(image.c.key, annotator.c.name, flag.c.reason, flag.c.created_at)
                .join(image, flag.c.image_id == image.c.id)
                .join(annotator, flag.c.annotator_id == annotator.c.id)
                .order_by(image.c.key, annotator.c.name)):
            when = flagged_at if flagged_at.tzinfo else flagged_at.replace(tzinfo=UTC)
            flags.setdefault(key, []).append(
                {"annotator": name, "reason": reason, "flagged_at": when.isoformat()})
    return flags


def _workflow_query() -> Select:
    """Per rating: the annotator's native-speaker flag and, on a resolver's final-stage
    rating, the resolution's reasons, note and time."""
    rating, annotator, resolution = Rating.__table__, Annotator.__table__, Resolution.__table__
    return (
        select(rating.c.id.label("rating_id"), annotator.c.native_english,
               resolution.c.reasons.label("resolution_reasons"),
               resolution.c.note.label("resolution_note"),
               resolution.c.created_at.label("resolved_at"))
        .join(annotator, rating.c.annotator_id == annotator.c.id)
        .outerjoin(resolution, and_(resolution.c.caption_id == rating.c.caption_id,
                                    resolution.c.resolver_id == rating.c.annotator_id,
                                    rating.c.stage == int(Stage.FINAL)))
    )


def in_progress_ratings(engine: Engine) -> int:
    """Ratings whose P or R is not set yet. Exports leave them out: an import requires both,
    so that a file with a forgotten score is refused rather than read as work in progress."""
    rating = Rating.__table__
    with engine.connect() as connection:
        return int(connection.execute(
            select(func.count()).where(not_(complete_clause(rating)))
        ).scalar())


def exported_rubrics(engine: Engine) -> list[Rubric]:
    """The rubrics of the ratings an export writes (the complete ones). `thumb import`
    reads a file's ratings on the rubric it is given (the importing project's, THUMB 1.0
    in a new database), not on the file's `rubric` column."""
    rating = Rating.__table__
    with engine.connect() as connection:
        signatures = connection.execute(
            select(rating.c.rubric).where(complete_clause(rating)).distinct()).scalars()
        stored = stored_rubrics(connection)
        return [stored[signature] for signature in sorted(signatures)]


def image_seconds(engine: Engine) -> pd.DataFrame:
    """Time each annotator spent on each image at each stage (recorded by the app)."""
    assignment, image, annotator = (Assignment.__table__, Image.__table__,
                                    Annotator.__table__)
    query = (
        select(image.c.key.label("image_id"), annotator.c.name.label("annotator"),
               assignment.c.stage, assignment.c.seconds.label("image_seconds"))
        .join(image, assignment.c.image_id == image.c.id)
        .join(annotator, assignment.c.annotator_id == annotator.c.id)
    )
    with engine.connect() as connection:
        frame = pd.read_sql(query, connection)
    frame["stage"] = frame["stage"].map(lambda s: Stage(s).label)
    return frame


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell escaped for spreadsheets (`rubrics.escape.
    for_spreadsheet`: `=HYPERLINK(…)` is written `'=HYPERLINK(…)`); numbers, missing
    values and the column names stay as they are, so a penalty of -0.5 is still -0.5."""
    columns = [name for name in frame.columns
               if frame[name].dtype == object or pd.api.types.is_string_dtype(frame[name])]
    if not columns:
        return frame
    frame = frame.copy()
    for name in columns:
        frame[name] = frame[name].map(
            lambda value: for_spreadsheet(value) if isinstance(value, str) else value)
    return frame


def csv_text(frame: pd.DataFrame, *, raw: bool = False) -> str:
    """The frame as CSV text, text cells escaped for spreadsheets unless `raw`."""
    return (frame if raw else spreadsheet_safe(frame)).to_csv(index=False)


def write_frame(frame: pd.DataFrame, out: Path, fmt: str, *, raw: bool = False) -> None:
    """Write a tidy table as CSV, JSON lines (missing values as null) or Parquet; a
    `references` list column becomes `reference_1`, `reference_2`… in CSV. CSV text cells
    are escaped for spreadsheets unless `raw` (the CSV import undoes the escape)."""
    if fmt in ("csv", "parquet") and any(name in frame for name in OBJECT_COLUMNS):
        frame = frame.copy()
        for name in OBJECT_COLUMNS:
            if name in frame:
                frame[name] = frame[name].map(lambda cell: json.dumps(
                    cell, ensure_ascii=False) if isinstance(cell, list) else None)
    if fmt == "csv":
        if "references" in frame:
            width = int(frame["references"].map(len).max()) if len(frame) else 0
            frame = frame.copy()
            for index in range(width):
                frame[f"reference_{index + 1}"] = frame["references"].map(
                    lambda refs, i=index: refs[i] if i < len(refs) else None)
            frame = frame.drop(columns="references")
        (frame if raw else spreadsheet_safe(frame)).to_csv(out, index=False, encoding="utf-8")
    elif fmt == "jsonl":
        with out.open("w", encoding="utf-8") as handle:
            for record in frame.to_dict(orient="records"):
                clean = {k: (None if _missing(v) else v) for k, v in record.items()}
                handle.write(json.dumps(clean, ensure_ascii=False) + "\n")
    elif fmt == "parquet":
        frame.to_parquet(out, index=False)
    else:
        raise ValueError(f"unknown export format {fmt!r}; expected one of "
                         f"{', '.join(TABULAR_FORMATS)}")


def _missing(value: object) -> bool:
    return not isinstance(value, (list, str)) and pd.isna(value)


def export_ratings(engine: Engine, out: str | Path, fmt: str,
                   extra: pd.DataFrame | None = None, *, raw: bool = False) -> int:
    """Write the project in `fmt` (csv, jsonl, parquet); return the number of rows.
    `extra` adds columns per caption (indexed by caption id, e.g. metric scores); `raw`
    writes CSV text cells without the spreadsheet escape."""
    out = Path(out)
    frame = export_frame(engine, out, keep_caption_pk=extra is not None)
    if extra is not None:
        frame = frame.merge(extra, left_on="caption_pk", right_index=True, how="left").drop(
            columns="caption_pk")
    write_frame(frame, out, fmt, raw=raw)
    return len(frame)
