"""BISON items (Hu et al. 2019) in storage: import from the COCO-BISON annotation format or
our own CSV/JSONL, all or nothing, with `file:line` errors like every import."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, select

from storage.db.engine import run_write, write_transaction
from storage.errors import InputError, Problem, Problems
from storage.events import log_change
from storage.imports.images import ImageNotFound, ImagePathError, image_problem, resolve_image
from storage.imports.import_files import read_records, read_text
from storage.imports.import_rows import RowError, image_file
from storage.imports.untrusted import KEY, TEXT, JsonProblem, load_json, record_problems
from storage.models import (
    Annotator,
    BisonAnswer,
    BisonItem,
    BisonPrediction,
    Image,
    ImageReference,
    utcnow,
)

if TYPE_CHECKING:
    import pandas as pd

BISON_COLUMNS = {"bison_id", "caption", "image_a", "image_b", "true_image"}


@dataclass(frozen=True)
class ItemRow:
    line: int
    key: str
    query: str
    caption_key: str | None
    images: tuple[tuple[str, str | None], tuple[str, str | None]]  # (key, path) a and b
    true_key: str


_JSON_SPACE = " \t\r\n"
BISON_SCHEMA = {"bison_id": KEY, "caption": TEXT, "image_a": TEXT, "image_b": TEXT,
                "true_image": TEXT}
COCO_ITEM_SCHEMA = {"bison_id": KEY, "caption_id": KEY, "true_image_id": KEY}
COCO_CANDIDATE_SCHEMA = {"image_id": KEY, "image_filename": TEXT}
COCO_CAPTION_SCHEMA = {"id": KEY, "image_id": KEY, "caption": TEXT}


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_SPACE:
        position += 1
    return position


def top_level_list(path: Path, text: str, key: str) -> list[tuple[int, object]]:
    """The elements of the list under `key` in a file holding one JSON object, each with the
    line it starts on. The file is parsed as JSON (within the limits of untrusted input);
    the lines come from walking that object's members with the JSON decoder itself."""
    try:
        data = load_json(text)
    except JsonProblem as exc:
        raise InputError([Problem(path, exc.line, str(exc))]) from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise InputError([Problem(path, 1, f'expected a JSON object with a "{key}" list')])
    decoder, lines = json.JSONDecoder(), []
    position = _skip_space(text, 0) + 1  # past "{"
    while text[position := _skip_space(text, position)] != "}":
        name, position = decoder.raw_decode(text, position)
        position = _skip_space(text, _skip_space(text, position) + 1)  # past ":"
        if name == key:  # the last member of that name is the one JSON keeps
            lines, position = [], position + 1  # past "["
            while text[position := _skip_space(text, position)] != "]":
                lines.append(text.count("\n", 0, position) + 1)
                position = _skip_space(text, decoder.raw_decode(text, position)[1])
                position += text[position] == ","
            position += 1
        else:
            position = decoder.raw_decode(text, position)[1]
        position = _skip_space(text, position)
        position += text[position] == ","
    return list(zip(lines, data[key], strict=True))


def _object_problems(value: object, schema: dict[str, str], required: tuple[str, ...]
                     ) -> list[str]:
    """What is wrong with one object of a COCO file: not an object, missing keys, types,
    characters and sizes."""
    if not isinstance(value, dict):
        return ["expected a JSON object"]
    return ([f"missing key {key!r}" for key in required if value.get(key) is None]
            + record_problems(value, schema))


