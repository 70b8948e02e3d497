"""Rubrics are data: a second rubric (tests/rubrics/pr4-1.toml: precision and recall on
1-4 under other names, weights 0.7/0.3, a 0.25 conciseness penalty and no other) goes
through the database's checks, import, the rating screens, review, agreement, export and
the report, with nothing of THUMB 1.0 left in what it shows."""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from typer.testing import CliRunner

from metrics.registry import MetricOptions
from reports.agreement import agreement_report
from reports.scoring import compute_metrics
from reports.thumb.render import write_report
from reports.thumb.tables import build_report
from rubrics import THUMB_1_0, load_rubric, parse_rubric
from storage import InputError, final_scores, import_captions, open_database, ratings_frame
from storage.models import Stage, utcnow
from storage.rating.project_queues import fluency_queue
from storage.rating.rating_sessions import AnnotationSession
from storage.rubric_registry import project_rubric, register_rubric, stored_rubrics
from tests.app_helpers import screen_text
from tests.conftest import SAMPLE_CSV
from thumb_tui.app import ThumbApp
from thumb_tui.cli import app as cli
from thumb_tui.screens.annotate import ReviewScreen

PR4 = load_rubric(Path(__file__).parent / "rubrics" / "pr4-1.toml")
runner = CliRunner()


def test_the_second_rubric_is_its_own_data():
    assert PR4.signature == "pr4-1"
    assert [(d.key, d.short, d.min, d.max, d.weight) for d in PR4.dimensions] == [
        ("precision", "A", 1, 4, 0.7), ("recall", "V", 1, 4, 0.3)]
    assert PR4.penalty_keys == ("conciseness",)
    assert PR4.total(4, 2, conciseness=0.25) == pytest.approx(0.7 * 4 + 0.3 * 2 - 0.25)
    assert PR4.formula() == "0.7·A + 0.3·V − wordiness"
    assert PR4.labels == {"precision": "A", "recall": "V", "conciseness": "W"}
    with pytest.raises(ValueError, match="rubric pr4-1 has no fluency"):
        PR4.total(4, 2, fluency=0.1)


def _rating(engine, rubric: str, **values) -> None:
    now = utcnow()
    row = dict(caption_id=1, annotator_id=1, stage=1, precision=4, recall=4, fluency=0.0,
               conciseness=0.0, inclusive=0.0, note="", seconds=0.0, rubric=rubric,
               created_at=now, updated_at=now) | values
    with engine.begin() as connection:
        connection.execute(text(
            f"INSERT INTO rating ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"
        ), row)


@pytest.fixture
def two_rubrics(engine):
    with engine.begin() as connection:
        register_rubric(connection, PR4)
        connection.execute(text("INSERT INTO image (id, key, double_rating) VALUES (1, 'i', 0)"))
        connection.execute(text("INSERT INTO caption (id, image_id, system, text) "
                                "VALUES (1, 1, 'S', 'A dog.')"))
        connection.execute(text("INSERT INTO annotator (id, name, created_at) "
                                "VALUES (1, 'a', '2024-01-01')"))
    return engine


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rubric", "values"),
    [("pr4-1", {"precision": 5}), ("pr4-1", {"recall": 0}), ("pr4-1", {"precision": 2.5}),
     ("pr4-1", {"conciseness": 0.5}), ("pr4-1", {"fluency": 0.1}), ("pr4-1", {"inclusive": 2}),
     ("thumb-1.0", {"conciseness": 0.25}), ("thumb-1.0", {"precision": 6}),
     ("no-such-rubric", {})],
    ids=repr,
)
def test_the_database_enforces_each_ratings_own_rubric(two_rubrics, rubric, values):
    with pytest.raises(IntegrityError):
        _rating(two_rubrics, rubric, **values)


