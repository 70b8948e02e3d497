"""BISON: imports (file:line errors, nothing written), the annotator screen, CLIP and
caption-metric choices, and embedding each distinct image and caption once."""

from __future__ import annotations

import json
import re
import uuid

import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage
from sqlalchemy import func, select
from textual.widgets import Static

from metrics.retrieval.bison import ClipScorer
from reports.bison import baseline, bison_header, bison_report, evaluate
from reports.thumb.text import bison_text
from storage import InputError, import_captions, open_database
from storage.bison import BisonSession, import_bison
from storage.models import BisonAnswer, BisonItem, BisonPrediction
from tests.app_helpers import sample_engine
from tests.conftest import SAMPLE_CSV, database_dump
from tests.image_files import good_png
from thumb_tui.app import ThumbApp
from thumb_tui.screens.bison import BisonScreen
from thumb_tui.screens.help import HelpScreen

SAMPLE_BISON = SAMPLE_CSV.parent / "bison.jsonl"


@pytest.fixture
def engine(tmp_path):
    engine = open_database(tmp_path / "b.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    return engine


def count(engine, model) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(model.__table__)).scalar()


def test_sample_items_import_onto_the_sample_images(engine):
    assert import_bison(engine, SAMPLE_BISON, actor="t") == 8
    with engine.connect() as connection:
        images = connection.execute(select(func.count()).select_from(
            __import__("storage").Image.__table__)).scalar()
    assert images == 15  # the items reuse the project's images, add none


@pytest.mark.parametrize(("content", "line", "words"), [
    ('{"bison_id": "x", "caption": "A.", "image_a": "images/01_red_balls.png", '
     '"image_b": "images/02_yellow_house.png", "true_image": "images/03_blue_boxes.png"}\n',
     1, "true_image must be image_a or image_b"),
    ('{"bison_id": "x", "caption": "A.", "image_a": "images/01_red_balls.png", '
     '"image_b": "nope.png", "true_image": "nope.png"}\n', 1, "unknown image 'nope.png'"),
    ('{"bison_id": "x", "caption": "", "image_a": "a", "image_b": "b", "true_image": "a"}\n',
     1, "empty caption"),
    ('{"bison_id": "x", "caption": "A.", "image_a": "a", "image_b": "b", "true_image": "a"}\n'
     '{"bison_id": "y", "image_a": "a", "image_b": "b", "true_image": "a", "score": 1}\n',
     2, "jsonl:2: missing caption"),
    ('{"bison_id": "y", "caption": "A.", "image_a": "a", "image_b": "b", "true_image": "a",'
     ' "score": 1}\n', 1, "jsonl:1: unknown column(s): score"),
])
def test_bad_own_format_names_line_and_writes_nothing(engine, content, line, words):
    # beside the sample images it names; a name of its own: each xdist worker numbers its
    # tmp_path folders from 0, so their names repeat across workers
    bad = SAMPLE_CSV.parent / f"tmp-bad-{uuid.uuid4().hex}.jsonl"
    bad.write_text(content, encoding="utf-8")
    before = database_dump(engine)
    try:
        with pytest.raises(InputError) as caught:
            import_bison(engine, bad, actor="t")
    finally:
        bad.unlink()
    assert f"{bad}:{line}: " in str(caught.value) and words in str(caught.value)
    assert database_dump(engine) == before


def coco_files(folder, items: list[dict]) -> tuple:
    images = folder / "coco"
    images.mkdir(exist_ok=True)
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        PILImage.new("RGB", (8, 8), "red").save(images / name)
    captions = folder / "captions.json"
    captions.write_text(json.dumps({"annotations": [
        {"id": 11, "image_id": 1, "caption": "A red square."},
        {"id": 12, "image_id": 1, "caption": "A small red tile."},
        {"id": 21, "image_id": 2, "caption": "Another red picture."},
        {"id": 31, "image_id": 3, "caption": "A third red picture."}]}), encoding="utf-8")
    annotations = folder / "bison.json"
    annotations.write_text(json.dumps({"data": items}, indent=2), encoding="utf-8")
    return annotations, captions, images


def coco_item(bison_id: int, true: int = 1, other: int = 2, caption: int = 11) -> dict:
    names = {1: "a.jpg", 2: "b.jpg", 3: "c.jpg"}
    return {"bison_id": bison_id, "caption_id": caption, "true_image_id": true,
            "image_candidates": [{"image_id": true, "image_filename": names[true]},
                                 {"image_id": other, "image_filename": names[other]}]}


