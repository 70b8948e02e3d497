"""BLEU, ROUGE-L and CIDEr-D against the reference implementations, caching, references."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from metrics.base import CaptionItem
from metrics.registry import MetricOptions
from metrics.signature import parse_signature
from metrics.text.bleu_rouge import Bleu, RougeL
from metrics.text.cider import CiderD, cider_d
from metrics.text.tokenize import java_available, tokenize_java, tokenize_python
from reports.scoring import compute_metrics, load_items
from storage import final_scores, import_captions, import_thumb, open_database
from storage.models import MetricScore
from tests.conftest import SAMPLE_CSV, THUMB_JSONL, THUMB_REFS, needs_anchors
from tests.image_files import good_png
from tests.ptb_cases import generated_captions

needs_java = pytest.mark.skipif(not java_available(), reason="Java or pycocoevalcap missing")


@pytest.fixture
def sample(tmp_path):
    engine = open_database(tmp_path / "m.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    return engine


def random_corpus(seed: int, size: int = 60) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    words = ["a", "the", "dog", "cat", "red", "ball", "two", "on", "of", "grass", "sky",
             "blue", "man", "runs", "big", "small"]

    def sentence() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))

    return [sentence() for _ in range(size)], [
        [sentence() for _ in range(rng.randint(1, 5))] for _ in range(size)
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cider_d_matches_pycocoevalcap_on_random_text(seed):
    from pycocoevalcap.cider.cider import Cider

    hyps, refs = random_corpus(seed)
    _, expected = Cider().compute_score(
        {i: r for i, r in enumerate(refs)}, {i: [h] for i, h in enumerate(hyps)}
    )
    np.testing.assert_allclose(cider_d(hyps, refs), expected, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_cider_d_matches_pycocoevalcap_on_the_sample_project(sample):
    from pycocoevalcap.cider.cider import Cider

    items, _ = load_items(sample)
    metric = CiderD(corpus="pooled", tokenizer="ptb-python")
    hyps, refs = metric._tokens(items)
    _, expected = Cider().compute_score(
        {i: r for i, r in enumerate(refs)}, {i: [h] for i, h in enumerate(hyps)}
    )
    np.testing.assert_allclose(metric.score(items), expected, atol=1e-6, rtol=0)


def raw_items(images: int, systems: int) -> list[CaptionItem]:
    """Captions and references straight from the hard tokenization cases."""
    texts = iter(generated_captions(images * (systems + 5), seed=7))
    items = []
    for image in range(images):
        refs = tuple(next(texts) for _ in range(5))
        items += [CaptionItem(len(items), str(image), None, f"s{system}", next(texts), refs)
                  for system in range(systems)]
    return items


@pytest.mark.slow
@needs_java
def test_cider_d_from_raw_text_equals_the_full_pycocoevalcap_path():
    """PTBTokenizer + Cider per system, against ours from the same raw texts."""
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    items = raw_items(images=60, systems=3)
    ours = CiderD(corpus="per-system", tokenizer="ptb-java").score(items)
    for system in ("s0", "s1", "s2"):
        index = [i for i, item in enumerate(items) if item.system == system]
        tokenizer = PTBTokenizer()
        refs = tokenizer.tokenize({i: [{"caption": r} for r in items[i].references]
                                   for i in index})
        hyps = tokenizer.tokenize({i: [{"caption": items[i].text}] for i in index})
        _, expected = Cider().compute_score(refs, hyps)
        np.testing.assert_allclose(ours[index], expected, atol=1e-9, rtol=0)


def test_systems_sharing_images_share_document_frequencies_and_score_as_alone():
    hyps, refs = random_corpus(3, size=40)
    both = cider_d(hyps * 2, refs * 2, corpus=[0] * 40 + [1] * 40)
    np.testing.assert_allclose(both[:40], cider_d(hyps, refs), atol=1e-12)
    np.testing.assert_allclose(both[40:], cider_d(hyps, refs), atol=1e-12)


@pytest.mark.parametrize("dense_idf_cells", [1 << 22, 0])
def test_each_corpus_gets_pycocoevalcaps_idf_from_the_dense_or_the_sparse_table(
        monkeypatch, dense_idf_cells):
    """Three corpora with their own references: idf read from a dense table (few corpora)
    or looked up in the sparse frequencies (many), the same scores as one `Cider` each."""
    from pycocoevalcap.cider.cider import Cider

    import metrics.text.cider as module

    monkeypatch.setattr(module, "DENSE_IDF_CELLS", dense_idf_cells)
    corpora = [random_corpus(seed, size=30) for seed in (4, 5, 6)]
    hyps = [h for corpus_hyps, _ in corpora for h in corpus_hyps]
    refs = [r for _, corpus_refs in corpora for r in corpus_refs]
    scores = cider_d(hyps, refs, corpus=[c for c in range(3) for _ in range(30)])
    for c, (corpus_hyps, corpus_refs) in enumerate(corpora):
        _, expected = Cider().compute_score(dict(enumerate(corpus_refs)),
                                            {i: [h] for i, h in enumerate(corpus_hyps)})
        np.testing.assert_allclose(scores[30 * c:30 * (c + 1)], expected, atol=1e-9, rtol=0)


def test_per_system_corpus_scores_each_system_on_its_own(sample):
    items, _ = load_items(sample)
    per_system = CiderD(corpus="per-system", tokenizer="ptb-python").score(items)
    one = [i for i, item in enumerate(items) if item.system == "Human"]
    alone = CiderD(corpus="pooled", tokenizer="ptb-python").score([items[i] for i in one])
    np.testing.assert_allclose(per_system[one], alone)


def test_bleu_and_rouge_match_the_libraries(sample):
    import sacrebleu
    from rouge_score.rouge_scorer import RougeScorer

    items, _ = load_items(sample)
    bleu = Bleu().score(items)
    rouge = RougeL().score(items)
    scorer = RougeScorer(["rougeL"])
    for item, b, r in zip(items, bleu, rouge, strict=True):
        assert b == sacrebleu.sentence_bleu(item.text, list(item.references)).score
        best = max(scorer.score(ref, item.text)["rougeL"].fmeasure for ref in item.references)
        assert r == pytest.approx(best)


def test_bleu_equals_sentence_bleu_on_hard_texts_shared_images_and_repeats():
    """Several systems per image (one reference cache each), a caption repeated across
    systems and images, an empty caption: every score exactly sacrebleu's sentence_bleu."""
    import sacrebleu

    items = raw_items(images=30, systems=3)
    items += [CaptionItem(len(items) + i, item.image_key, None, "copy", text, item.references)
              for i, (item, text) in enumerate(zip(items[:6], ["", items[0].text, *(
                  it.text for it in items[2:6])], strict=True))]
    expected = [sacrebleu.sentence_bleu(item.text, list(item.references)).score
                for item in items]
    assert Bleu().score(items).tolist() == expected


