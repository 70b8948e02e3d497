"""The public THUMB 1.0 release format: import its final scores, export them back."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sqlalchemy import Engine, select

from rubrics import THUMB_1_0
from storage.errors import Problems
from storage.import_files import Record, read_records
from storage.import_rows import CaptionRow, RowError, image_file, rating
from storage.importer import ImportSummary, import_caption_rows
from storage.models import Caption, Image
from storage.rating_frames import final_scores, references_by_image
from storage.untrusted import KEY, NUMBER, TEXT, TEXTS

THUMB_ANNOTATOR = "thumb-1.0"
THUMB_FIELDS = ("sys", "seg_id", "set_id", "hyp", "image", "p", "r", "fl", "inc", "con",
                "human_score")
RELEASE_SCHEMA = {"sys": TEXT, "seg_id": KEY, "set_id": KEY, "hyp": TEXT, "image": TEXT,
                  **dict.fromkeys(["p", "r", "fl", "inc", "con", "human_score"], NUMBER)}
REFERENCES_SCHEMA = {"seg_id": KEY, "set_id": KEY, "refs": TEXTS}


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


def _caption_row(line: int, record: Record, images_dir: Path | None,
                 allow_outside_images: bool) -> CaptionRow:
    missing = [key for key in THUMB_FIELDS if record.get(key) is None]
    if missing:
        raise RowError(f"missing key(s): {', '.join(missing)}")
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


def _set_id(value: object) -> int:
    """The release's set_id: a whole number (JSON gives an int; a digit string is taken)."""
    if isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()
                                  and len(value) <= 9):
        return int(value)
    raise RowError(f"set_id must be a whole number, not {value!r}")


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
    set_ids: dict[str, int] = {}
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
                               set_ids=set_ids)


def export_thumb(
    engine: Engine, out: str | Path, references_out: str | Path | None = None
) -> int:
    """Write final scores in the release format (line order = import order); return lines.
    Penalties are written as negative numbers and 0 as -0.0, as the release does."""
    scores = final_scores(engine)
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
        record = {
            "SYS": row.system,
            "seg_id": image_row.key,
            "set_id": image_row.set_id,
            "hyp": row.caption,
            "image": Path(image_row.path).name if image_row.path else None,
            "P": float(row.precision),
            "R": float(row.recall),
            "Fl": -float(row.fluency),
            "Inc": -float(row.inclusive),
            "Con": -float(row.conciseness),
            "human_score": float(row.total),
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    Path(out).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if references_out is not None:
        seen: dict[str, int | None] = {}
        for image_row in images.values():
            seen.setdefault(image_row.key, image_row.set_id)
        references = references_by_image(engine)
        Path(references_out).write_text(
            "".join(
                json.dumps({"seg_id": key, "set_id": seen[key], "refs": refs},
                           ensure_ascii=False) + "\n"
                for key, refs in references.items()
            ),
            encoding="utf-8",
        )
    return len(lines)