def test_coco_bison_format(tmp_path):
    engine = open_database(tmp_path / "c.db")
    annotations, captions, images = coco_files(tmp_path, [coco_item(1), coco_item(2, 3, 1, 31)])
    assert import_bison(engine, annotations, actor="t", captions=captions,
                        images_dir=images) == 2
    with engine.connect() as connection:
        queries = connection.execute(select(BisonItem.__table__.c.query)).scalars().all()
    assert queries == ["A red square.", "A third red picture."]


@pytest.mark.slow
def test_coco_bison_errors_name_the_line_of_the_item(tmp_path):
    engine = open_database(tmp_path / "c.db")
    both_wrong = coco_item(4, caption=98)
    both_wrong["true_image_id"] = 3
    annotations, captions, images = coco_files(
        tmp_path, [coco_item(1), coco_item(2, caption=99), coco_item(1), both_wrong])
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_bison(engine, annotations, actor="t", captions=captions, images_dir=images)
    message = str(caught.value)
    # with indent=2 each item spans 15 lines: the items start at lines 3, 18 and 33
    assert f"{annotations}:18: caption_id 99 is not in captions.json" in message
    assert f"{annotations}:33: duplicate bison_id '1' (also line 3)" in message
    assert f"{annotations}:48: caption_id 98 is not in captions.json" in message
    assert f"{annotations}:48: true_image_id is not one of the candidates" in message
    assert database_dump(engine) == before
    with pytest.raises(InputError, match="needs --captions"):
        import_bison(engine, annotations, actor="t")


