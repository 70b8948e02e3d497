"""`thumb status` and `thumb next`: the pipeline per stage, each annotator's work and what
waits for them, read from a project in the middle of the THUMB protocol."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storage import import_captions, open_database
from storage.models import Stage
from storage.rating.dashboard import dashboard, project_size, work_for
from storage.rating.project_queues import (
    assign_double,
    disagreements,
    fluency_queue,
    release_claims,
)
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine
from tests.conftest import SAMPLE_CSV
from thumb_tui.cli import app

runner = CliRunner()


def rate(session: AnnotationSession, index: int, *, captions: int | None = None,
         change_first: bool = False) -> None:
    """Rate the image at `index` (only its first `captions` captions when given): stage 1
    with P4 R4, review with the stage-1 values (P changed on the first caption if asked)."""
    for number, group in enumerate(session.open_image(index)[:captions]):
        values = dict(group.reference) if group.reference else {"precision": 4, "recall": 4}
        values.pop("note", None)
        if change_first and number == 0:
            values["precision"] = 1
        session.set_values(group, values, image_index=index, focus=0)


@pytest.fixture
def midway(tmp_path):
    """Alice rated every image; Bob rated one of the three double images and started a
    second; Carol reviewed two images (changing one caption) and started a third."""
    engine = sample_engine(tmp_path)
    doubles = set(assign_double(engine, 0.2, seed=3, actor="lead").marked)
    alice = AnnotationSession(engine, "alice")
    for index in range(len(alice.images)):
        rate(alice, index)
    bob = AnnotationSession(engine, "bob")
    assert {image.key for image in bob.images} == doubles
    rate(bob, 0)
    rate(bob, 1, captions=1)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    assert len(carol.images) == 13  # 12 single images and the double one Bob finished
    rate(carol, 0, change_first=True)
    rate(carol, 1)
    rate(carol, 2, captions=1)
    return engine, tmp_path / "app.db"


def test_pipeline_per_stage(midway):
    engine, _ = midway
    stages = {s.stage: s for s in dashboard(engine).stages}
    assert (stages["stage 1"].waiting, stages["stage 1"].in_progress,
            stages["stage 1"].done) == (0, 0, 15)
    blind = stages["second blind rating"]
    assert (blind.waiting, blind.in_progress, blind.done) == (1, 1, 1)
    review = stages["review"]
    assert (review.waiting, review.in_progress, review.done, review.not_ready) == (10, 1, 2, 2)
    resolution = stages["resolution"]
    assert (resolution.waiting, resolution.in_progress, resolution.done) == (
        len(disagreements(engine)), 0, 0) == (1, 0, 0)
    assert stages["fluency round"].waiting == len(fluency_queue(engine)) > 0


def test_a_claimed_image_is_in_progress_not_waiting_until_released(tmp_path):
    """An image open on someone's screen (or kept by their killed session), nothing rated
    yet, is nobody else's to take: stage 1 counts it in progress and as its holder's open
    image; `thumb release` gives it back to the waiting ones."""
    engine = sample_engine(tmp_path)
    total = project_size(engine)[0]
    AnnotationSession(engine, "erin").open_image(0)  # the claim; the session never ends

    board = dashboard(engine)
    first = next(s for s in board.stages if s.stage == "stage 1")
    assert (first.waiting, first.in_progress, first.done) == (total - 1, 1, 0)
    erin = next(p for p in board.annotators if p.name == "erin")
    assert (erin.rated_images, erin.rating_images) == (0, 1)

    assert len(release_claims(engine, "erin", actor="lead").released) == 1
    first = next(s for s in dashboard(engine).stages if s.stage == "stage 1")
    assert (first.waiting, first.in_progress, first.done) == (total, 0, 0)


def test_images_with_imported_final_scores_wait_for_no_stage(tmp_path):
    """Final scores brought from elsewhere (as `import-thumb` brings the THUMB release's)
    close stage 1 on their images: nobody may rate or review them, so status counts them
    in a row of their own, not as waiting for stage 1 or not ready for review."""
    engine = sample_engine(tmp_path)
    total = project_size(engine)[0]
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        captions = [row for row in csv.DictReader(handle) if row["image_id"] in
                    ("img01", "img02")]
    finals = tmp_path / "finals.csv"
    with finals.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "system", "caption", "annotator", "stage", "precision",
                         "recall"])
        writer.writerows([row["image_id"], row["system"], row["caption"], "elsewhere",
                          "final", 4, 3] for row in captions)
    import_captions(engine, finals, actor="lead")

    stages = {s.stage: s for s in dashboard(engine).stages}
    first, review = stages["stage 1"], stages["review"]
    assert (first.waiting, first.in_progress, first.done) == (total - 2, 0, 0)
    assert review.not_ready == total - 2
    imported = stages["final scores imported"]
    assert (imported.unit, imported.waiting, imported.done) == ("images", 0, 2)
    # what stage 1 still offers a newcomer is what status counts as waiting
    assert work_for(engine, "newcomer")[0].count == total - 2


def test_images_only_bison_items_name_are_no_rating_work(tmp_path):
    """BISON items may name images that have no caption (their query is the item's own):
    stage 1 neither lists them to an annotator nor counts them as waiting, and blind
    double rating never marks one."""
    from storage.bison import import_bison

    engine = sample_engine(tmp_path)
    total = project_size(engine)[0]
    folder = SAMPLE_CSV.parent
    items = tmp_path / "items.csv"
    with items.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["bison_id", "caption", "image_a", "image_b", "true_image"])
        for number in range(2):
            new_a, new_b = (str(tmp_path / f"bison-{number}-{side}.png") for side in "ab")
            for path in (new_a, new_b):
                (tmp_path / Path(path).name).write_bytes(
                    (folder / "images" / "01_red_balls.png").read_bytes())
            writer.writerow([f"b{number}", "Two red balls.", new_a, new_b, new_a])
    import_bison(engine, items, actor="lead", allow_outside_images=True)
    assert project_size(engine)[0] == total + 4  # the four new images are the project's

    stages = {s.stage: s for s in dashboard(engine).stages}
    assert stages["stage 1"].waiting == total
    assert len(AnnotationSession(engine, "newcomer").images) == total
    assert work_for(engine, "newcomer")[0].count == total
    marked = assign_double(engine, 1.0, seed=0, actor="lead").marked
    assert len(marked) == total and not any(key.startswith("bison-") for key in marked)


@pytest.mark.slow
def test_each_annotator_what_they_did_and_what_waits(midway):
    engine, _ = midway
    people = {p.name: p for p in dashboard(engine).annotators}
    assert (people["alice"].rated_images, people["alice"].rating_images) == (15, 0)
    assert (people["bob"].rated_images, people["bob"].rating_images) == (1, 1)
    assert (people["carol"].reviewed_images, people["carol"].reviewing_images) == (2, 1)
    assert people["alice"].waiting == []  # rated everything: no review, no resolving
    bob = {w.command: w.count for w in people["bob"].waiting}
    # his unfinished double image and the one still open; 13 reviewable less his own and
    # Carol's three; the disagreement is on an image he did not touch
    assert bob == {"annotate": 2, "review": 9, "resolve": 1}
    carol = {w.command: w.count for w in people["carol"].waiting}
    # the open double image; her unfinished review and the ten nobody has started
    assert carol == {"annotate": 1, "review": 11}
    newcomer = {w.command: w.count for w in work_for(engine, "dave")}
    assert newcomer == {"annotate": 1}


@pytest.mark.slow
def test_status_command_table_and_json(midway):
    _, db = midway
    shown = runner.invoke(app, ["--db", str(db), "status"])
    assert shown.exit_code == 0, shown.output
    for text in ("Pipeline", "second blind", "review", "resolution", "fluency round",
                 "annotate 2", "review 9", "resolve 1", "review 11", "captions by Human"):
        assert text in shown.output
    data = json.loads(runner.invoke(app, ["--db", str(db), "status", "--format", "json"])
                      .output)
    assert [s["stage"] for s in data["stages"]] == [
        "stage 1", "second blind rating", "review", "resolution", "fluency round"]
    assert {p["name"] for p in data["annotators"]} == {"alice", "bob", "carol"}
    assert runner.invoke(app, ["--db", str(db), "status", "--format", "xml"]).exit_code == 2


def test_status_shows_a_long_annotator_name_whole_at_80_columns(midway):
    _, db = midway
    name = "maximiliane-schneider-of-the-caption-team"
    assert runner.invoke(app, ["--db", str(db), "annotator", name]).exit_code == 0
    shown = runner.invoke(app, ["--db", str(db), "status"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    assert max(map(len, shown.output.splitlines())) <= 80
    table = shown.output[shown.output.index("Annotators"):].splitlines()
    assert table[1].split() == ["annotator", "stage", "1", "review", "resolved", "fluency",
                                "BISON", "waiting"]  # whole words, every column
    rows = table[3:-1]
    folded = "".join(line.split()[0] for line in rows if line.strip())  # column 1, in turn
    assert name in folded


def test_status_with_gold_keeps_every_count_whole_at_80_columns():
    """The gold column (answers right of answered, with the share) makes the annotator
    table nine columns: at 80 columns still no count is cut (`annotate 16`)."""
    from rich.console import Console

    from storage.rating.dashboard import AnnotatorProgress, Dashboard, Work
    from thumb_tui.cli.project import _annotator_table

    person = AnnotatorProgress("alice", None, 0, 0, 0, 0, 0, 0, 0,
                               [Work("annotate", 16, "image", "to rate (stage 1)"),
                                Work("fluency-round", 356, "caption", "for the round")],
                               gold_answered=4, gold_correct=1)
    board = Dashboard(15, 60, {}, [], [person], [], 0, gold_captions=4)
    console = Console(width=80, record=True)
    console.print(_annotator_table(board))
    shown = console.export_text()
    assert max(map(len, shown.splitlines())) <= 80
    assert "annotate 16" in shown and "fluency-round 356" in shown and "1/4" in shown


def test_next_prints_the_commands_to_run(midway):
    _, db = midway
    result = runner.invoke(app, ["--db", str(db), "next", "--annotator", "bob"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"thumb --db {db} annotate --annotator bob    # 2 images to rate (stage 1)",
        f"thumb --db {db} review --annotator bob    # 9 images to review (stage 2)",
        f"thumb --db {db} resolve --annotator bob    # 1 disagreement to resolve",
    ]
    nothing = runner.invoke(app, ["--db", str(db), "next", "--annotator", "alice"])
    assert nothing.output == "Nothing waits for alice now.\n"


def test_status_stays_readable_with_a_thousand_systems(tmp_path):
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        row = next(csv.DictReader(handle))
    source = tmp_path / "many.csv"
    with source.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        for number in range(1000):
            writer.writerow({**row, "image": str(SAMPLE_CSV.parent / row["image"]),
                             "system": f"system-{number:04d}",
                             "caption": f"Caption number {number}."})
    engine = open_database(tmp_path / "many.db")
    import_captions(engine, source, actor="t", allow_outside_images=True)
    shown = runner.invoke(app, ["--db", str(tmp_path / "many.db"), "status"])
    assert shown.exit_code == 0, shown.output
    assert "system-0001" not in shown.output and "1000 systems" in shown.output
    assert len(shown.output.splitlines()) < 40
