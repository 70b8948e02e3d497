"""`thumb export --format thumb-jsonl` of a thumb-tui project (no release data needed): the
file `import-thumb` reads back, refused for a rubric other than THUMB 1.0's, its numbers
as the release writes them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from rubrics import load_rubric
from storage import (
    InputError,
    export_thumb,
    final_scores,
    import_captions,
    import_thumb,
    open_database,
)
from storage.imports.thumb_release import NotThumbRubric
from storage.models import Image
from tests.conftest import SAMPLE_CSV, database_dump
from thumb_tui.cli import app

SAMPLE_RATINGS = SAMPLE_CSV.parent / "example_ratings.csv"
SAMPLE_IMAGES = SAMPLE_CSV.parent / "images"
PR4 = Path(__file__).parent / "rubrics" / "pr4-1.toml"
FINAL_VALUES = ["image_id", "system", "caption", "precision", "recall", "fluency",
                "conciseness", "inclusive", "total"]


def sample_project(folder: Path, ratings: Path = SAMPLE_RATINGS, rubric: Path | None = None
                   ) -> Engine:
    engine = open_database(folder / "project.db")
    chosen = None if rubric is None else load_rubric(str(rubric))
    import_captions(engine, SAMPLE_CSV, actor="t", rubric=chosen)
    import_captions(engine, ratings, actor="t", rubric=chosen)
    return engine


def ratings_file(folder: Path, values: dict[str, str], rows: int = 1) -> Path:
    """Stage-1 ratings of annotator `ann` with these values, for the first `rows` captions
    of the sample project."""
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        captions = list(csv.DictReader(handle))[:rows]
    path = folder / "ratings.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ["image_id", "system", "caption", "annotator", "stage",
                                         *values])
        writer.writeheader()
        for caption in captions:
            writer.writerow({"image_id": caption["image_id"], "system": caption["system"],
                             "caption": caption["caption"], "annotator": "ann", "stage": "1",
                             **values})
    return path


def release_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_release_export_imports_again_with_the_same_final_scores(tmp_path):
    engine = sample_project(tmp_path)
    out, refs = tmp_path / "release.jsonl", tmp_path / "refs.jsonl"
    assert export_thumb(engine, out, refs) == 60
    # the sample's images are in no evaluation split: their set_id is null, as written
    assert {line["set_id"] for line in release_lines(out)} == {None}
    again_engine = open_database(tmp_path / "again.db")
    summary = import_thumb(again_engine, out, refs, actor="t", images_dir=SAMPLE_IMAGES)
    assert (summary.images, summary.captions, summary.references, summary.ratings) == (
        15, 60, 60, 60)
    before, after = final_scores(engine), final_scores(again_engine)
    assert after[FINAL_VALUES].to_dict("records") == before[FINAL_VALUES].to_dict("records")
    assert set(after["annotator"]) == {"thumb-1.0"}


def _release_line(**changes: object) -> dict:
    line = {"SYS": "Human", "seg_id": "img01", "set_id": None, "hyp": "A dog.",
            "image": "01_red_balls.png", "P": 4.0, "R": 3.0, "Fl": -0.0, "Inc": -0.0,
            "Con": -0.0, "human_score": 3.5}
    line.update(changes)
    return {key: value for key, value in line.items() if value != "absent"}


@pytest.mark.parametrize(("changes", "message"), [
    ({"set_id": "absent"}, r"release.jsonl:1: missing key\(s\): set_id$"),
    ({"P": None}, r"release.jsonl:1: null or empty value\(s\): P$"),
    ({"hyp": "", "Con": "absent"},
     r"release.jsonl:1: missing key\(s\): Con; null or empty value\(s\): hyp$"),
])
def test_a_missing_key_and_a_null_value_are_told_apart(engine, tmp_path, changes, message):
    release, refs = tmp_path / "release.jsonl", tmp_path / "refs.jsonl"
    release.write_text(json.dumps(_release_line(**changes)) + "\n", encoding="utf-8")
    refs.write_text(json.dumps({"seg_id": "img01", "set_id": None, "refs": ["A dog."]}) + "\n",
                    encoding="utf-8")
    before = database_dump(engine)
    with pytest.raises(InputError, match=message):
        import_thumb(engine, release, refs, actor="t")
    assert database_dump(engine) == before


def test_a_null_set_id_is_an_image_outside_the_split(engine, tmp_path):
    release, refs = tmp_path / "release.jsonl", tmp_path / "refs.jsonl"
    release.write_text("".join(json.dumps(line) + "\n" for line in (
        _release_line(), _release_line(SYS="Other", **{"seg_id": "img02", "set_id": 7}))),
        encoding="utf-8")
    refs.write_text("".join(json.dumps({"seg_id": key, "refs": ["A dog."]}) + "\n"
                            for key in ("img01", "img02")), encoding="utf-8")
    import_thumb(engine, release, refs, actor="t")
    image = Image.__table__
    with engine.connect() as connection:
        set_ids = dict(connection.execute(select(image.c.key, image.c.set_id)).all())
    assert set_ids == {"img01": None, "img02": 7}


def test_human_score_is_written_as_the_release_writes_it(tmp_path):
    """(P + R) / 2 minus the penalties, Kasai et al.'s total: here (1 + 2) / 2 - 0.1 - 0.5 -
    0.5 = 0.4, which binary arithmetic makes 0.3999999999999999."""
    engine = sample_project(tmp_path, ratings_file(tmp_path, {
        "precision": "1", "recall": "2", "fluency": "0.1", "conciseness": "0.5",
        "inclusive": "0.5"}))
    out = tmp_path / "release.jsonl"
    export_thumb(engine, out)
    text = out.read_text(encoding="utf-8")
    assert '"P": 1.0, "R": 2.0, "Fl": -0.1, "Inc": -0.5, "Con": -0.5, "human_score": 0.4}' in text


def test_another_rubric_is_not_exported_as_the_release(tmp_path):
    engine = sample_project(tmp_path, ratings_file(
        tmp_path, {"precision": "3", "recall": "3"}, rows=60), rubric=PR4)
    with pytest.raises(NotThumbRubric, match=r"this project's rubric is pr4-1 .* and 60 final "
                                             r"score\(s\) are on rubric pr4-1"):
        export_thumb(engine, tmp_path / "release.jsonl")
    assert not (tmp_path / "release.jsonl").exists()


def test_ratings_on_another_rubric_are_not_exported_as_the_release(tmp_path):
    """The project went back to THUMB 1.0, but the ratings it has are on another rubric."""
    engine = sample_project(tmp_path, ratings_file(
        tmp_path, {"precision": "3", "recall": "3"}, rows=2), rubric=PR4)
    more = tmp_path / "more.csv"
    more.write_text("image_id,system,caption\nimg01,New,A new caption.\n", encoding="utf-8")
    import_captions(engine, more, actor="t", rubric=load_rubric("thumb-1.0"))
    with pytest.raises(NotThumbRubric) as refused:
        export_thumb(engine, tmp_path / "release.jsonl")
    assert "2 final score(s) are on rubric pr4-1" in str(refused.value)
    assert "project's rubric" not in str(refused.value)


def test_the_command_refuses_another_rubric_and_writes_nothing(tmp_path):
    sample_project(tmp_path, ratings_file(tmp_path, {"precision": "3", "recall": "3"}),
                   rubric=PR4)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    result = CliRunner().invoke(app, [
        "--db", str(tmp_path / "project.db"), "export", "--format", "thumb-jsonl", "--out",
        str(outputs / "release.jsonl"), "--references-out", str(outputs / "refs.jsonl")])
    assert result.exit_code == 2
    assert "error: --format thumb-jsonl writes the THUMB 1.0 release" in result.output
    assert "--format csv, jsonl or parquet" in result.output
    assert list(outputs.iterdir()) == []  # neither file, nor a temporary one
