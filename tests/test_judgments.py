"""Judgment sets: import (score and pairwise, references, all or nothing with file:line),
the database's own checks, and CIDEr-D's corpus for captions without systems."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import select

from metrics.base import CaptionItem
from metrics.signature import parse_signature
from metrics.text.cider import CiderD
from metrics.text.tokenize import java_available
from storage import InputError, open_database
from storage.imports.judgment_import import Scale, import_judgments
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


@pytest.mark.slow
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
    # issue #26: line 1's bad choice does not hide that j judged the pair again at line 3
    assert f"{bad}:3: judge 'j' already judged this pair at line 1" in message
    assert (f"{bad}:4: category 'hm' differs from (none given) at line 1 for the same pair"
            in message)
    assert f"{bad}:5: caption_a is missing" in message
    assert database_dump(engine) == before


@pytest.mark.parametrize("kind", ["score", "pairwise"])
def test_a_control_character_is_reported_with_every_other_problem(engine, tmp_path, kind):
    """A text the reader refuses (here an escape sequence) leaves its row out, and the
    rows' own problems are still found in the same pass, as `thumb import` does."""
    if kind == "score":
        text = ("image_id,caption,judge,score\n1,A cat.,j1,3\n1,A cat.,j1,4\n2,A dog.,j1,7\n"
                "3,,j2,2\n5,A \x1b[2Jcat.,j2,2\n")
        expected = ["3: judge 'j1' already judged this caption at line 2",
                    "4: score must be on the scale 1-4 (whole numbers), not '7'",
                    "5: caption is missing"]
    else:
        text = ("image_id,caption_a,caption_b,judge,choice\n1,A,B,j1,a\n1,B,A,j1,b\n"
                "2,A,A,j1,a\n3,A,B,j2,left\n5,A \x1b[2J,B,j2,a\n")
        expected = ["3: judge 'j1' already judged this pair at line 2",
                    "4: caption_a and caption_b are the same caption",
                    "5: choice must be a, b or tie, not 'left'"]
    bad = write(tmp_path / "bad.csv", text)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="bad", kind=kind, actor="t",
                         scale=Scale.parse("1-4") if kind == "score" else None)
    caption = "caption" if kind == "score" else "caption_a"
    assert str(caught.value).splitlines() == [
        *(f"{bad}:{line}" for line in expected),
        f"{bad}:6: {caption}: control character U+001B is not allowed (only tab and newline "
        "are)"]


def test_the_references_problems_are_listed_with_the_judgments_ones(engine, tmp_path):
    bad = write(tmp_path / "bad.csv",
                SCORES.replace("1,A cat sleeps.,j2,2", "1,A cat sleeps.,j2,5"))
    references = write(tmp_path / "refs.csv", "image_id,reference\n1,A \x1b[2Jdog.\n2,\n")
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="likert", kind="score", scale=Scale.parse("1-4"),
                         references=references, actor="t")
    assert str(caught.value).splitlines() == [
        f"{bad}:6: score must be on the scale 1-4 (whole numbers), not '5'",
        f"{references}:2: reference: control character U+001B is not allowed (only tab and "
        "newline are)",
        f"{references}:3: reference is missing"]


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


