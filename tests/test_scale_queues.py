"""The project-wide queues read once per command: the reviewed stage-1 ratings read only
where stage 2 has been, the disagreements read once with their `resolved` flag, and the
pairs that agreement compares built column by column, on a project imported midway
through the protocol."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from storage import import_captions, open_database
from storage.models import Caption
from storage.rating.dashboard import dashboard, pipeline_stages, work_for
from storage.rating.project_queues import disagreements, fluency_queue, primary_first_ratings
from storage.rating.rating_frames import rating_pairs
from tests.conftest import SAMPLE_CSV

IMAGES = sorted((SAMPLE_CSV.parent / "images").glob("*.png"))[:4]
SYSTEMS = ("Human", "Show-Tell", "Up-Down")


def ratings_csv(folder: Path) -> Path:
    """Four images of three captions: image 0 double-rated blind (a1, then a3), reviewed by
    a2 with one caption changed and resolved by a4 (reasons given); image 1 reviewed with
    one caption changed, a final rating without reasons (resolution begun); image 2
    reviewed unchanged; image 3 at stage 1 only. Its first two captions are identical."""
    (folder / "images").mkdir()
    rows = []
    for index, image in enumerate(IMAGES):
        shutil.copy(image, folder / "images" / image.name)
        for number, system in enumerate(SYSTEMS):
            caption = f"A scene {index}." if number < 2 and index == 3 else f"{system} {index}."
            base = {"image": f"images/{image.name}", "system": system, "caption": caption,
                    "double_rating": "true" if index == 0 else "false", "recall": 3,
                    "native_english": "false"}
            rows.append({**base, "annotator": "a1", "stage": "1", "precision": 4,
                         "created_at": f"2026-01-01T00:0{index}:00"})
            if index == 0:
                rows.append({**base, "annotator": "a3", "stage": "1", "precision": 2,
                             "created_at": f"2026-01-01T00:0{index}:30"})
            if index == 3:
                continue
            changed = number == 0 and index < 2
            rows.append({**base, "annotator": "a2", "stage": "2",
                         "precision": 1 if changed else 4, "created_at": "2026-01-02T00:00:00"})
            if changed:
                rows.append({**base, "annotator": "a4", "stage": "final", "precision": 2,
                             "created_at": "2026-01-03T00:00:00",
                             "resolution_reasons": "both-wrong" if index == 0 else ""})
    path = folder / "ratings.csv"
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, ["image", "system", "caption", "double_rating",
                                      "annotator", "stage", "precision", "recall",
                                      "created_at", "native_english", "resolution_reasons"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def midway(tmp_path: Path) -> Engine:
    engine = open_database(tmp_path / "project.db")
    import_captions(engine, ratings_csv(tmp_path), actor="lead")
    return engine


def test_reviewed_primary_ratings_are_those_of_reviewed_images(midway: Engine) -> None:
    """Restricted to images with a review, the reviewed ratings are the same ones: a1's
    (the first stage-1 annotator) on the three reviewed images, none on image 3."""
    with midway.connect() as connection:
        every = primary_first_ratings(connection)
        reviewed = primary_first_ratings(connection, reviewed=True)
    assert len(every) == 12 and len(reviewed) == 9
    assert reviewed == {caption: rating for caption, rating in every.items()
                        if caption in reviewed}
    assert {rating["image_id"] for rating in every.values()} - {
        rating["image_id"] for rating in reviewed.values()} == {4}
    assert all(rating["precision"] == 4 for rating in reviewed.values())  # a1's, not a3's


def test_disagreements_carry_whether_they_are_resolved(midway: Engine) -> None:
    everything = disagreements(midway, include_resolved=True)
    assert [(item.text, item.resolved) for item in everything] == [
        ("Human 0.", True), ("Human 1.", False)]  # P 4 vs 1 on both: in the order found
    assert disagreements(midway) == [everything[1]]
    # the resolver may not settle what they rated or reviewed
    assert disagreements(midway, resolver="a2") == []
    assert disagreements(midway, resolver="a1") == []
    assert disagreements(midway, resolver="a4") == [everything[1]]
    assert disagreements(midway, include_resolved=True, resolver="a5") == everything


def test_status_counts_each_queue_from_one_read(midway: Engine) -> None:
    """The pipeline's resolution row and each annotator's work agree with the queues."""
    resolution = next(stage for stage in pipeline_stages(midway)
                      if stage.stage == "resolution")
    # one open (its final rating begun, no reasons yet), one resolved
    assert (resolution.waiting, resolution.in_progress, resolution.done) == (0, 1, 1)
    board = dashboard(midway)
    work = {person.name: person.waiting for person in board.annotators}
    assert work == {name: work_for(midway, name) for name in ("a1", "a2", "a3", "a4")}
    resolve = {name: sum(item.count for item in items if item.command == "resolve")
               for name, items in work.items()}
    assert resolve == {"a1": 0, "a2": 0, "a3": 1, "a4": 1}  # a3 rated image 0 only
    assert next(stage for stage in board.stages if stage.stage == "fluency round").waiting \
        == len(fluency_queue(midway)) == 9


def test_rating_pairs_of_a_midway_project(midway: Engine) -> None:
    """Blind pairs: image 0's three captions, a1 and a3 in name order; stage 1 vs stage 2:
    each reviewed caption, a1's rating against a2's review."""
    pairs = rating_pairs(midway, ["precision", "recall"])
    caption = Caption.__table__
    with midway.connect() as connection:  # (ids are drawn at random; pairs come in import order)
        imported = connection.execute(select(caption.c.id).order_by(caption.c.import_order)
                                      ).scalars().all()
    blind = pairs[pairs["kind"] == "blind"]
    assert blind["caption_id"].tolist() == imported[:3]
    assert blind[["annotator_a", "annotator_b", "precision_a", "precision_b"]
                 ].drop_duplicates().values.tolist() == [["a1", "a3", 4.0, 2.0]]
    reviews = pairs[pairs["kind"] == "stage1-vs-stage2"]
    assert reviews["caption_id"].tolist() == imported[:9]
    assert set(zip(reviews["annotator_a"], reviews["annotator_b"], strict=True)) == {
        ("a1", "a2")}
    assert reviews["precision_b"].tolist() == [1.0, 4.0, 4.0, 1.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    assert pairs.columns.tolist() == ["kind", "caption_id", "image", "annotator_a",
                                      "annotator_b", "precision_a", "precision_b",
                                      "recall_a", "recall_b"]