def test_bleu_uses_only_sacrebleus_public_interface():
    import inspect
    import re

    from metrics.text import bleu_rouge

    assert not re.search(r"\bbleu\._", inspect.getsource(bleu_rouge.Bleu))


@needs_java
def test_python_tokenizer_agrees_with_stanford_ptb():
    texts = ['A man\'s dog, running "fast" on the beach.', "Two cats -- sitting on a t.v..",
             "The otter plays with two Frisbee's.", "Street signs for Main St. and 5th Ave.",
             "A view from an airplane. Above the clouds!", "(A dog) and [a cat]; really?"]
    assert tokenize_python(texts) == tokenize_java(texts)


def test_self_reference_is_left_out_and_the_signature_says_so(tmp_path):
    good_png(tmp_path / "a.png")
    data = tmp_path / "c.jsonl"
    data.write_text(
        '{"image": "a.png", "system": "Human", "caption": "a dog on grass", '
        '"references": ["A dog on grass.", "A brown dog.", "A puppy outside."]}\n'
        '{"image": "a.png", "system": "M", "caption": "A cat.", '
        '"references": ["A dog on grass.", "A brown dog.", "A puppy outside."]}\n',
        encoding="utf-8",
    )
    engine = open_database(tmp_path / "s.db")
    import_captions(engine, data, actor="t")
    items, refs = load_items(engine)
    human = next(i for i in items if i.system == "Human")
    assert human.text == "A dog on grass."
    assert human.references == ("A brown dog.", "A puppy outside.")
    assert len(next(i for i in items if i.system == "M").references) == 3
    assert refs.self_references == "excluded"
    kept, refs_kept = load_items(engine, keep_self_references=True)
    assert len(next(i for i in kept if i.system == "Human").references) == 3
    assert refs_kept.self_references == "kept"