# Texts as a caption dataset releases them: a final single letter, abbreviations ("St.",
# "ave."), no final period, a space before the period, lower- and upper-case starts.
RAW_REFERENCES = {
    "img1": ["a sign for main st.", "A street sign at the corner of Main St.",
             "a green street sign on a pole", "the street sign says main st"],
    "img2": ["the letter a on a red sign", "A red sign with a white letter a.",
             "a sign showing the letter a", "a large letter a painted on a wall"],
    "img3": ["a dog runs on the beach .", "A brown dog running along the shore.",
             "a dog on a sandy beach", "the dog is running near the water"],
    "img4": ["a bus on St. Mark's square", "A red bus parked on a city street.",
             "a double decker bus near a church", "the bus is stopped at St. Mark st."],
    "img5": ["a bottle of vitamin c", "A vitamin c bottle on a table.",
             "a jar of vitamins on a kitchen counter", "a bottle labeled vitamin c"],
    "img6": ["a man wearing a shirt with the letter x on it",
             "A man in a shirt that has an X on it.", "a person wearing a black t-shirt",
             "the man's shirt shows a big x in white"],
    "img7": ["two people walking down 5th ave.", "Pedestrians on a busy avenue in New York.",
             "people walking on a city sidewalk", "a crowd on fifth avenue"],
    "img8": ["a train at the station", "A yellow train pulling into a station.",
             "a train stopped at platform b", "the train is at a platform in the station"],
}
RAW_CAPTIONS = {
    "img1": ["a street sign for main st.", "A sign on a pole",
             "a street sign that says main st ."],
    "img2": ["the letter a on a sign", "a red sign with the letter a",
             "A sign with a letter ."],
    "img3": ["a dog on a beach .", "A dog running on the sand", "a brown dog near the water."],
    "img4": ["a red bus on st. mark street", "A bus parked near a church .",
             "a bus in the city"],
    "img5": ["a small bottle of vitamin c", "A jar on a table .", "vitamin c on the counter"],
    "img6": ["a man in a shirt with a big x", "A person in a black shirt.",
             "a man wearing a t-shirt"],
    "img7": ["people walking down 5th ave.", "A busy city sidewalk",
             "a crowd of people on the street ."],
    "img8": ["a train at platform b", "A yellow train at the station .", "a train"],
}
COCO_METRICS = ("coco-bleu-1", "coco-bleu-2", "coco-bleu-3", "coco-bleu-4", "coco-rouge-l",
                "meteor", "cider-d")