def test_values_valid_under_one_rubric_only_are_accepted_under_it(two_rubrics):
    _rating(two_rubrics, "pr4-1", conciseness=0.25, precision=1, recall=4)
    _rating(two_rubrics, "thumb-1.0", stage=2, precision=5, fluency=0.3, inclusive=2.0)
    with pytest.raises(IntegrityError), two_rubrics.begin() as connection:  # on update too
        connection.execute(text("UPDATE rating SET precision = 5 WHERE rubric = 'pr4-1'"))


def test_a_changed_rubric_file_needs_a_new_version(engine):
    with engine.begin() as connection:
        register_rubric(connection, THUMB_1_0)  # the same: nothing to do
    with engine.begin() as connection:
        register_rubric(connection, PR4, choose=True)
    assert project_rubric(engine) == PR4
    weights = dict(PR4.definition) | {"total": {"precision_weight": 0.5,
                                                "recall_weight": 0.5}}
    with pytest.raises(ValueError, match="different rubric pr4-1; a changed rubric file "
                                         "needs a new version"), engine.begin() as connection:
        register_rubric(connection, parse_rubric(weights))
    assert set(stored_rubrics(engine)) == {"thumb-1.0", "pr4-1"}


def test_import_under_the_second_rubric(engine, tmp_path):
    image = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(image)
    good = tmp_path / "good.csv"
    good.write_text(
        "image,system,caption,annotator,stage,precision,recall,conciseness\n"
        "a.png,S1,A dog.,ann,1,4,2,0.25\n"
        "a.png,S2,A cat.,ann,1,1,4,0\n", encoding="utf-8")
    import_captions(engine, good, actor="t", rubric=PR4)
    assert project_rubric(engine).signature == "pr4-1"
    finals = final_scores(engine).set_index("system")
    assert finals.loc["S1", "total"] == pytest.approx(0.7 * 4 + 0.3 * 2 - 0.25)
    assert (finals["rubric"] == "pr4-1").all()
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "image,system,caption,annotator,stage,precision,recall,conciseness,fluency\n"
        "a.png,S3,A cow.,ann,1,5,2,0.5,0.1\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        import_captions(engine, bad, actor="t")  # the project's rubric is now pr4-1
    message = str(refused.value)
    assert "precision must be a whole number from 1 to 4" in message
    assert "rubric pr4-1 has no fluency penalty" in message
    assert "conciseness penalty must be one of 0, 0.25" in message


def _pr4_ratings(tmp_path: Path, skip_image: str) -> Path:
    """The sample project's example ratings moved onto PR-4's scale (scores above 4 become
    4, THUMB's 0.5 conciseness becomes 0.25, no fluency or inclusive penalty), without the
    image rated on the screens."""
    with (SAMPLE_CSV.parent / "example_ratings.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["image_id"] != skip_image]
    out = tmp_path / "pr4_ratings.csv"
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image_id", "system", "caption",
                                                    "annotator", "stage", "precision",
                                                    "recall", "conciseness"])
        writer.writeheader()
        for row in rows:
            writer.writerow({
                **{k: row[k] for k in ("image_id", "system", "caption", "annotator", "stage")},
                "precision": min(int(row["precision"]), 4),
                "recall": min(int(row["recall"]), 4),
                "conciseness": 0.25 if row["conciseness"] else 0,
            })
    return out