def coco_caption_annotations(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, caption id, image id, text) of each annotation of a COCO captions file, in
    file order; every problem at once as `file:line: problem`."""
    problems = Problems(path)
    annotations = []
    for line, annotation in top_level_list(path, read_text(path), "annotations"):
        found = _object_problems(annotation, COCO_CAPTION_SCHEMA, ("id", "image_id", "caption"))
        if not found and not annotation["caption"].strip():
            found.append("empty caption")
        for problem in found:
            problems.add(line, problem)
        if not found:
            annotations.append((line, str(annotation["id"]), str(annotation["image_id"]),
                                annotation["caption"].strip()))
    problems.raise_if_any()
    return annotations


def coco_captions(path: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """caption id -> text and image id -> its captions, from a COCO captions file. An id
    given twice is refused (else the last text would silently become the query); repeats
    are told by id and annotation number, since a COCO file is often a single line."""
    problems = Problems(path)
    texts: dict[str, str] = {}
    first_seen: dict[str, tuple[int, int]] = {}  # caption id -> (annotation number, line)
    per_image: dict[str, list[str]] = {}
    annotations = coco_caption_annotations(path)
    for number, (line, caption_id, image_id, text) in enumerate(annotations, start=1):
        if caption_id in first_seen:
            first, first_line = first_seen[caption_id]
            problems.add(line, f"duplicate id {caption_id} (annotation {number}; annotation "
                               f"{first}, line {first_line}, has it already)")
            continue
        first_seen[caption_id] = number, line
        texts[caption_id] = text
        per_image.setdefault(image_id, []).append(text)
    problems.raise_if_any()
    return texts, per_image


def read_coco_bison(path: Path, captions: Path, images_dir: Path | None, problems: Problems,
                    allow_outside_images: bool = False
                    ) -> tuple[list[ItemRow], dict[str, list[str]]]:
    """Items of a COCO-BISON file; every problem of an item is reported, at the line where
    the item starts."""
    texts, references = coco_captions(captions)
    rows = []
    for line, item in top_level_list(path, read_text(path), "data"):
        found = _object_problems(item, COCO_ITEM_SCHEMA, ("bison_id", "caption_id",
                                                          "image_candidates", "true_image_id"))
        if found and not isinstance(item, dict):
            problems.add(line, found[0])
            continue
        images = _coco_candidates(item.get("image_candidates"), images_dir, found,
                                  allow_outside_images)
        caption_key = str(item.get("caption_id"))
        if item.get("caption_id") is not None and caption_key not in texts:
            found.append(f"caption_id {caption_key} is not in {captions.name}")
        true_key = str(item.get("true_image_id"))
        if images and item.get("true_image_id") is not None and true_key not in (
                images[0][0], images[1][0]):
            found.append("true_image_id is not one of the candidates")
        for problem in found:
            problems.add(line, problem)
        if not found and images:
            rows.append(ItemRow(line, str(item["bison_id"]), texts[caption_key], caption_key,
                                (images[0], images[1]), true_key))
    return rows, references


def _coco_candidates(candidates: object, images_dir: Path | None, found: list[str],
                     allow_outside_images: bool) -> list[tuple[str, str]]:
    """(image key, path) of an item's two candidates; problems go into `found`."""
    if candidates is None:
        return []
    if not isinstance(candidates, list) or len(candidates) != 2:
        found.append("image_candidates must list exactly two images")
        return []
    images = []
    for candidate in candidates:
        wrong = _object_problems(candidate, COCO_CANDIDATE_SCHEMA, ("image_id",
                                                                    "image_filename"))
        if wrong:
            found += [f"image candidate: {problem}" for problem in wrong]
            return []
        key, name = str(candidate["image_id"]), candidate["image_filename"]
        image_path = name
        if images_dir is not None:
            try:
                image_path = image_file(images_dir, name, allow_outside_images)
            except RowError as exc:
                found.append(str(exc))
        images.append((key, image_path))
    return images


def _own_image(folder: Path, name: str, allow_outside_images: bool, found: list[str]
               ) -> str | None:
    """The checked file `name` names next to our BISON file, or None when there is no such
    file (then it is the key of an image in the database); problems go into `found`."""
    try:
        path = resolve_image(folder, name, allow_outside=allow_outside_images)
    except ImageNotFound:
        return None
    except ImagePathError as exc:
        found.append(str(exc))
        return None
    problem = image_problem(path)
    if problem is not None:
        found.append(f"image {name!r}: {problem}")
    return str(path)