def test_under_clean_none_a_self_reference_is_the_same_text_character_for_character():
    """Without the clean-up the texts are scored as given, so a reference in other case is
    another text and stays; under THUMB's clean-up case is ignored, as documented."""
    from types import SimpleNamespace

    from metrics.runner import caption_items

    caption = SimpleNamespace(caption_id=1, image_id=7, image_key="k", path=None,
                              system="Human", text="A PLATE OF FOOD WITH A FORK")
    references = {7: ["a plate of food with a fork", "A PLATE OF FOOD WITH A FORK",
                      "A fork and a plate."]}
    (item,), rule = caption_items([caption], references, clean="none")
    assert item.references == ("a plate of food with a fork", "A fork and a plate.")
    assert rule.self_reference_count == 1
    # the rule's name differs from the clean-up's, so scores stored under it are not reused
    assert rule.self_references == "excluded-exact"
    (item,), rule = caption_items([caption], references, clean="thumb")
    assert item.references == ("A fork and a plate.",)
    assert rule.self_reference_count == 2
    assert rule.self_references == "excluded"


def test_the_self_reference_count_is_shown_beside_the_signature_never_in_it(tmp_path):
    """`metrics compute` and every format of the report show how many references were
    the caption itself on their own, after the signature, which names only the rule."""
    import json

    from typer.testing import CliRunner

    from thumb_tui.cli import app

    good_png(tmp_path / "a.png")
    data = tmp_path / "c.jsonl"
    data.write_text(
        '{"image": "a.png", "system": "Human", "caption": "a dog on grass", '
        '"references": ["A dog on grass.", "A brown dog.", "A puppy outside."]}\n'
        '{"image": "a.png", "system": "M", "caption": "A brown dog", '
        '"references": ["A dog on grass.", "A brown dog.", "A puppy outside."]}\n'
        '{"image": "a.png", "system": "N", "caption": "A cat.", '
        '"references": ["A dog on grass.", "A brown dog.", "A puppy outside."]}\n',
        encoding="utf-8",
    )
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "import", str(data), "--by", "t"]).exit_code == 0
    done = runner.invoke(app, ["--db", db, "metrics", "compute", "--metric", "bleu"])
    assert done.exit_code == 0, done.output
    signature = next(line.strip() for line in done.output.splitlines()
                     if line.strip().startswith("bleu|"))
    assert "|self:excluded|" in signature and "(" not in signature
    assert f"  {signature}\n  2 self-references excluded\n" in done.output
    kept = runner.invoke(app, ["--db", db, "metrics", "compute", "--metric", "bleu",
                               "--keep-self-references"])
    assert "\n  2 self-references kept\n" in kept.output

    for fmt, main in (("json", "report.json"), ("md", "report.md"), ("html", "report.html"),
                      ("latex", "report.tex")):
        out = tmp_path / fmt
        written = runner.invoke(app, ["--db", db, "report", "--format", fmt, "--bootstrap",
                                      "0", "--out", str(out)])
        assert written.exit_code == 0, written.output
        text = (out / main).read_text(encoding="utf-8")
        if fmt == "json":
            report = json.loads(text)
            assert set(report["self_references"].values()) == {
                "2 self-references excluded", "2 self-references kept"}
            assert all("(" not in s for s in report["signatures"].values())
        else:
            assert "(2 self-references excluded)" in text, fmt
            assert "(2 self-references kept)" in text, fmt


def test_second_run_recomputes_nothing_and_scores_carry_signatures(sample):
    options = MetricOptions(tokenizer="ptb-python")
    first = compute_metrics(sample, ["bleu", "rouge-l", "cider-d"], options)
    assert [run.computed for run in first] == [60, 60, 60]
    again = compute_metrics(sample, ["bleu", "rouge-l", "cider-d"], options)
    assert [(run.computed, run.reused) for run in again] == [(0, 60)] * 3
    with sample.connect() as connection:
        rows = connection.execute(select(MetricScore.__table__)).all()
    assert len(rows) == 180
    cider = parse_signature(first[2].signature)
    assert cider["metric"] == "cider-d" and cider["tok"] == "ptb-python"
    assert cider["corpus"].startswith("per-system#") and cider["self"] == "excluded"
    assert "version" not in cider and cider["thumb-tui"]
    pooled = compute_metrics(sample, ["cider-d"], MetricOptions(cider_corpus="pooled",
                                                                tokenizer="ptb-python"))
    assert pooled[0].computed == 60 and pooled[0].signature != first[2].signature