def pycocoevalcap_scores(captions: list[str], references: list[list[str]]
                         ) -> dict[str, np.ndarray]:
    """Per-caption scores as pycocoevalcap's COCOEvalCap computes them: its PTBTokenizer
    on every reference in one call and every caption in another, then Bleu, Rouge, Meteor
    and Cider, each over all captions at once (Cider's document frequencies: this set)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": r} for r in refs]
                              for i, refs in enumerate(references)})
    res = tokenizer.tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    _, bleu = Bleu(4).compute_score(gts, res, verbose=0)
    scores = {f"coco-bleu-{n}": bleu[n - 1] for n in (1, 2, 3, 4)}
    scores["coco-rouge-l"] = Rouge().compute_score(gts, res)[1]
    meteor = Meteor()
    scores["meteor"] = meteor.compute_score(gts, res)[1]
    del meteor  # stops the Java process
    scores["cider-d"] = Cider().compute_score(gts, res)[1]
    return {name: np.asarray(values, dtype=float) for name, values in scores.items()}


def stored_scores(engine, name: str) -> dict[str, dict[tuple[str, str], float]]:
    """signature -> {(image key, caption text): stored score} of a judgment set."""
    from storage.judgments import judgment_caption_rows, judgment_metric_scores, judgment_set

    set_id = judgment_set(engine, name).id
    captions, _ = judgment_caption_rows(engine, set_id)
    pair = {row.caption_id: (row.image_key, row.text) for row in captions}
    scores: dict[str, dict[tuple[str, str], float]] = {}
    for row in judgment_metric_scores(engine, set_id).itertuples():
        scores.setdefault(row.signature, {})[pair[row.caption_id]] = row.value
    return scores


@pytest.mark.slow
@pytest.mark.skipif(not java_available(), reason="Java or pycocoevalcap missing")
def test_literature_metrics_on_a_judgment_set_see_the_texts_as_released(tmp_path):
    """coco-BLEU-1..4, coco-ROUGE-L, METEOR and CIDEr-D of a judgment set equal
    pycocoevalcap run directly on the raw texts; THUMB's clean-up (`--clean thumb`)
    changes some of them."""
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    rows = [{"image_id": image, "caption_id": f"{image}-{k}", "caption": caption,
             "judge": judge, "score": 1 + (k + len(judge)) % 4}
            for image, captions in RAW_CAPTIONS.items()
            for k, caption in enumerate(captions) for judge in ("j1", "j22")]
    pd.DataFrame(rows).to_csv(tmp_path / "raw.csv", index=False)
    pd.DataFrame([{"image_id": image, "reference": r} for image, refs in RAW_REFERENCES.items()
                  for r in refs]).to_csv(tmp_path / "refs.csv", index=False)
    db = ["--db", str(tmp_path / "raw.db")]
    metrics = [option for metric in COCO_METRICS for option in ("--metric", metric)]
    runner = CliRunner()
    for step in (["judgments", "import", str(tmp_path / "raw.csv"), "--name", "raw",
                  "--scale", "1-4", "--references", str(tmp_path / "refs.csv")],
                 ["metrics", "compute", "--judgments", "raw", *metrics, "--tokenizer",
                  "ptb-java"],
                 ["metrics", "compute", "--judgments", "raw", *metrics, "--tokenizer",
                  "ptb-java", "--clean", "thumb"]):
        result = runner.invoke(app, [*db, *step])
        assert result.exit_code == 0, result.output
    pairs = [(image, caption) for image, captions in RAW_CAPTIONS.items()
             for caption in captions]
    expected = pycocoevalcap_scores([caption for _, caption in pairs],
                                    [RAW_REFERENCES[image] for image, _ in pairs])
    engine = open_database(tmp_path / "raw.db")
    stored = stored_scores(engine, "raw")
    engine.dispose()
    assert len(stored) == 2 * len(COCO_METRICS)
    changed = {}
    for signature, scores in stored.items():
        fields = parse_signature(signature)
        assert fields["self"] == {"none": "excluded-exact", "thumb": "excluded"}[
            fields["clean"]] and "nrefs" not in fields
        ours = np.array([scores[pair] for pair in pairs])
        difference = np.abs(ours - expected[fields["metric"]])
        if fields["metric"] == "cider-d":
            assert fields["corpus"].startswith("pooled#")  # the set's captions, as above
        if fields["clean"] == "none":
            # METEOR's scores are the numbers its jar prints: the same on both sides
            assert int((difference > 1e-12).sum()) == 0, (signature, difference.max())
        else:
            assert fields["clean"] == "thumb"
            changed[fields["metric"]] = int((difference > 1e-12).sum())
    # THUMB's clean-up adds a final period, which PTB keeps after a single letter ("x.",
    # no longer the references' "x"), and so changes the document frequencies of CIDEr-D
    assert changed["coco-bleu-1"] >= 1 and changed["meteor"] >= 1, changed
    assert changed["cider-d"] >= 1, changed


PAIRS_OF_IDS = """image_id,caption_id,caption,judge,score
1,s7,a dog on the grass,j1,4
2,s7,a dog on the grass,j1,1
3,s7,a dog on the grass,j1,2
2,s8,two bikes,j1,3
"""


def test_a_caption_id_may_be_judged_under_several_images(engine, tmp_path):
    summary = import_judgments(engine, write(tmp_path / "p.csv", PAIRS_OF_IDS), name="p",
                               kind="score", scale=Scale.parse("1-4"), actor="t")
    assert (summary.images, summary.captions, summary.judgments) == (3, 4, 4)
    with engine.connect() as connection:
        stored = connection.execute(select(
            JudgmentImage.__table__.c.key, JudgmentCaption.__table__.c.external_id,
            JudgmentCaption.__table__.c.text).join(
            JudgmentImage.__table__,
            JudgmentImage.__table__.c.id == JudgmentCaption.__table__.c.image_id).order_by(
            JudgmentCaption.__table__.c.id)).all()
    assert [tuple(row) for row in stored] == [
        ("1", "s7", "a dog on the grass"), ("2", "s7", "a dog on the grass"),
        ("3", "s7", "a dog on the grass"), ("2", "s8", "two bikes")]
    bad = write(tmp_path / "bad.csv", PAIRS_OF_IDS + "2,s7,another sentence,j2,3\n"
                                                     "3,s7,a dog on the grass,j1,4\n")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="bad", kind="score", scale=Scale.parse("1-4"),
                         actor="t")
    message = str(caught.value)
    assert f"{bad}:6: caption_id 's7' is another caption of image '2' at line 3" in message
    assert f"{bad}:7: judge 'j1' already judged this caption at line 4" in message
    assert database_dump(engine) == before
    # the database holds a caption id once per image, not once per set
    with engine.connect() as connection:
        first = connection.execute(select(JudgmentCaption.__table__)).first()
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        connection.execute(JudgmentCaption.__table__.insert().values(
            set_id=first.set_id, image_id=first.image_id, text="x", external_id="s7"))


def test_references_carry_their_ids(engine, tmp_path):
    refs = write(tmp_path / "refs.csv", "image_id,reference_id,reference\n"
                                        "1,r1,A dog on grass.\n1,,A brown dog.\n"
                                        "2,r1,People cycling.\n")
    import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="ids", kind="score",
                     scale=Scale.parse("1-4"), references=refs, actor="t")
    with engine.connect() as connection:
        ids = connection.execute(select(JudgmentReference.__table__.c.external_id).order_by(
            JudgmentReference.__table__.c.id)).scalars().all()
    assert ids == ["r1", None, "r1"]
    repeated = write(tmp_path / "rep.csv", "image_id,reference_id,reference\n"
                                           "1,r1,A dog.\n1,r1,A cat.\n2,r2,Bikes.\n")
    with pytest.raises(InputError, match=r"rep\.csv:3: reference_id 'r1' of image '1' is "
                                         r"given already at line 2"):
        import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="rep",
                         kind="score", scale=Scale.parse("1-4"), references=repeated,
                         actor="t")
    coco = write(tmp_path / "captions.json", json.dumps({"annotations": [
        {"id": 10, "image_id": 1, "caption": "A dog."},
        {"id": 11, "image_id": 2, "caption": "Bikes."}]}))
    import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="coco", kind="score",
                     scale=Scale.parse("1-4"), references=coco, actor="t")
    with engine.connect() as connection:
        ids = connection.execute(select(JudgmentReference.__table__.c.external_id).order_by(
            JudgmentReference.__table__.c.id)).scalars().all()
    assert ids[-2:] == ["10", "11"]
    # COCO files are one line: a repeated id there is found by id, not by line
    minified = write(tmp_path / "minified.json", json.dumps({"annotations": [
        {"id": 1, "image_id": 1, "caption": "A dog."},
        {"id": 1, "image_id": 1, "caption": "A dog at play."}]}))
    with pytest.raises(InputError, match=r"minified\.json:1: reference_id '1' of image '1' "
                                         r"is given already at line 1"):
        import_judgments(engine, write(tmp_path / "j.csv", SCORES), name="minified",
                         kind="score", scale=Scale.parse("1-4"), references=minified,
                         actor="t")


CROWD = """image_id,caption_id,caption,judge,score
1,c1,a dog on the grass,crowd,0.3333333333333333
1,c2,a cat,crowd,0
2,c1,a dog on the grass,crowd,1
2,c3,two bikes,crowd,0.6666666666666666
2,c4,a bike,crowd,1e-3
"""


def test_a_continuous_scale_takes_any_real_number_in_its_range(engine, tmp_path):
    crowd = write(tmp_path / "crowd.csv", CROWD)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, crowd, name="whole", kind="score", scale=Scale.parse("0-1"),
                         actor="t")
    assert (f"{crowd}:2: score must be on the scale 0-1 (whole numbers), not "
            "'0.3333333333333333'") in str(caught.value)
    summary = import_judgments(engine, crowd, name="crowd", kind="score",
                               scale=Scale.parse("0-1", step=0), actor="t")
    assert summary.judgments == 5
    with engine.connect() as connection:
        scores = connection.execute(select(JudgmentScore.__table__.c.score).order_by(
            JudgmentScore.__table__.c.id)).scalars().all()
        step = connection.execute(select(JudgmentSet.__table__.c.scale_step)).scalar()
    assert scores == [1 / 3, 0.0, 1.0, 2 / 3, 0.001] and step == 0
    assert str(Scale.parse("0-1", step=0)) == "0-1 (continuous)"


def test_a_continuous_scale_still_refuses_what_is_not_a_number_in_its_range(engine,
                                                                             tmp_path):
    bad = write(tmp_path / "bad.csv", "image_id,caption,judge,score\n"
                "1,a,j,nan\n1,b,j,inf\n1,c,j,-inf\n1,d,j,1.5\n1,e,j,-0.1\n1,f,j,0.3.3\n"
                "1,g,j,\n1,h,j,1/3\n1,i,j,0.25\n")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, bad, name="bad", kind="score",
                         scale=Scale.parse("0-1", step=0), actor="t")
    message = str(caught.value)
    for line, problem in ((2, "score must be a finite number, not 'nan'"),
                          (3, "score must be a finite number, not 'inf'"),
                          (4, "score must be a finite number, not '-inf'"),
                          (5, "score must be on the scale 0-1 (continuous), not '1.5'"),
                          (6, "score must be on the scale 0-1 (continuous), not '-0.1'"),
                          (7, "score must be a number, not '0.3.3'"),
                          (8, "score is missing"),
                          (9, "score must be a number, not '1/3'")):
        assert f"{bad}:{line}: {problem}" in message
    assert f"{bad}:10:" not in message
    assert database_dump(engine) == before


def test_the_database_holds_a_continuous_set_to_its_range(engine, tmp_path):
    import_judgments(engine, write(tmp_path / "crowd.csv", CROWD), name="crowd",
                     kind="score", scale=Scale.parse("0-1", step=0), actor="t")
    with engine.connect() as connection:
        caption = connection.execute(select(JudgmentCaption.__table__)).first()
    good = {"set_id": caption.set_id, "caption_id": caption.id, "judge": "db",
            "score": 0.123456789, "scale_min": 0.0, "scale_max": 1.0, "scale_step": 0.0}
    for change in ({"score": 1.5}, {"score": -0.01}, {"score": float("inf")},
                   {"score": float("-inf")}, {"score": float("nan")},
                   {"scale_max": 2.0, "score": 1.5},  # not the set's scale
                   {"scale_step": 1.0, "score": 0.5}):
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
            connection.execute(JudgmentScore.__table__.insert().values(**{**good, **change}))
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as connection:
        connection.execute(JudgmentSet.__table__.insert().values(
            name="quarters", kind="score", scale_min=0, scale_max=1, scale_step=0.25,
            source="x", created_at=JudgmentSet().created_at))
    with engine.begin() as connection:
        connection.execute(JudgmentScore.__table__.insert().values(**good))
        connection.execute(JudgmentScore.__table__.insert().values(
            **{**good, "judge": "db2", "score": 1.0}))


@pytest.mark.slow
def test_cli_continuous_option(tmp_path):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    runner = CliRunner()
    crowd = write(tmp_path / "crowd.csv", CROWD)
    db = ["--db", str(tmp_path / "c.db")]
    both = runner.invoke(app, [*db, "judgments", "import", str(crowd), "--name", "c",
                               "--scale", "0-1", "--continuous", "--halves"])
    assert both.exit_code == 2 and "exclude each other" in both.output
    alone = runner.invoke(app, [*db, "judgments", "import", str(crowd), "--name", "c",
                                "--continuous"])
    assert alone.exit_code == 2 and "--continuous needs --scale" in alone.output
    bad = write(tmp_path / "bad.csv", CROWD + "2,c5,a car,crowd,1.0001\n")
    refused = runner.invoke(app, [*db, "judgments", "import", str(bad), "--name", "c",
                                  "--scale", "0-1", "--continuous"])
    assert refused.exit_code == 2
    assert f"{bad}:7: score must be on the scale 0-1 (continuous), not '1.0001'" in (
        refused.output)
    assert not (tmp_path / "c.db").exists()
    done = runner.invoke(app, [*db, "judgments", "import", str(crowd), "--name", "c",
                               "--scale", "0-1", "--continuous"])
    assert done.exit_code == 0, done.output
    listed = runner.invoke(app, [*db, "judgments", "list"])
    assert "scale 0-1 (continuous)" in listed.output
    assert "--continuous" in runner.invoke(app, ["judgments", "import", "--help"]).output


def test_the_project_keeps_thumb_clean_up_and_its_signature_says_so(tmp_path):
    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    runner = CliRunner()
    db = ["--db", str(tmp_path / "p.db")]
    assert runner.invoke(app, [*db, "import", str(SAMPLE_CSV)]).exit_code == 0
    thumb = runner.invoke(app, [*db, "metrics", "compute", "--metric", "bleu"])
    assert thumb.exit_code == 0, thumb.output
    assert "|clean:thumb|" in thumb.output and "computed 60" in thumb.output
    again = runner.invoke(app, [*db, "metrics", "compute", "--metric", "bleu", "--clean",
                                "thumb"])
    assert "computed 0, reused 60" in again.output  # the same signature as the default
    raw = runner.invoke(app, [*db, "metrics", "compute", "--metric", "bleu", "--clean",
                              "none"])
    assert raw.exit_code == 0 and "|clean:none|" in raw.output and "computed 60" in raw.output
    bad = runner.invoke(app, [*db, "metrics", "compute", "--clean", "nfkc"])
    assert bad.exit_code == 2 and "--clean must be thumb or none, not 'nfkc'" in bad.output
