"""The public THUMB 1.0 release format: import its final scores, export them back."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, select

from rubrics import THUMB_1_0
from storage.errors import Problems
from storage.imports.import_files import Record, read_records
from storage.imports.import_rows import CaptionRow, RowError, image_file, rating
from storage.imports.importer import ImportSummary, import_caption_rows
from storage.imports.untrusted import KEY, NUMBER, TEXT, TEXTS
from storage.models import Caption, Image
from storage.rating.rating_frames import final_scores, references_by_image
from storage.rubric_registry import project_rubric, stored_rubrics

if TYPE_CHECKING:
    import pandas as pd

THUMB_ANNOTATOR = "thumb-1.0"
# A line's keys as the release spells them, in its order (the reader takes any case).
RELEASE_KEYS = ("SYS", "seg_id", "set_id", "hyp", "image", "P", "R", "Fl", "Inc", "Con",
                "human_score")
THUMB_FIELDS = tuple(key.lower() for key in RELEASE_KEYS)
RELEASE_SPELLING = dict(zip(THUMB_FIELDS, RELEASE_KEYS, strict=True))
# set_id is an image's index in the Karpathy test split: null for an image outside it, as
# a thumb-tui project's own images are. Every other key needs a value.
NULLABLE_FIELDS = frozenset({"set_id"})
RELEASE_SCHEMA = {"sys": TEXT, "seg_id": KEY, "set_id": KEY, "hyp": TEXT, "image": TEXT,
                  **dict.fromkeys(["p", "r", "fl", "inc", "con", "human_score"], NUMBER)}
REFERENCES_SCHEMA = {"seg_id": KEY, "set_id": KEY, "refs": TEXTS}


class NotThumbRubric(ValueError):
    """The thumb-jsonl export was asked of scores that are not on THUMB 1.0's rubric."""


def _read_references(path: Path) -> dict[str, tuple[str, ...]]:
    problems = Problems(path)
    references: dict[str, tuple[str, ...]] = {}
    first_line: dict[str, int] = {}
    for line, record in read_records(path, fmt="jsonl", schema=REFERENCES_SCHEMA,
                                     problems=problems):
        seg_id, refs = record.get("seg_id"), record.get("refs")
        if seg_id is None:
            problems.add(line, "missing key 'seg_id'")
        elif not isinstance(refs, list) or not refs or not all(
            isinstance(r, str) and r.strip() for r in refs
        ):
            problems.add(line, "'refs' must be a non-empty list of captions")
        elif str(seg_id) in first_line:
            problems.add(line, f"duplicate seg_id {seg_id!r} (also line {first_line[str(seg_id)]})")
        else:
            first_line[str(seg_id)] = line
            references[str(seg_id)] = tuple(r.strip() for r in refs)
    problems.raise_if_any()
    return references


def _absent_keys(record: Record) -> str | None:
    """What the line lacks, in the release's spelling: keys that are not there at all, and
    keys whose value is null (or an empty text) where the release always has one."""
    missing = [RELEASE_SPELLING[key] for key in THUMB_FIELDS if key not in record]
    empty = [RELEASE_SPELLING[key] for key in THUMB_FIELDS
             if key in record and record[key] is None and key not in NULLABLE_FIELDS]
    found = ([f"missing key(s): {', '.join(missing)}"] if missing else []) + (
        [f"null or empty value(s): {', '.join(empty)}"] if empty else [])
    return "; ".join(found) or None


def _caption_row(line: int, record: Record, images_dir: Path | None,
                 allow_outside_images: bool) -> CaptionRow:
    absent = _absent_keys(record)
    if absent is not None:
        raise RowError(absent)
    image_name = str(record["image"])
    image_path = image_name
    if images_dir is not None:
        image_path = image_file(images_dir, image_name, allow_outside_images)
    scores = rating(
        {
            "annotator": THUMB_ANNOTATOR, "stage": "final", "precision": record["p"],
            "recall": record["r"], "fluency": record["fl"], "conciseness": record["con"],
            "inclusive": record["inc"],
        },
        THUMB_1_0,
    )
    assert scores is not None
    total = THUMB_1_0.total(scores.precision, scores.recall, fluency=scores.fluency,
                            conciseness=scores.conciseness, inclusive=scores.inclusive)
    stated = record["human_score"]
    if not isinstance(stated, (int, float)) or abs(total - stated) > 1e-6:
        raise RowError(f"human_score {stated!r} is not (P + R) / 2 minus penalties ({total:g})")
    return CaptionRow(
        line=line,
        image_key=str(record["seg_id"]),
        image_path=image_path,
        system=str(record["sys"]),
        caption=str(record["hyp"]),
        caption_id=None,
        references=None,
        rating=scores,
    )