def read_own_bison(path: Path, problems: Problems, allow_outside_images: bool = False
                   ) -> list[ItemRow]:
    """CSV/JSONL with bison_id, caption, image_a, image_b, true_image (image paths relative
    to the file, or keys of images already in the database)."""
    records = read_records(path, schema=BISON_SCHEMA, problems=problems)
    columns = set().union(*(record.keys() for _, record in records))
    missing = sorted(BISON_COLUMNS - columns)
    if missing and records:
        raise InputError([Problem(path, 1, f"missing column(s): {', '.join(missing)}")])
    rows = []
    for line, record in records:
        unknown = sorted(set(record) - BISON_COLUMNS)
        if unknown:
            problems.add(line, f"unknown column(s): {', '.join(unknown)}")
        absent = sorted(BISON_COLUMNS - set(record))
        if absent:
            problems.add(line, f"missing {', '.join(absent)}")
        values = {c: (str(record[c]).strip() if record.get(c) is not None else "")
                  for c in BISON_COLUMNS}
        empty = sorted(c for c, v in values.items() if not v and c in record)
        if empty:
            problems.add(line, f"empty {', '.join(empty)}")
        if unknown or absent or empty:
            continue
        if values["true_image"] not in (values["image_a"], values["image_b"]):
            problems.add(line, "true_image must be image_a or image_b")
            continue
        found: list[str] = []
        images = [(values[column], _own_image(path.parent, values[column],
                                              allow_outside_images, found))
                  for column in ("image_a", "image_b")]
        for problem in found:
            problems.add(line, problem)
        if not found:
            rows.append(ItemRow(line, values["bison_id"], values["caption"], None,
                                (images[0], images[1]), values["true_image"]))
    return rows


def import_bison(engine: Engine, path: str | Path, *, actor: str,
                 captions: str | Path | None = None, images_dir: str | Path | None = None,
                 allow_outside_images: bool = False) -> int:
    """Import BISON items (COCO-BISON JSON with `captions`, else our CSV/JSONL). All or
    nothing; returns the number of items added. Image files must lie inside their folder
    (`images_dir`, or our file's folder) unless `allow_outside_images`."""
    path = Path(path)
    problems = Problems(path)
    references: dict[str, list[str]] = {}
    if path.suffix.lower() == ".json":
        if captions is None:
            raise InputError([Problem(path, 0, "a COCO-BISON file needs --captions "
                                               "(the COCO captions file)")])
        rows, references = read_coco_bison(path, Path(captions),
                                           Path(images_dir) if images_dir else None, problems,
                                           allow_outside_images)
    else:
        rows = read_own_bison(path, problems, allow_outside_images)
    if not rows and not problems.items:  # `{"data": []}`: nothing to import is a problem
        raise InputError([Problem(path, 1, "no BISON items found")])
    with write_transaction(engine) as connection:
        image = Image.__table__
        known: dict[str, int] = {}
        by_path: dict[str, int] = {}
        for row in connection.execute(select(image.c.key, image.c.id, image.c.path)):
            known[row.key] = row.id
            if row.path:
                by_path[row.path] = row.id
        # an image given by a path that the database already has is that image
        for row in rows:
            for key, image_path in row.images:
                if key not in known and image_path in by_path:
                    known[key] = by_path[image_path]
        existing = set(connection.execute(select(BisonItem.__table__.c.key)).scalars())
        seen: dict[str, int] = {}
        for row in rows:
            if row.key in existing:
                problems.add(row.line, f"duplicate bison_id {row.key!r}: already imported")
            elif row.key in seen:
                problems.add(row.line, f"duplicate bison_id {row.key!r} (also line "
                                       f"{seen[row.key]})")
            seen.setdefault(row.key, row.line)
            if len({_image_identity(key, image_path, known)
                    for key, image_path in row.images}) == 1:
                problems.add(row.line, "the two candidate images are the same")
            if row.true_key not in (row.images[0][0], row.images[1][0]):
                problems.add(row.line, "true_image_id is not one of the candidates")
            for key, image_path in row.images:
                if key not in known and image_path is None:
                    problems.add(row.line, f"unknown image {key!r}: not a file next to "
                                           f"{path.name} nor an image in the database")
        problems.raise_if_any()
        added = _write(connection, rows, known, references)
        log_change(connection, actor=actor, action="import", table="bison_item",
                   new={str(path): {"items": added}})
    return added


def _image_identity(key: str, image_path: str | None, known: dict[str, int]) -> int | str:
    """What makes two candidates one image, however each is named: the database id of an
    image the database has (by key, or by the path of its file), else the file a new one
    is made from (two keys may name one file: `a.png` and `./a.png`)."""
    return known.get(key, image_path or key)


