"""`thumb export` then `thumb import` into a new database: what the project keeps (README,
"Input format": final scores, ratings, resolutions and fluency-round verdicts with their
times, images, references, the raters), what stays behind as README lists it, the image
paths of an export written in another folder than its images', and the refusal of a time
that belongs to no resolution or fluency-round verdict, or that contradicts another
row's."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, Table, func, select
from typer.testing import CliRunner

from rubrics import load_rubric
from storage import InputError, export_ratings, final_scores, import_captions, open_database
from storage.models import (
    Annotator,
    Assignment,
    Caption,
    FluencyCheck,
    GoldCaption,
    GoldImage,
    GoldSetting,
    Image,
    ImageFlag,
    ImageReference,
    Rating,
    Resolution,
    Stage,
)
from storage.rating.gold import import_gold
from storage.rating.project_queues import (
    disagreements,
    fluency_queue,
    record_fluency_check,
    record_resolution,
)
from storage.rating.rating_sessions import AnnotationSession, register_annotator
from tests.app_helpers import review_lowering_first_recall, sample_engine
from tests.conftest import SAMPLE_CSV, database_dump
from tests.image_files import good_png
from tests.test_thumb_release_export import ratings_file, sample_project
from tests.test_workflow import rate_everything
from thumb_tui.cli import app


def _rows(engine: Engine, query) -> list[tuple]:
    with engine.connect() as connection:
        return sorted(map(tuple, connection.execute(query).all()), key=repr)


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(model.__table__)).scalar()


def _verdicts(engine: Engine, table: Table, person: str) -> list[tuple]:
    """Each row of a table of per-caption verdicts (resolutions, fluency-round verdicts)
    with its caption (image key, system), its person's name and every stored field."""
    image, caption, annotator = Image.__table__, Caption.__table__, Annotator.__table__
    fields = [column for column in table.c if column.name not in ("id", "caption_id", person)]
    return _rows(engine, select(image.c.key, caption.c.system, annotator.c.name, *fields)
                 .join(caption, table.c.caption_id == caption.c.id)
                 .join(image, caption.c.image_id == image.c.id)
                 .join(annotator, table.c[person] == annotator.c.id))


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
        "resolutions": _verdicts(engine, Resolution.__table__, "resolver_id"),
        "fluency-round verdicts": _verdicts(engine, FluencyCheck.__table__, "checker_id"),
    }


def review_resolve_and_check(engine: Engine) -> None:
    """After alice's stage 1: bob reviews every image, lowering the recall of each image's
    first caption; carol settles two of those disagreements and dave, a native speaker,
    gives two fluency-round verdicts."""
    review_lowering_first_recall(engine, "bob")
    carol = AnnotationSession(engine, "carol", stage=Stage.FINAL)
    codes = [reason.code for reason in carol.rubric.resolution_reasons]
    for item in disagreements(engine)[:2]:
        carol.set_values(carol.group_for_caption(item.caption_id), {"precision": 3, "recall": 3},
                         image_index=carol.image_index_of_caption(item.caption_id), focus=0)
        record_resolution(engine, item.caption_ids, "carol", ["both-wrong"], "counted twice",
                          codes)
    register_annotator(engine, "dave", True)
    waiting = fluency_queue(engine)
    record_fluency_check(engine, waiting[0].caption_ids, "dave", 0.2, "punctuation")
    record_fluency_check(engine, waiting[1].caption_ids, "dave", 0.0, None)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_the_round_trip_keeps_the_ratings_and_leaves_behind_what_readme_lists(tmp_path, fmt):
    engine = sample_engine(tmp_path)
    register_annotator(engine, "zoe", True)  # registered, nothing rated yet
    alice = AnnotationSession(engine, "alice", native_english=False)
    alice.flag_broken(0, "the file shows nothing")
    AnnotationSession(engine, "yann").flag_broken(0, 'a "grey" square, [b]nothing[/b]')
    rate_everything(alice, 1)
    review_resolve_and_check(engine)
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
    assert len(kept(again)["resolutions"]) >= 2  # with their times, as the ratings'
    assert len(kept(again)["fluency-round verdicts"]) >= 2
    # What stays behind (README's list): an annotator who did nothing yet, gold items with
    # their settings, each annotator's screen state
    for model in (GoldImage, GoldCaption, GoldSetting, Assignment):
        assert _count(engine, model) > 0 and _count(again, model) == 0, model.__name__
    names = select(Annotator.__table__.c.name)
    assert _rows(engine, names) == [(n,) for n in ("alice", "bob", "carol", "dave", "yann",
                                                   "zoe")]
    assert _rows(again, names) == [(n,) for n in ("alice", "bob", "carol", "dave", "yann")]


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
    with out.open(encoding="utf-8", newline="") as handle:
        columns = set(next(csv.reader(handle)))
    # PR-4 has no fluency penalty, so no fluency round: its verdict's columns, time too,
    # are left out; a resolution's are not
    assert not {"fluency_round", "fluency_round_by", "fluency_round_at"} & columns
    assert {"resolution_reasons", "resolution_note", "resolved_at"} <= columns
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


TIMES_WITHOUT_THEIR_VERDICT = {
    "a resolution's time without its reasons": (
        "annotator,stage,precision,recall,resolved_at\n"
        "ann,final,5,4,2026-03-04T05:06:07+00:00\n", 2, "resolved_at needs resolution_reasons"),
    "a fluency-round time without its checker": (
        "fluency_round_at\n2026-03-04T05:06:07+00:00\n", 2,
        "fluency_round_at needs fluency_round_by (the native speaker)"),
    "a fluency-round verdict given at another time on the caption's next row": (
        "annotator,stage,precision,recall,fluency_round,fluency_round_by,fluency_round_at\n"
        "ann,1,5,4,0.1,dan,2026-03-04T05:06:07+00:00\n"
        "bea,2,5,4,0.1,dan,2026-03-04T05:06:08+00:00\n", 3,
        "the fluency-round verdict (fluency_round, fluency_round_type, fluency_round_by, "
        "fluency_round_at) differs from line 2"),
    "a resolution's time that is no time": (
        "annotator,stage,precision,recall,resolution_reasons,resolved_at\n"
        "ann,final,5,4,other,soon\n", 2, "resolved_at must be an ISO 8601 time, not 'soon'"),
}


@pytest.mark.parametrize("kind", sorted(TIMES_WITHOUT_THEIR_VERDICT))
def test_a_time_without_its_verdict_or_against_another_row_is_refused(tmp_path, kind):
    """Each row of the file is the caption 'A dog.' of c.png by system H, followed by the
    case's columns. Refused with the file and line, and nothing is written."""
    good_png(tmp_path / "c.png")
    columns, line, words = TIMES_WITHOUT_THEIR_VERDICT[kind]
    header, *rows = columns.splitlines(keepends=True)
    bad = tmp_path / "bad.csv"
    bad.write_text("image,system,caption," + header
                   + "".join(f"c.png,H,A dog.,{row}" for row in rows), encoding="utf-8")
    engine = open_database(tmp_path / "project.db")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_captions(engine, bad, actor="t")
    assert f"{bad}:{line}: " in str(caught.value) and words in str(caught.value)
    assert database_dump(engine) == before
