"""`thumb export` then `thumb import` into a new database: what the project keeps (README,
"Input format": final scores, ratings with their times, images, references, the raters),
what stays behind as README lists it, and the image paths of an export written in another
folder than its images'."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from rubrics import load_rubric
from storage import export_ratings, final_scores, import_captions, open_database
from storage.gold import import_gold
from storage.models import (
    Annotator,
    Assignment,
    GoldCaption,
    GoldImage,
    GoldSetting,
    Image,
    ImageFlag,
    ImageReference,
    Rating,
)
from storage.rating_sessions import AnnotationSession, register_annotator
from tests.app_helpers import sample_engine
from tests.conftest import SAMPLE_CSV
from tests.test_thumb_release_export import ratings_file, sample_project
from tests.test_workflow import rate_everything
from thumb_tui.cli import app


def _rows(engine: Engine, query) -> list[tuple]:
    with engine.connect() as connection:
        return sorted(map(tuple, connection.execute(query).all()), key=repr)


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(model.__table__)).scalar()


def kept(engine: Engine) -> dict[str, object]:
    """What README says an export imported into a new database keeps."""
    image, rating, annotator = Image.__table__, Rating.__table__, Annotator.__table__
    reference, flag = ImageReference.__table__, ImageFlag.__table__
    return {
        "final": final_scores(engine).drop(columns=["rating_id", "caption_id"])
        .to_dict("records"),
        "images": _rows(engine, select(image.c.key, image.c.path, image.c.double_rating)),
        "references": _rows(engine, select(image.c.key, reference.c.position, reference.c.text)
                            .join(image, reference.c.image_id == image.c.id)),
        "ratings": _rows(engine, select(annotator.c.name, annotator.c.native_english,
                                        rating.c.stage, rating.c.precision, rating.c.recall,
                                        rating.c.created_at, rating.c.updated_at)
                         .join(annotator, rating.c.annotator_id == annotator.c.id)),
        "broken-image flags": _rows(engine, select(image.c.key, annotator.c.name,
                                                   flag.c.reason, flag.c.created_at)
                                    .join(image, flag.c.image_id == image.c.id)
                                    .join(annotator, flag.c.annotator_id == annotator.c.id)),
    }


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_the_round_trip_keeps_the_ratings_and_leaves_behind_what_readme_lists(tmp_path, fmt):
    engine = sample_engine(tmp_path)
    register_annotator(engine, "zoe", True)  # registered, nothing rated yet
    alice = AnnotationSession(engine, "alice", native_english=False)
    alice.flag_broken(0, "the file shows nothing")
    AnnotationSession(engine, "yann").flag_broken(0, 'a "grey" square, [b]nothing[/b]')
    rate_everything(alice, 1)
    (tmp_path / "images").mkdir()
    shutil.copy(SAMPLE_CSV.parent / "images" / "01_red_balls.png", tmp_path / "images")
    gold = tmp_path / "gold.csv"
    gold.write_text("image,path,caption,precision,recall,reason\n"
                    "g1,images/01_red_balls.png,Three red balls.,4-5,3-5,Two balls.\n",
                    encoding="utf-8")
    import_gold(engine, gold, actor="lead", rate=0.2)
    out = tmp_path / f"project.{fmt}"
    export_ratings(engine, out, fmt)
    again = open_database(tmp_path / "again.db")
    import_captions(again, out, actor="t", allow_outside_images=True)

    assert kept(again) == kept(engine)
    assert len(kept(again)["broken-image flags"]) == 2  # yann, who only flagged, came too
    # What stays behind (README's list): an annotator who did nothing yet, gold items with
    # their settings, each annotator's screen state
    for model in (GoldImage, GoldCaption, GoldSetting, Assignment):
        assert _count(engine, model) > 0 and _count(again, model) == 0, model.__name__
    names = select(Annotator.__table__.c.name)
    assert _rows(engine, names) == [("alice",), ("yann",), ("zoe",)]
    assert _rows(again, names) == [("alice",), ("yann",)]


def _project_in(folder: Path) -> Path:
    """The sample project imported from a copy in `folder`/data: its images lie inside."""
    data = folder / "data"
    shutil.copytree(SAMPLE_CSV.parent / "images", data / "images")
    shutil.copy(SAMPLE_CSV, data)
    database = folder / "project.db"
    import_captions(open_database(database), data / SAMPLE_CSV.name, actor="t")
    return database


def test_an_export_in_another_folder_says_how_to_import_it(tmp_path):
    database = _project_in(tmp_path)
    runner = CliRunner()
    beside = runner.invoke(app, ["--db", str(database), "export", "--out",
                                 str(tmp_path / "data" / "beside.csv")])
    assert beside.exit_code == 0 and "note" not in beside.output
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    out = tmp_path / "sub" / "deeper" / "x.csv"
    elsewhere = runner.invoke(app, ["--db", str(database), "export", "--out", str(out)])
    assert elsewhere.exit_code == 0
    said = " ".join(elsewhere.output.split())
    assert (f"note: 15 image path(s) in {out} lead out of its folder (the first: "
            "../../data/images/01_red_balls.png); `thumb import` refuses them unless you add "
            "--allow-outside-images") in said
    assert f"or export into {tmp_path / 'data' / 'images'} or a folder above it" in said
    imported = runner.invoke(app, ["--db", str(tmp_path / "again.db"), "import", str(out),
                                   "--allow-outside-images"])
    assert imported.exit_code == 0, imported.output
    image = Image.__table__
    paths = select(image.c.key, image.c.path)
    assert _rows(open_database(tmp_path / "again.db"), paths) == _rows(
        open_database(database), paths)


def test_an_export_on_another_rubric_says_to_import_it_with_that_rubric(tmp_path):
    """Without --rubric, a new database would read the ratings on THUMB 1.0's scales."""
    pr4 = Path(__file__).parent / "rubrics" / "pr4-1.toml"
    engine = sample_engine(tmp_path, rubric=load_rubric(str(pr4)))
    alice = AnnotationSession(engine, "alice")
    for group in alice.open_image(0):  # on PR-4's 1-4 scales
        alice.set_values(group, {"precision": 4, "recall": 3}, image_index=0, focus=0)
    out = tmp_path / "project.csv"
    runner = CliRunner()
    exported = runner.invoke(app, ["--db", str(tmp_path / "app.db"), "export", "--out",
                                   str(out)])
    assert exported.exit_code == 0
    assert ("note: the ratings are on rubric pr4-1 (PR-4 (test rubric)); `thumb import` "
            "refuses a rating on another rubric than the importing project's (THUMB 1.0 in "
            "a new database), so import this file with --rubric and that rubric's file"
            ) in " ".join(exported.output.split())
    on_thumb = tmp_path / "thumb.db"  # read on THUMB 1.0's scales, 4 would be another score
    refused = runner.invoke(app, ["--db", str(on_thumb), "import", str(out),
                                  "--allow-outside-images"])
    assert refused.exit_code == 2 and not on_thumb.exists()
    lines = [line for line in refused.output.splitlines() if "rubric" in line]
    assert len(lines) == 4 and all(
        "this rating is on rubric 'pr4-1', but the import reads ratings on 'thumb-1.0': "
        "import the file with --rubric and 'pr4-1''s rubric file" in line for line in lines)
    again = tmp_path / "again.db"
    imported = runner.invoke(app, ["--db", str(again), "import", str(out), "--rubric",
                                   str(pr4), "--allow-outside-images"])
    assert imported.exit_code == 0, imported.output
    assert kept(open_database(again)) == kept(engine)


def test_a_thumb_project_s_export_has_no_rubric_note(tmp_path):
    engine = sample_engine(tmp_path)
    rate_everything(AnnotationSession(engine, "alice"), 1)
    exported = CliRunner().invoke(app, ["--db", str(tmp_path / "app.db"), "export", "--out",
                                        str(tmp_path / "project.csv")])
    assert exported.exit_code == 0 and "rubric" not in exported.output


def test_a_total_is_exported_without_binary_noise(tmp_path):
    """(1 + 2) / 2 - 0.1 - 0.5 - 0.5 = 0.4, which binary arithmetic makes 0.3999999999999999."""
    engine = sample_project(tmp_path, ratings_file(tmp_path, {
        "precision": "1", "recall": "2", "fluency": "0.1", "conciseness": "0.5",
        "inclusive": "0.5"}))
    out = tmp_path / "project.csv"
    export_ratings(engine, out, "csv")
    with out.open(encoding="utf-8", newline="") as handle:
        totals = {row["total"] for row in csv.DictReader(handle)}
    assert totals == {"0.4", ""}  # the one rating; captions without one have no total