def _write(connection: Connection, rows: list[ItemRow], known: dict[str, int],
           references: dict[str, list[str]]) -> int:
    image, ref = Image.__table__, ImageReference.__table__
    for row in rows:
        for key, image_path in row.images:
            if key not in known:
                known[key] = connection.execute(
                    image.insert().values(key=key, path=image_path)).inserted_primary_key[0]
    with_refs = set(connection.execute(select(ref.c.image_id).distinct()).scalars())
    new_refs = [
        {"image_id": known[key], "position": position, "text": text}
        for key, texts in references.items() if key in known and known[key] not in with_refs
        for position, text in enumerate(texts)
    ]
    if new_refs:
        connection.execute(ref.insert(), new_refs)
    connection.execute(BisonItem.__table__.insert(), [
        {"key": row.key, "query": row.query, "caption_key": row.caption_key,
         "image_a_id": known[row.images[0][0]], "image_b_id": known[row.images[1][0]],
         "true_image_id": known[row.true_key]}
        for row in rows
    ])
    return len(rows)


@dataclass(frozen=True)
class BisonView:
    """An item as one annotator sees it: the query and the images in their stored order."""

    item_id: int
    key: str
    query: str
    left: tuple[int, str, str | None]  # image id, key, path
    right: tuple[int, str, str | None]
    answer: str | None


class BisonSession:
    """One annotator's BISON answers: left/right order randomised once per item and
    stored; every answer committed at once and logged; time per item recorded."""

    def __init__(self, engine: Engine, annotator: str, *,
                 coin: Callable[[], float] | None = None) -> None:
        from storage.rating.rating_sessions import register_annotator

        self.engine, self.annotator = engine, annotator
        register_annotator(engine, annotator, None)
        self._coin = coin or random.SystemRandom().random
        with engine.connect() as connection:
            self.annotator_id = connection.execute(
                select(Annotator.__table__.c.id).where(Annotator.__table__.c.name == annotator)
            ).scalar_one()
            self.item_ids = list(connection.execute(
                select(BisonItem.__table__.c.id).order_by(BisonItem.__table__.c.id)).scalars())

    def view(self, index: int) -> BisonView:
        item_table, answer, image = BisonItem.__table__, BisonAnswer.__table__, Image.__table__
        item_id = self.item_ids[index]

        def show(connection: Connection) -> BisonView:
            item = connection.execute(select(item_table).where(item_table.c.id == item_id)).one()
            row = connection.execute(select(answer).where(
                answer.c.item_id == item_id, answer.c.annotator_id == self.annotator_id)
            ).one_or_none()
            if row is None:
                left = item.image_a_id if self._coin() < 0.5 else item.image_b_id
                now = utcnow()
                connection.execute(answer.insert().values(
                    item_id=item_id, annotator_id=self.annotator_id, left_image_id=left,
                    answer=None, seconds=0.0, created_at=now, updated_at=now))
                chosen = None
            else:
                left, chosen = row.left_image_id, row.answer
            right = item.image_b_id if left == item.image_a_id else item.image_a_id
            images = {r.id: (r.id, r.key, r.path) for r in connection.execute(
                select(image.c.id, image.c.key, image.c.path).where(
                    image.c.id.in_([left, right])))}
            return BisonView(item_id, item.key, item.query, images[left], images[right], chosen)

        return run_write(self.engine, show)

    def answer(self, view: BisonView, choice: str, seconds: float) -> None:
        if choice not in ("left", "right", "both", "neither"):
            raise ValueError("answer must be left, right, both or neither")
        table = BisonAnswer.__table__

        def save(connection: Connection) -> None:
            row = connection.execute(select(table).where(
                table.c.item_id == view.item_id, table.c.annotator_id == self.annotator_id)
            ).one()
            connection.execute(table.update().where(table.c.id == row.id).values(
                answer=choice, seconds=row.seconds + max(seconds, 0.0), updated_at=utcnow()))
            log_change(connection, actor=self.annotator, action="update", table="bison_answer",
                       row_id=row.id, old={"answer": row.answer}, new={"answer": choice})

        run_write(self.engine, save)

    def flag_broken(self, view: BisonView, reasons: dict[int, str]) -> None:
        """Record that images of the item cannot be judged (image id -> reason)."""
        from storage.rating.image_flags import flag_image

        def flag(connection: Connection) -> None:
            for image_id, reason in reasons.items():
                flag_image(connection, image_id, self.annotator_id, self.annotator, reason)

        run_write(self.engine, flag)

    def answered(self) -> set[int]:
        """Ids of the items this annotator has answered, in any session."""
        table = BisonAnswer.__table__
        with self.engine.connect() as connection:
            return set(connection.execute(select(table.c.item_id).where(
                table.c.annotator_id == self.annotator_id, table.c.answer.is_not(None))
            ).scalars())

    def first_unanswered(self) -> int:
        done = self.answered()
        return next((i for i, item in enumerate(self.item_ids) if item not in done), 0)