async def test_bison_screen_stores_answers_and_order(engine):
    import_bison(engine, SAMPLE_BISON, actor="t")
    coins = iter([0.1, 0.9] * 10)
    session = BisonSession(engine, "alice", coin=lambda: next(coins))
    app = ThumbApp(screen=BisonScreen(session, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l", "r", "b", "n")
        await pilot.pause()
    with engine.connect() as connection:
        answers = connection.execute(select(BisonAnswer.__table__).order_by(
            BisonAnswer.__table__.c.item_id)).all()
        items = {r.id: r for r in connection.execute(select(BisonItem.__table__))}
    assert [a.answer for a in answers[:4]] == ["left", "right", "both", "neither"]
    first, second = answers[0], answers[1]
    assert first.left_image_id == items[first.item_id].image_a_id  # coin 0.1: a on the left
    assert second.left_image_id == items[second.item_id].image_b_id
    assert all(a.seconds >= 0 for a in answers)
    report = bison_report(engine, bootstrap=20)
    human = report["human"].set_index("annotator")
    assert human.loc["alice", "n"] == 4 and human.loc["alice", "both"] == 1


@pytest.mark.slow
async def test_bison_screen_ends_with_all_done_progress_survives_restarts(engine, monkeypatch):
    import_bison(engine, SAMPLE_BISON, actor="t")
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda uri: opened.append(uri) or True)
    app = ThumbApp(screen=BisonScreen(BisonSession(engine, "alice"), "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("l", "l", "r")
        title = str(screen.query_one("#bison-title", Static).content)
        assert "item 4/8" in title and "3/8 answered" in title
        await pilot.press("o")
        assert len(opened) == 2 and all(uri.startswith("file://") for uri in opened)
        assert str(screen.query_one("#bison-message", Static).content).count("opened") == 2
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one("Markdown").source
        assert "which image does the caption describe?" in source
        assert all(b.description in source for b in BisonScreen.BINDINGS if b.show)
        await pilot.press("escape")
    again = ThumbApp(screen=BisonScreen(BisonSession(engine, "alice"), "none"))
    async with again.run_test(size=(80, 24)) as pilot:
        screen = again.screen
        title = str(screen.query_one("#bison-title", Static).content)
        assert "item 4/8" in title and "3/8 answered" in title  # where alice left off
        await pilot.press("b", "b", "b", "b", "n")
        message = str(screen.query_one("#bison-message", Static).content)
        assert message == "saved: neither; all done: 8/8 answered; q quits"
        assert "all done" in str(screen.query_one("#bison-title", Static).content)
        assert screen.index == 7
        await pilot.press("]")  # no wrapping round to item 1
        assert screen.index == 7
        assert str(screen.query_one("#bison-message", Static).content) == "this is the last item"


@pytest.mark.slow
def test_clip_evaluation_is_stored_with_accuracy(engine, tiny_clip):
    import_bison(engine, SAMPLE_BISON, actor="t")
    signature, scored = evaluate(engine, ClipScorer(tiny_clip, "cpu"))
    assert scored == 8 and signature.startswith("bison-clip|model:local:clip#")
    assert evaluate(engine, ClipScorer(tiny_clip, "cpu"))[1] == 0  # nothing recomputed
    models = bison_report(engine, bootstrap=20)["models"]
    assert models.loc[0, "n"] == 8 and 0.0 <= models.loc[0, "accuracy"] <= 1.0
    assert count(engine, BisonPrediction) == 8


def test_caption_metric_baseline_on_items_with_known_answers(tmp_path):
    folder = tmp_path
    for name in ("dog", "cat", "car"):
        good_png(folder / f"{name}.png")
    data = folder / "captions.jsonl"
    refs = {"dog": ["A brown dog runs on the grass.", "A dog running on a lawn.",
                    "A happy brown dog on grass.", "The dog runs across the grass."],
            "cat": ["A grey cat sleeps on a sofa.", "A cat asleep on the couch.",
                    "A sleeping grey cat on a sofa.", "The cat naps on a sofa."],
            "car": ["A red car parked on the street.", "A red car by the road.",
                    "A parked red car on a street.", "The red car is parked outside."]}
    data.write_text("".join(json.dumps({"image": f"{k}.png", "image_id": k, "system": "S",
                                        "caption": v[0], "references": v}) + "\n"
                            for k, v in refs.items()), encoding="utf-8")
    engine = open_database(folder / "k.db")
    import_captions(engine, data, actor="t")
    items = folder / "items.jsonl"
    items.write_text("".join(json.dumps({"bison_id": f"i{n}", "caption": caption,
                                         "image_a": a, "image_b": b, "true_image": true})
                             + "\n" for n, (caption, a, b, true) in enumerate([
        ("A brown dog runs on the grass.", "dog", "cat", "dog"),
        ("A grey cat sleeps on a sofa.", "car", "cat", "cat"),
        ("A red car parked on the street.", "car", "dog", "car")])), encoding="utf-8")
    import_bison(engine, items, actor="t")
    for metric in ("bleu", "cider-d", "rouge-l"):
        signature, scored = baseline(engine, metric, seed=1)
        assert scored == 3 and "clean:thumb" in signature
        assert "refs:up-to-4-same-for-both" in signature
    tables = bison_report(engine, bootstrap=0)
    models = tables["models"]
    assert (models["accuracy"] == 1.0).all() and len(models) == 3
    text = bison_text(tables, bison_header(bootstrap=0, ci=0.9, seed=0))
    table_rows = text[:text.index("signatures:")].splitlines()
    assert max(len(line) for line in table_rows) <= 80
    for signature in models["signature"]:
        assert text.count(signature) == 1  # listed once, under the tables
        assert f"  {signature.split('|')[0]}: {signature}" in text


def test_a_model_that_chose_before_items_were_added_is_marked_and_labelled(tmp_path):
    """Items imported after a baseline ran: its accuracy covers fewer items, which its row
    says; CIDEr-D's choices made again come under a new corpus, and the two rows' labels
    name the corpus that tells them apart (not an empty `()`)."""
    engine = sample_engine(tmp_path)
    items = [json.loads(line) for line in SAMPLE_BISON.read_text(encoding="utf-8").splitlines()]
    first, later = tmp_path / "first.jsonl", tmp_path / "later.jsonl"
    for path, part in ((first, items[:5]), (later, items[5:])):
        path.write_text("".join(json.dumps({**item, **{side: str(SAMPLE_CSV.parent / item[side])
                                                       for side in ("image_a", "image_b",
                                                                    "true_image")}}) + "\n"
                                for item in part), encoding="utf-8")
    import_bison(engine, first, actor="t", allow_outside_images=True)
    before, _ = baseline(engine, "cider-d")
    import_bison(engine, later, actor="t", allow_outside_images=True)
    after, scored = baseline(engine, "cider-d")
    assert scored == len(items) and after != before

    models = bison_report(engine, bootstrap=0)["models"].set_index("signature")
    assert models.loc[before, "n"] == 5 and models.loc[after, "n"] == len(items)
    assert models.loc[before, "ci_warning"].startswith(
        f"chose an image for 5 of the {len(items)} items")
    assert pd.isna(models.loc[after, "ci_warning"])
    text = bison_text(bison_report(engine, bootstrap=0),
                      bison_header(bootstrap=0, ci=0.9, seed=0))
    corpora = [re.search(r"corpus:([^;|]+)", s).group(1) for s in (before, after)]
    assert "()" not in text
    assert all(f"bison-baseline-cider-d ({corpus}) " in text for corpus in corpora)


def test_a_baseline_without_references_names_the_item_and_the_image(tmp_path):
    """The sample items onto images without references: the message names the item's
    bison_id and the image's key, not the database's ids, and says what to import."""
    engine = sample_engine(tmp_path, references=False)
    import_bison(engine, SAMPLE_BISON, actor="t")
    with pytest.raises(RuntimeError, match=r"BISON item 'b01': image '[^']+' has no "
                                           r"reference captions .* thumb import FILE"):
        baseline(engine, "bleu")


@pytest.mark.slow
def test_ten_thousand_items_embed_each_image_and_caption_once(tmp_path, tiny_clip):
    from metrics.models.clip import embedder

    embedder.cache_clear()
    folder = tmp_path
    for index in range(20):
        PILImage.new("RGB", (16, 16), (index * 12, 40, 200 - index * 9)).save(
            folder / f"i{index}.png")
    captions = [f"Caption number {n} of a coloured square." for n in range(100)]
    lines = []
    for n in range(10_000):
        a, b = n % 20, (n * 7 + 1) % 20
        if a == b:
            b = (b + 1) % 20
        lines.append(json.dumps({"bison_id": str(n), "caption": captions[n % 100],
                                 "image_a": f"i{a}.png", "image_b": f"i{b}.png",
                                 "true_image": f"i{a}.png"}))
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    engine = open_database(folder / "big.db")
    assert import_bison(engine, folder / "items.jsonl", actor="t") == 10_000
    scorer = ClipScorer(tiny_clip, "cpu", batch_size=64)
    calls = {"images": 0, "texts": 0}
    model = scorer.clip.model
    image_features, text_features = model.get_image_features, model.get_text_features

    def count_images(*args, **kwargs):
        calls["images"] += len(kwargs["pixel_values"])
        return image_features(*args, **kwargs)

    def count_texts(*args, **kwargs):
        calls["texts"] += len(kwargs["input_ids"])
        return text_features(*args, **kwargs)

    model.get_image_features, model.get_text_features = count_images, count_texts
    _, scored = evaluate(engine, scorer)
    assert scored == 10_000
    assert calls == {"images": 20, "texts": 100}
    assert np.isfinite(bison_report(engine, bootstrap=0)["models"]["accuracy"]).all()
    embedder.cache_clear()


def test_accuracy_tables_equal_a_direct_count_with_ties_swaps_and_abstentions():
    """BISON accuracy (Hu et al. 2019, section 4: the share of items whose chosen image is
    the true one) counted directly, item by item: a model tie picks nothing, a human
    'both' or 'neither' picks nothing, and the side the annotator saw on the left decides
    which image 'left' names."""
    from metrics.retrieval.bison import bison_tables, choices

    rng = np.random.default_rng(3)
    n = 400
    items = pd.DataFrame({"item_id": np.arange(n), "image_a_id": rng.integers(0, 50, n)})
    items["image_b_id"] = items["image_a_id"] + 100
    items["true_image_id"] = np.where(rng.random(n) < 0.5, items["image_a_id"],
                                      items["image_b_id"])
    items["image_a"], items["image_b"] = items["image_a_id"], items["image_b_id"]
    scores_a = rng.integers(0, 4, n).astype(float)  # many ties
    scores_b = rng.integers(0, 4, n).astype(float)
    predictions = choices(items, scores_a, scores_b).assign(scorer="m", signature="m|x")
    answers = pd.DataFrame({"item_id": np.arange(n),
                            "answer": rng.choice(["left", "right", "both", "neither"], n,
                                                 p=[0.45, 0.45, 0.05, 0.05]),
                            "seconds": 1.0, "annotator": rng.choice(["ann", "bob"], n)})
    answers["left_image_id"] = np.where(rng.random(n) < 0.5, items["image_a_id"],
                                        items["image_b_id"])
    tables = bison_tables(items[["item_id", "image_a_id", "image_b_id", "true_image_id"]],
                          answers, predictions[["item_id", "scorer", "signature",
                                                "chosen_image_id"]], bootstrap=0)

    model_right = human_right = 0
    per_annotator = {"ann": [0, 0], "bob": [0, 0]}
    for i in range(n):
        a, b, true = (int(items.loc[i, c]) for c in ("image_a_id", "image_b_id",
                                                      "true_image_id"))
        if scores_a[i] != scores_b[i]:
            model_right += (a if scores_a[i] > scores_b[i] else b) == true
        answer, left = answers.loc[i, "answer"], int(answers.loc[i, "left_image_id"])
        right = b if left == a else a
        picked = {"left": left, "right": right}.get(answer)
        correct = picked == true
        human_right += correct
        per_annotator[answers.loc[i, "annotator"]][0] += correct
        per_annotator[answers.loc[i, "annotator"]][1] += 1
    models = tables["models"].set_index("signature")
    assert models.loc["m|x", "accuracy"] == pytest.approx(model_right / n, abs=1e-15)
    assert models.loc["m|x", "ties"] == int((scores_a == scores_b).sum()) > 0
    human = tables["human"].set_index("annotator")
    assert human.loc["all", "accuracy"] == pytest.approx(human_right / n, abs=1e-15)
    for name, (right_count, total) in per_annotator.items():
        assert human.loc[name, "accuracy"] == pytest.approx(right_count / total, abs=1e-15)