def _set_id(value: object) -> int | None:
    """The release's set_id: a whole number (JSON gives an int; a digit string is taken),
    or None for null (an image outside the Karpathy test split)."""
    if value is None:
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()
                                  and len(value) <= 9):
        return int(value)
    raise RowError(f"set_id must be a whole number or null, not {value!r}")


def import_thumb(
    engine: Engine,
    path: str | Path,
    references_path: str | Path,
    *,
    actor: str,
    images_dir: str | Path | None = None,
    allow_outside_images: bool = False,
) -> ImportSummary:
    """Import the THUMB 1.0 release: captions, references, and its final scores as the
    ratings of annotator `thumb-1.0` at the final stage. All or nothing; image names must
    stay inside `images_dir` unless `allow_outside_images`."""
    path, references_path = Path(path), Path(references_path)
    references = _read_references(references_path)
    problems = Problems(path)
    rows: list[CaptionRow] = []
    set_ids: dict[str, int | None] = {}
    for line, record in read_records(path, fmt="jsonl", schema=RELEASE_SCHEMA,
                                     problems=problems):
        try:
            row = _caption_row(line, record, Path(images_dir) if images_dir else None,
                               allow_outside_images)
            set_id = _set_id(record["set_id"])
        except RowError as exc:
            problems.add(line, str(exc))
            continue
        if row.image_key not in references:
            problems.add(line, f"seg_id {row.image_key!r} has no references in {references_path}")
            continue
        if set_ids.setdefault(row.image_key, set_id) != set_id:
            problems.add(line, f"seg_id {row.image_key!r} has another set_id on an earlier line")
        rows.append(replace(row, references=references[row.image_key]))
    problems.raise_if_any()
    return import_caption_rows(engine, rows, problems, actor=actor, rubric=THUMB_1_0,
                               set_ids={key: value for key, value in set_ids.items()
                                        if value is not None})


def _check_thumb_rubric(engine: Engine, scores: pd.DataFrame) -> None:
    """Refuse scores that are not on THUMB 1.0: the release's human_score is (P + R) / 2
    minus penalties on its scales, which another rubric's numbers would only pretend to
    be. Both the project's rubric and every exported rating's must be THUMB 1.0's."""
    stored = stored_rubrics(engine)
    others = sorted(signature for signature in set(scores["rubric"])
                    if stored[signature] != THUMB_1_0)
    project = project_rubric(engine)
    if project == THUMB_1_0 and not others:
        return
    why = []
    if project != THUMB_1_0:
        why.append(f"this project's rubric is {project.signature} ({project.title})")
    if others:
        count = int(scores["rubric"].isin(others).sum())
        why.append(f"{count} final score(s) are on rubric {', '.join(others)}")
    raise NotThumbRubric(
        "--format thumb-jsonl writes the THUMB 1.0 release, whose human_score is (P + R) / 2 "
        f"minus penalties on THUMB 1.0's scales, but {' and '.join(why)}. Export it with "
        "--format csv, jsonl or parquet (they keep each rating's rubric)")


def _release_line(record: dict[str, object]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def export_thumb(
    engine: Engine, out: str | Path, references_out: str | Path | None = None
) -> int:
    """Write final scores in the release format (line order = import order); return lines.
    Penalties are written as negative numbers and 0 as -0.0, every number without binary
    noise (3.5, 2.6), and set_id null for an image outside the Karpathy test split, as the
    release and `import_thumb` read them. Raises NotThumbRubric, writing nothing, for a
    project or scores not on THUMB 1.0."""
    from storage.exporter import without_float_noise  # with pandas: only for an export

    scores = final_scores(engine)
    _check_thumb_rubric(engine, scores)
    image, caption = Image.__table__, Caption.__table__
    with engine.connect() as connection:
        images = {
            row.caption_id: row
            for row in connection.execute(
                select(caption.c.id.label("caption_id"), image.c.key, image.c.set_id,
                       image.c.path).join(image, caption.c.image_id == image.c.id)
            )
        }
    lines = []
    for row in scores.itertuples(index=False):
        image_row = images[row.caption_id]
        values = (row.system, image_row.key, image_row.set_id, row.caption,
                  Path(image_row.path).name if image_row.path else None,
                  *(without_float_noise(float(value)) for value in (
                      row.precision, row.recall, -row.fluency, -row.inclusive,
                      -row.conciseness, row.total)))
        lines.append(_release_line(dict(zip(RELEASE_KEYS, values, strict=True))))
    Path(out).write_text("".join(lines), encoding="utf-8")
    if references_out is not None:
        seen: dict[str, int | None] = {}
        for image_row in images.values():
            seen.setdefault(image_row.key, image_row.set_id)
        references = references_by_image(engine)
        Path(references_out).write_text(
            "".join(_release_line({"seg_id": key, "set_id": seen[key], "refs": refs})
                    for key, refs in references.items()),
            encoding="utf-8",
        )
    return len(lines)
