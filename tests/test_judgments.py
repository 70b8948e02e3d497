"""Judgment sets: import (score and pairwise, references, all or nothing with file:line),
the database's own checks, and CIDEr-D's corpus for captions without systems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import select

from metrics.base import CaptionItem
from metrics.cider import CiderD
from metrics.signature import parse_signature
from storage import InputError
from storage.judgment_import import Scale, import_judgments
from storage.models import (
    JudgmentCaption,
    JudgmentImage,
    JudgmentPair,
    JudgmentReference,
    JudgmentScore,
    JudgmentSet,
)
from tests.conftest import ROOT, database_dump

SAMPLE = ROOT / "sample_data"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


SCORES = """image_id,caption,judge,score
1,A dog runs on the grass.,j1,4
1,A dog runs on the grass.,j2,3
1,A dog runs on the grass.,j3,4
1,A cat sleeps.,j1,1
1,A cat sleeps.,j2,2
1,A cat sleeps.,j3,1
2,Two people ride bikes.,j1,3
2,Two people ride bikes.,j2,3
2,Two people ride bikes.,j3,2
"""


def test_a_likert_set_needs_neither_images_nor_systems(engine, tmp_path):
    refs = write(tmp_path / "refs.csv", "image_id,reference\n1,A dog on grass.\n"
                                        "1,A brown dog running.\n2,People cycling.\n")
    summary = import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="likert",
                               kind="score", scale=Scale.parse("1-4"), references=refs,
                               actor="tester")
    assert (summary.images, summary.captions, summary.references, summary.judges,
            summary.judgments) == (2, 3, 3, 3, 9)
    with engine.connect() as connection:
        stored = connection.execute(select(JudgmentSet.__table__)).one()
        assert (stored.kind, stored.scale_min, stored.scale_max, stored.scale_step) == (
            "score", 1, 4, 1)
        assert connection.execute(select(JudgmentImage.__table__.c.path)).scalars().all() \
            == [None, None]
        assert set(connection.execute(select(JudgmentCaption.__table__.c.system)).scalars()) \
            == {None}
        scores = connection.execute(select(JudgmentScore.__table__.c.score)).scalars().all()
        assert sorted(scores) == [1, 1, 2, 2, 3, 3, 3, 4, 4]
        assert connection.execute(select(sa.func.count()).select_from(
            JudgmentReference.__table__)).scalar() == 3


def test_bad_rows_are_refused_with_file_and_line_and_nothing_is_written(engine, tmp_path):
    bad = write(tmp_path / "bad.csv", SCORES.replace("1,A cat sleeps.,j2,2", "1,A cat sleeps.,j2,5")
                .replace("2,Two people ride bikes.,j1,3", "2,,j1,3")
                .replace("1,A dog runs on the grass.,j3,4", "1,A dog runs on the grass.,j3,2.5")
                .replace("2,Two people ride bikes.,j3,2", "2,Two people ride bikes.,j2,2"))
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="likert", kind="score", scale=Scale.parse("1-4"),
                         actor="t")
    message = str(caught.value)
    assert f"{bad}:4: score must be on the scale 1-4 (whole numbers), not '2.5'" in message
    assert f"{bad}:6: score must be on the scale 1-4 (whole numbers), not '5'" in message
    assert f"{bad}:8: caption is missing" in message
    assert f"{bad}:10: judge 'j2' already judged this caption at line 9" in message
    assert database_dump(engine) == before


def test_halves_are_accepted_only_when_declared(engine, tmp_path):
    halves = write(tmp_path / "h.csv", "image_id,caption,judge,score\n1,A dog.,j1,2.5\n")
    with pytest.raises(InputError, match=r"h\.csv:2: score must be on the scale 1-5"):
        import_judgments(engine, halves, name="h", kind="score", scale=Scale.parse("1-5"),
                         actor="t")
    import_judgments(engine, halves, name="h", kind="score",
                     scale=Scale.parse("1-5", step=0.5), actor="t")
    with pytest.raises(InputError, match="named 'h' exists already"):
        import_judgments(engine, halves, name="h", kind="score",
                         scale=Scale.parse("1-5", step=0.5), actor="t")


@pytest.mark.parametrize(("text", "message"), [
    ("5-1", "minimum must be below its maximum"), ("1..5", "MIN-MAX"), ("a-b", "MIN-MAX")])
def test_scale_declarations_are_checked(text, message):
    with pytest.raises(ValueError, match=message):
        Scale.parse(text)


def test_the_database_refuses_scores_off_the_scale_and_pairs_in_score_sets(engine, tmp_path):
    import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="likert", kind="score",
                     scale=Scale.parse("1-4"), actor="t")
    with engine.connect() as connection:
        caption = connection.execute(select(JudgmentCaption.__table__)).first()
    good = {"set_id": caption.set_id, "caption_id": caption.id, "judge": "db",
            "score": 2.0, "scale_min": 1.0, "scale_max": 4.0, "scale_step": 1.0}
    for change in ({"score": 5.0}, {"score": 1.5}, {"scale_max": 9.0, "score": 7.0},
                   {"scale_step": 0.5, "score": 1.5}):
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
            connection.execute(JudgmentScore.__table__.insert().values(**{**good, **change}))
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        connection.execute(JudgmentPair.__table__.insert().values(
            set_id=caption.set_id, image_id=caption.image_id, caption_a_id=caption.id,
            caption_b_id=caption.id + 1, judge="db", choice="a"))
    with engine.begin() as connection:
        connection.execute(JudgmentScore.__table__.insert().values(**good))


PAIRS = """image_id,caption_a,caption_b,judge,choice,category
1,A dog runs.,A cat sleeps.,j1,a,human-machine
1,A dog runs.,A cat sleeps.,j2,b,human-machine
1,A cat sleeps.,A dog runs.,j3,tie,human-machine
2,Bikes.,Two people ride bikes.,j1,b,machine-machine
"""


def test_a_pairwise_set_and_its_refusals(engine, tmp_path):
    summary = import_judgments(engine, write(tmp_path / "p.csv", PAIRS), name="pairs",
                               kind="pairwise", actor="t")
    assert (summary.captions, summary.judgments) == (4, 4)
    with engine.connect() as connection:
        choices = connection.execute(select(JudgmentPair.__table__.c.choice)).scalars().all()
    assert sorted(choices) == ["a", "b", "b", "tie"]
    bad = write(tmp_path / "bad.jsonl", "\n".join(json.dumps(r) for r in [
        {"image_id": "1", "caption_a": "A", "caption_b": "B", "judge": "j", "choice": "left"},
        {"image_id": "1", "caption_a": "A", "caption_b": "A", "judge": "j", "choice": "a"},
        {"image_id": "1", "caption_a": "B", "caption_b": "A", "judge": "j", "choice": "a"},
        {"image_id": "1", "caption_a": "A", "caption_b": "B", "judge": "k", "choice": "a",
         "category": "hm"},
        {"image_id": "1", "caption_b": "B", "judge": "j", "choice": "a"},
    ]) + "\n")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="bad", kind="pairwise", actor="t")
    message = str(caught.value)
    assert f"{bad}:1: choice must be a, b or tie, not 'left'" in message
    assert f"{bad}:2: caption_a and caption_b are the same caption" in message
    assert f"{bad}:4: category 'hm' differs from line 3 for the same pair" in message
    assert f"{bad}:5: caption_a is missing" in message
    assert database_dump(engine) == before


def test_a_pairwise_file_imported_as_a_score_set_says_so(engine, tmp_path):
    with pytest.raises(InputError, match="use --kind pairwise"):
        import_judgments(engine, write(tmp_path / "p.csv", PAIRS), name="x", kind="score",
                         scale=Scale.parse("1-5"), actor="t")


def test_references_from_a_coco_captions_file_and_missing_ones(engine, tmp_path):
    coco = write(tmp_path / "captions.json", json.dumps({
        "images": [{"id": 1}, {"id": 2}],
        "annotations": [{"id": 10, "image_id": 1, "caption": "A dog on grass."},
                        {"id": 11, "image_id": 1, "caption": "A dog running."},
                        {"id": 12, "image_id": 3, "caption": "Elsewhere."}]}, indent=1))
    judgments = write(tmp_path / "j.csv", SCORES)
    with pytest.raises(InputError, match=r"j.csv:8: image '2' has no references in"):
        import_judgments(engine, judgments, name="s", kind="score",
                         scale=Scale.parse("1-4"), references=coco, actor="t")
    only_image_1 = write(tmp_path / "one.csv", SCORES.split("2,Two")[0])
    summary = import_judgments(engine, only_image_1, name="s", kind="score",
                               scale=Scale.parse("1-4"), references=coco, actor="t")
    assert summary.references == 2
    broken = write(tmp_path / "broken.json", '{"annotations": [\n{"id": 1, "image_id": 1},\n'
                                             '{"id": 2, "image_id": 1, "caption": "x"}]}')
    with pytest.raises(InputError, match=r"broken.json:2: missing key .caption."):
        import_judgments(engine, only_image_1, name="t", kind="score",
                         scale=Scale.parse("1-4"), references=broken, actor="t")


def test_the_sample_judgment_sets_import(engine):
    refs = SAMPLE / "references.csv"
    scores = import_judgments(engine, SAMPLE / "judgments.csv", name="likert", kind="score",
                              scale=Scale.parse("1-4"), references=refs, actor="t")
    pairs = import_judgments(engine, SAMPLE / "judgment_pairs.csv", name="pairs",
                             kind="pairwise", references=refs, actor="t")
    assert (scores.captions, scores.judges, scores.judgments) == (60, 3, 180)
    assert pairs.judgments == 3 * 84


def test_cider_d_pools_the_corpus_when_captions_have_no_system():
    items = [CaptionItem(i, f"img{i % 3}", None, None, text, ("A dog on grass.", "A cat."))
             for i, text in enumerate(["A dog.", "A cat on grass.", "Grass.", "A dog and a cat."])]
    metric = CiderD(tokenizer="ptb-python")
    signature = parse_signature(metric.signature(items, "image"))
    assert signature["corpus"].startswith("pooled#")
    pooled = CiderD(corpus="pooled", tokenizer="ptb-python").score(items)
    assert (metric.score(items) == pooled).all()
    with_systems = [CaptionItem(i.caption_id, i.image_key, None, f"s{i.caption_id % 2}",
                                i.text, i.references) for i in items]
    assert parse_signature(metric.signature(with_systems, "image"))["corpus"].startswith(
        "per-system#")