@pytest.mark.slow
async def test_the_second_rubric_end_to_end(tmp_path):
    """Import under PR-4, rate an image on the annotate screen, review it on the review
    screen, import the rest; agreement, export and the report use PR-4's names, scales,
    weights and only its penalty."""
    db = str(tmp_path / "pr4.db")
    rubric_file = str(Path(__file__).parent / "rubrics" / "pr4-1.toml")
    imported = runner.invoke(cli, ["--db", db, "import", str(SAMPLE_CSV), "--rubric",
                                   rubric_file])
    assert imported.exit_code == 0, imported.output
    engine = open_database(db)
    seeds = itertools.count(1000)
    alice = AnnotationSession(engine, "alice", seed_source=lambda: next(seeds))
    assert alice.rubric == PR4
    app = ThumbApp(alice, "none")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.pause()
        shown = screen_text(app)
        assert " 1-4  score A/V " in shown and " ←→  A/V " in shown
        assert " f  fluency " not in shown and " i  inclusive " not in shown
        assert " c  wordiness " in shown  # the rubric's label of its penalty
        assert " A - " in shown and " V - " in shown and " F -" not in shown
        await pilot.press("5")  # above PR-4's scale: no such key here
        assert screen.groups[0].values["precision"] is None
        await pilot.press("4", "2", "c", "f", "i")  # c acts on the caption just scored
        for _ in screen.groups[1:]:
            await pilot.press("3", "3")
        groups = list(screen.groups)
        image_key = alice.images[screen.image_index].key
        assert "W 0.25" in screen_text(app)
    assert groups[0].values["conciseness"] == 0.25
    assert groups[0].values["conciseness_type"] == "wordy"
    assert all(g.values["fluency"] == 0 and g.values["inclusive"] == 0 for g in groups)
    assert groups[0].total(PR4) == pytest.approx(0.7 * 4 + 0.3 * 2 - 0.25)

    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: next(seeds))
    review = ThumbApp(screen=ReviewScreen(bob, "none"))
    async with review.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert bob.images[review.screen.image_index].key == image_key
        assert "stage 1: A 4  V 2  W 0.25" in screen_text(review)
        await pilot.press("3")  # bob lowers the first caption's accuracy to 3
        await pilot.press("A")  # and accepts the rest as they are
    import_captions(engine, _pr4_ratings(tmp_path, image_key), actor="t")

    ratings = ratings_frame(engine)
    assert set(ratings["rubric"]) == {"pr4-1"}
    assert fluency_queue(engine) == []  # PR-4 has no fluency to check
    assert ratings["precision"].max() == 4 and set(ratings["fluency"]) == {0.0}
    finals = final_scores(engine)
    assert len(finals) == 60
    expected = 0.7 * finals["precision"] + 0.3 * finals["recall"] - finals["conciseness"]
    assert finals["total"].to_numpy() == pytest.approx(expected.to_numpy())

    agreement = runner.invoke(cli, ["--db", db, "agreement", "--bootstrap", "0"])
    assert agreement.exit_code == 0, agreement.output
    assert re.search(r"statistic +A +V +Total\n", agreement.output)  # no fluency>0 column
    assert "fluency" not in agreement.output
    assert "A    1    2    3    4    V    1    2    3    4\n" in agreement.output  # 1-4 only
    assert '"alice" & "bob": 4 captions, 1 image' in agreement.output
    records = agreement_report(engine, bootstrap=0)
    assert set(records["dimension"]) == {"precision", "recall", "total",
                                         *(f for f in records["dimension"] if ":" in f)}
    confusion = records[records["statistic"].str.startswith("confusion:")]
    assert all(float(c.split("->")[0]) <= 4 for c in
               confusion["statistic"].str.removeprefix("confusion:"))

    out = tmp_path / "export.jsonl"
    assert runner.invoke(cli, ["--db", db, "export", "--format", "jsonl", "--out",
                               str(out)]).exit_code == 0
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert {"precision", "recall", "conciseness", "conciseness_type"} <= set(first)
    assert not {"fluency", "inclusive", "fluency_round"} & set(first)
    assert first["rubric"] == "pr4-1"

    compute_metrics(engine, ["bleu"], MetricOptions(tokenizer="ptb-python"))
    report = build_report(engine, bootstrap=0)
    assert report.rubric == PR4
    assert list(report.table4.columns) == ["metric", "subset", "A", "V", "Total"]
    markdown = write_report(report, tmp_path / "report", "md").read_text(encoding="utf-8")
    # bootstrap 0: no CI, so none is promised in the heading
    assert re.search(r"\| system +\| +n \| +A \| +V \| +Wrd \| +Total \|", markdown)
    assert "Strictly best / worst in both A and V" in markdown
    assert "pr4-1" in markdown