def bison_items(engine: Engine) -> tuple[pd.DataFrame, dict[int, tuple[str | None, list[str]]]]:
    """All items (item_id, query, image_a, image_b, true_image, and for messages the
    item's `bison_id` and its images' keys: item_key, image_a_key, image_b_key), and image
    id -> (path, references): what a model or a caption-metric baseline chooses from."""
    import pandas as pd

    item, image, ref = BisonItem.__table__, Image.__table__, ImageReference.__table__
    image_a, image_b = image.alias("image_a"), image.alias("image_b")
    with engine.connect() as connection:
        items = pd.read_sql(select(item.c.id.label("item_id"), item.c.query,
                                   item.c.image_a_id.label("image_a"),
                                   item.c.image_b_id.label("image_b"),
                                   item.c.true_image_id.label("true_image"),
                                   item.c.key.label("item_key"),
                                   image_a.c.key.label("image_a_key"),
                                   image_b.c.key.label("image_b_key"))
                            .join(image_a, item.c.image_a_id == image_a.c.id)
                            .join(image_b, item.c.image_b_id == image_b.c.id)
                            .order_by(item.c.id), connection)
        images = {r.id: (r.path, []) for r in connection.execute(select(image.c.id,
                                                                        image.c.path))}
        for r in connection.execute(select(ref.c.image_id, ref.c.text)
                                    .order_by(ref.c.image_id, ref.c.position)):
            images[r.image_id][1].append(r.text)
    return items, images


def has_bison_items(engine: Engine) -> bool:
    with engine.connect() as connection:
        return connection.execute(select(BisonItem.__table__.c.id).limit(1)).first() is not None


def predicted_item_ids(engine: Engine, signature: str) -> set[int]:
    """Items that already have a choice under this signature."""
    table = BisonPrediction.__table__
    with engine.connect() as connection:
        return set(connection.execute(select(table.c.item_id).where(
            table.c.signature == signature)).scalars())


def store_bison_predictions(engine: Engine, scorer: str, signature: str,
                            predictions: pd.DataFrame) -> int:
    """Store choices (item_id, score_a, score_b, chosen_image_id) not stored yet under this
    signature, in one transaction; returns how many were new."""
    import pandas as pd

    table = BisonPrediction.__table__
    with write_transaction(engine) as connection:
        done = set(connection.execute(select(table.c.item_id).where(
            table.c.signature == signature)).scalars())
        now = utcnow()
        rows = [{"item_id": int(row.item_id), "scorer": scorer, "signature": signature,
                 "score_a": float(row.score_a), "score_b": float(row.score_b),
                 "chosen_image_id": None if pd.isna(row.chosen_image_id)
                 else int(row.chosen_image_id), "computed_at": now}
                for row in predictions.itertuples(index=False) if row.item_id not in done]
        if rows:
            connection.execute(table.insert(), rows)
    return len(rows)


def bison_frames(engine: Engine) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(items, given answers, stored predictions) as the BISON statistics take them."""
    import pandas as pd

    item, answer, prediction, annotator = (BisonItem.__table__, BisonAnswer.__table__,
                                           BisonPrediction.__table__, Annotator.__table__)
    with engine.connect() as connection:
        items = pd.read_sql(select(item.c.id.label("item_id"), item.c.image_a_id,
                                   item.c.image_b_id, item.c.true_image_id), connection)
        answers = pd.read_sql(
            select(answer.c.item_id, answer.c.answer, answer.c.left_image_id,
                   answer.c.seconds, annotator.c.name.label("annotator"))
            .join(annotator, answer.c.annotator_id == annotator.c.id)
            .where(answer.c.answer.is_not(None)), connection)
        predictions = pd.read_sql(select(prediction.c.item_id, prediction.c.scorer,
                                         prediction.c.signature,
                                         prediction.c.chosen_image_id), connection)
    return items, answers, predictions