def test_empty_item_list_scores_nothing():
    assert Bleu().score([]).shape == (0,)
    item = CaptionItem(1, "k", None, "S", "A dog.", ("A dog.",))
    assert RougeL().score([item])[0] == pytest.approx(1.0)


# Published Table 4 (Pearson r; w/ Human P, R, Total; w/o Human P, R, Total).
TABLE_4 = {
    "bleu": (0.15, 0.04, 0.13, 0.21, 0.13, 0.25),
    "rouge-l": (0.18, 0.07, 0.18, 0.26, 0.17, 0.31),
    "cider-d": (0.21, 0.11, 0.23, 0.27, 0.18, 0.33),
}


@needs_anchors
@pytest.mark.slow
def test_table_4_correlations_reproduce(tmp_path):
    engine = open_database(tmp_path / "thumb.db")
    import_thumb(engine, THUMB_JSONL, THUMB_REFS, actor="t")
    runs = compute_metrics(engine, list(TABLE_4), MetricOptions(keep_self_references=True))
    with engine.connect() as connection:
        scores = pd.read_sql(select(MetricScore.__table__), connection)
    human = final_scores(engine)
    for run in runs:
        assert "self:kept" in run.signature
        values = scores[scores.signature == run.signature][["caption_id", "value"]]
        data = human.merge(values, on="caption_id")
        assert len(data) == 2500
        without = data[data.system != "Human"]
        observed = [frame[column].corr(frame["value"])
                    for frame in (data, without) for column in ("precision", "recall", "total")]
        assert observed == pytest.approx(TABLE_4[run.metric], abs=0.01), run.metric


def test_images_without_references_store_undefined_scores_with_the_reason(tmp_path):
    """A caption whose image has no references (or only itself) gets no BLEU, ROUGE-L or
    CIDEr-D: stored without a value and with the reason, counted apart by `metrics list`."""
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    for name in ("a.png", "b.png"):
        good_png(tmp_path / name)
    data = tmp_path / "c.jsonl"
    data.write_text(
        '{"image": "a.png", "system": "S", "caption": "A dog.", "references": []}\n'
        '{"image": "a.png", "system": "T", "caption": "A cat.", "references": []}\n'
        '{"image": "b.png", "system": "S", "caption": "A red bus.", '
        '"references": ["A red bus on a street.", "A bus."]}\n'
        '{"image": "b.png", "system": "T", "caption": "A bus.", '
        '"references": ["A red bus on a street.", "A bus."]}\n',
        encoding="utf-8")
    engine = open_database(tmp_path / "s.db")
    import_captions(engine, data, actor="t")
    runs = compute_metrics(engine, ["bleu", "rouge-l", "cider-d"],
                           MetricOptions(tokenizer="ptb-python"))
    assert [run.computed for run in runs] == [4, 4, 4]
    with engine.connect() as connection:
        rows = connection.execute(select(MetricScore.__table__)).mappings().all()
    undefined = [(row["metric"], row["value"]) for row in rows if row["undefined"]]
    assert sorted(undefined) == sorted((m, None) for m in ("bleu", "rouge-l", "cider-d")
                                       for _ in range(2))
    assert {row["undefined"] for row in rows} == {None, "no references"}
    assert all(row["value"] is not None for row in rows if not row["undefined"])
    listed = CliRunner().invoke(app, ["--db", str(tmp_path / "s.db"), "metrics", "list"])
    assert listed.exit_code == 0 and listed.output.count("(2 undefined)") == 3
    again = compute_metrics(engine, ["bleu"], MetricOptions())
    assert (again[0].computed, again[0].reused) == (0, 4)


def test_bleu_signature_fields_are_what_sacrebleu_runs_with():
    from sacrebleu.metrics import BLEU

    bleu = BLEU(**Bleu.OPTIONS)
    settings = Bleu().settings([])
    assert (settings["tok"], settings["smooth"]) == (bleu.tokenizer.signature(),
                                                     bleu.smooth_method)
    assert settings["eff"] == ("yes" if bleu.effective_order else "no")
    assert settings["case"] == ("lc" if bleu.lowercase else "mixed")
