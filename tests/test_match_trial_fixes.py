"""`thumb match` as a new user met it: `positives --name` replacing a stored set, a
verification screen that could not flag a broken image, known positives drawn from
machine captions that are wrong, positive counts doubled, unrounded gold accuracy, ties
decided "no", a misleading message when no model proposed a pair, and an export that
ignored --positives and wrote times without their zone. Each test fails on the code
before its fix."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select, update
from textual.widgets import Static

from storage import import_captions, open_database
from storage.match import collection, load_positive_set
from storage.models import Event, Image, ImageFlag, MatchBatchItem, MatchPair, PositiveSet
from storage.rating.protocol import ProtocolError
from tests.app_helpers import screen_text
from tests.conftest import SAMPLE_CSV
from tests.match_helpers import fixed_session, match_project, thumb, toy_scores
from thumb_tui.app import ThumbApp
from thumb_tui.screens.confirm_flag import ConfirmFlagScreen
from thumb_tui.screens.help import HelpScreen
from thumb_tui.screens.match import MatchScreen

SIZE = (80, 24)
NOT_AN_IMAGE = "not an image (Pillow cannot identify the format)"


def write_positives(folder, name, i2t, t2i):
    folder.mkdir()
    (folder / f"{name}_image_to_caption.json").write_text(json.dumps(i2t))
    (folder / f"{name}_caption_to_image.json").write_text(json.dumps(t2i))
    return folder


def answer_all(engine, name: str, answer) -> None:
    """`name` answers every batch open to them: `answer(item index)` per pair."""
    session = fixed_session(engine, name)
    while session.items and not session.batch_complete:
        for index in range(len(session.items)):
            session.answer(index, answer(index))
        if session.claim_next() is None:
            break
    session.close()


def positives_json(db, *args: object) -> dict:
    result = thumb(db, "match", "positives", "--bootstrap", 0, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# -- 1: `positives --name` never replaces a stored set silently -----------------------------

def test_positives_refuse_a_stored_sets_name_unless_replace_and_log_the_replacement(tmp_path):
    db, engine = match_project(tmp_path)
    folder = write_positives(tmp_path / "mine", "mine", {"img01": ["img02/Human"]},
                             {"img02/Human": ["img01"]})
    assert thumb(db, "match", "import-positives", "mine", folder).exit_code == 0
    refused = thumb(db, "match", "positives", "--name", "mine", "--bootstrap", 0)
    assert refused.exit_code == 2
    assert refused.output.strip() == ("error: a positive set named 'mine' exists already; "
                                      "give --replace to replace it, or another --name")
    assert load_positive_set(engine, "mine") == {"i2t": {"img01": ["img02/Human"]},
                                                 "t2i": {"img02/Human": ["img01"]}}
    with engine.connect() as connection:
        names = set(connection.execute(select(PositiveSet.__table__.c.name)).scalars())
    assert "mine-human" not in names  # nothing was stored before the refusal
    replaced = thumb(db, "match", "positives", "--name", "mine", "--replace",
                     "--bootstrap", 0)
    assert replaced.exit_code == 0, replaced.output
    assert len(load_positive_set(engine, "mine")["i2t"]) == 15  # the original positives
    with engine.connect() as connection:
        actions = connection.execute(select(Event.__table__.c.action).where(
            Event.__table__.c.table_name == "positive_set")).scalars().all()
    assert actions == ["import", "import", "update"]  # mine, mine-human, mine replaced


# -- 2: the verification screen flags a broken image ----------------------------------------

def break_images(engine, tmp_path) -> None:
    """Every image's file becomes one that is no image (a file broken after import)."""
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    with engine.begin() as connection:
        connection.execute(update(Image.__table__).values(path=str(broken)))


def flags(engine) -> dict[int, str]:
    table = ImageFlag.__table__
    with engine.connect() as connection:
        return dict(connection.execute(select(table.c.image_id, table.c.reason)).all())


def candidate_items(engine) -> set[int]:
    table = MatchBatchItem.__table__
    with engine.connect() as connection:
        return set(connection.execute(select(table.c.id).where(table.c.gold.is_(None)))
                   .scalars())


def message(app: ThumbApp) -> str:
    return str(app.screen.query_one("#match-message", Static).content)


async def test_x_flags_a_broken_image_its_pairs_are_not_asked_and_decide_nothing(tmp_path):
    """At 80x24 the key bar shows `x broken`; `x` asks (with the reason the file check
    gives), `y` flags the image as every task flags one, and the screen moves on; the
    answer given before on a pair of that image is no vote: the pair stays undecided."""
    db, engine = match_project(tmp_path, size=5)
    break_images(engine, tmp_path)
    session = fixed_session(engine, "ann")
    candidate = next(i for i, v in enumerate(session.items)
                     if v.item_id in candidate_items(engine))
    view = session.items[candidate]
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = " ".join(screen_text(app).split())
        assert "image cannot be shown" in shown and "x broken" in shown
        app.screen.show(candidate)
        await pilot.press("1")  # a vote on a pair whose image turns out to be broken
        await pilot.pause()
        app.screen.show(candidate)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmFlagScreen)
        assert f"Reason: {NOT_AN_IMAGE}" in " ".join(screen_text(app).split())
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, MatchScreen)
        assert message(app).startswith(f"flagged {view.image_key} as broken ({NOT_AN_IMAGE})")
        assert session.items[app.screen.index].image_id != view.image_id  # moved on
        await pilot.press("q")
    session.close()
    assert flags(engine) == {view.image_id: NOT_AN_IMAGE}
    report = positives_json(db)
    assert report["undecided_on_flagged_images"] == 1 and report["positives"] == 0
    assert load_positive_set(engine, "verified-human") == {"i2t": {}, "t2i": {}}


@pytest.mark.slow
async def test_the_flag_key_follows_the_keymap_and_is_in_the_help(tmp_path):
    _db, engine = match_project(tmp_path, size=5)
    break_images(engine, tmp_path)
    session = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(session, "none"), keymap={"match-flag-broken": "b"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "b broken" in " ".join(screen_text(app).split())
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "`b`: broken (id `match-flag-broken`)" in app.screen.markdown
        assert "`b` flags it as broken" in app.screen.markdown
        await pilot.press("escape", "b", "n")
        await pilot.pause()
        assert message(app).endswith("is not flagged") and flags(engine) == {}
        await pilot.press("q")
    session.close()


def test_a_pair_on_a_flagged_image_is_no_vote_no_candidate_and_no_gold_check(tmp_path):
    """The session treats its pairs as done and refuses an answer on them; a gold item
    on a flagged image checks nothing in `match qc`."""
    db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    with engine.connect() as connection:
        gold = dict(connection.execute(select(MatchBatchItem.__table__.c.id,
                                              MatchBatchItem.__table__.c.gold)).all())
    index = next(i for i, v in enumerate(session.items) if gold[v.item_id] == "positive")
    session.answer(index, 4)  # a wrong gold answer
    view = session.items[index]
    session.flag_broken(index, "the annotator sees no usable image")
    assert all(v.flagged == (v.image_id == view.image_id) for v in session.items)
    with pytest.raises(ProtocolError, match="flagged as broken"):
        session.answer(index, 1)
    session.close()
    report = json.loads(thumb(db, "match", "qc", "--format", "json").output)
    assert [b["flagged"] for b in report["batches"]] == [False]
    assert report["annotators"][0]["gold_total"] == 0


# -- 3: known positives are pairs known to be true ------------------------------------------

def gold_positive_systems(engine) -> set[str]:
    from storage.models import Caption

    item, pair, caption = MatchBatchItem.__table__, MatchPair.__table__, Caption.__table__
    with engine.connect() as connection:
        return set(connection.execute(
            select(caption.c.system).join(pair, pair.c.caption_id == caption.c.id)
            .join(item, item.c.pair_id == pair.c.id).where(item.c.gold == "positive"))
            .scalars())


def proposed_project(tmp_path, rows: list[dict[str, str]]):
    """The sample project with `rows` for captions, one toy model's proposals."""
    path = tmp_path / "captions.csv"
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "image": str(SAMPLE_CSV.parent / row["image"])}
                         for row in rows)
    db = tmp_path / "gold.db"
    engine = open_database(db)
    import_captions(engine, path, actor="setup", allow_outside_images=True)
    result = thumb(db, "match", "propose", "--model", "toy", "--scores",
                   toy_scores(engine, tmp_path, 1), "--top-k", 2, "--depth", 5)
    assert result.exit_code == 0, result.output
    return db, engine


def sample_rows() -> list[dict[str, str]]:
    """The sample's rows, no caption repeating a reference (one of them does)."""
    rows = list(csv.DictReader(SAMPLE_CSV.open(encoding="utf-8")))
    for row in rows:
        references = {row[k] for k in row if k.startswith("reference")}
        if row["caption"] in references:
            row["caption"] = f"Maybe {row['caption']}"
    return rows


def test_known_positives_come_from_a_trusted_system_or_are_refused(tmp_path):
    db, engine = proposed_project(tmp_path, sample_rows())
    refused = thumb(db, "match", "batches", "--size", 10, "--negatives-beyond", 5)
    assert refused.exit_code == 2
    assert "no caption is known to be true of its image" in refused.output
    assert "--gold-system" in refused.output
    unknown = thumb(db, "match", "batches", "--size", 10, "--gold-system", "Humans")
    assert unknown.exit_code == 2 and "--gold-system 'Humans' is not a system" in unknown.output
    made = thumb(db, "match", "batches", "--size", 10, "--negatives-beyond", 5,
                 "--gold-system", "Human")
    assert made.exit_code == 0, made.output
    assert gold_positive_systems(engine) == {"Human"}


def test_known_positives_default_to_captions_that_repeat_a_reference(tmp_path):
    """Without --gold-system, a caption that repeats one of its image's references (case
    and spacing aside) is a known positive, and no other caption is."""
    rows = sample_rows()
    for row in rows:
        if row["system"] == "Show-Tell":
            row["caption"] = "  " + row["reference_1"].upper()
    db, engine = proposed_project(tmp_path, rows)
    result = thumb(db, "match", "batches", "--size", 10, "--negatives-beyond", 5)
    assert result.exit_code == 0, result.output
    assert gold_positive_systems(engine) == {"Show-Tell"}


# -- 4, 6: counts of pairs, ties undecided --------------------------------------------------

def test_stored_positives_are_counted_as_pairs_not_twice(tmp_path):
    db, _engine = match_project(tmp_path)
    result = thumb(db, "match", "positives", "--bootstrap", 0)
    assert result.exit_code == 0, result.output
    assert ("60 positives stored with the original ones (image-caption pairs; 60 i2t and 60 "
            "t2i entries)") in " ".join(result.output.split())
    folder = write_positives(tmp_path / "mine", "mine",
                             {"img01": ["img02/Human", "img01/Human"]}, {"img02/Human": ["img01"]})
    imported = thumb(db, "match", "import-positives", "mine", folder)
    assert imported.output.startswith("mine: 2 positives imported (image-caption pairs; 2 "
                                      "i2t and 1 t2i entries) from ")


@pytest.mark.slow
def test_a_tie_of_votes_is_undecided_and_said_so(tmp_path):
    """Two verifiers, one says yes to every pair and one no: no pair has a majority."""
    db, engine = match_project(tmp_path, redundancy=2)
    answer_all(engine, "ann", lambda _: 1)
    answer_all(engine, "bob", lambda _: 4)
    report = positives_json(db)
    candidates = len(candidate_items(engine))
    assert (report["decided"], report["positives"]) == (0, 0)
    assert report["undecided"] == report["undecided_ties"] == candidates
    text = thumb(db, "match", "positives", "--bootstrap", 0, "--replace")
    assert (f"{candidates} undecided: {candidates} tied (as many yes as no votes)"
            in " ".join(text.output.split()))


# -- 5: gold accuracy rounded beside a missing value ----------------------------------------

def test_a_column_with_a_missing_value_is_still_rounded():
    from reports.match import frame_text

    text = frame_text(pd.DataFrame({"annotator": ["alice", "dave"],
                                    "gold_accuracy": [5 / 6, float("nan")]}))
    assert "0.833" in text and "0.8333" not in text
    assert text.splitlines()[-1].split() == ["dave", "-"]


# -- 7: no candidates at all -----------------------------------------------------------------

def test_batches_say_that_no_model_proposed_a_pair_yet(tmp_path):
    """Every top-1 is a caption's own image (a known positive): nothing is proposed."""
    db = tmp_path / "none.db"
    engine = open_database(db)
    import_captions(engine, SAMPLE_CSV, actor="setup", allow_outside_images=True)
    items = collection(engine)
    own = items.image_ids[:, None] == items.caption_image[None, :]
    scores = tmp_path / "own.npz"
    np.savez(scores, scores=own.astype(np.float32), image_ids=np.array(items.image_keys),
             caption_ids=np.array(items.caption_keys))
    proposed = thumb(db, "match", "propose", "--model", "toy", "--scores", scores,
                     "--top-k", 1, "--direction", "t2i")
    assert proposed.output.startswith("toy: 0 proposals")
    result = thumb(db, "match", "batches")
    assert result.exit_code == 2
    assert "no model has proposed a pair yet" in result.output
    assert "`thumb match propose` with a larger --top-k" in result.output
    assert "in a batch already" not in result.output


# -- 8: the verifications export ------------------------------------------------------------

def test_the_csv_export_refuses_positives_and_writes_times_with_their_zone(tmp_path):
    db, engine = match_project(tmp_path, size=5)
    answer_all(engine, "ann", lambda _: 2)
    out = tmp_path / "answers.csv"
    refused = thumb(db, "match", "export", "--format", "csv", "--positives", "verified",
                    "--out", out)
    assert refused.exit_code == 2 and "--positives applies to --format eccv-json" in \
        refused.output
    assert not out.exists()
    written = thumb(db, "match", "export", "--format", "csv", "--out", out)
    assert written.exit_code == 0, written.output
    times = [row["answered_at"] for row in csv.DictReader(out.open(encoding="utf-8"))]
    assert times and all(pd.Timestamp(t).utcoffset() is not None for t in times)
    assert all(t.endswith("+00:00") for t in times)


def test_a_keys_file_names_a_repeated_id_and_a_bad_byte_at_their_lines(tmp_path):
    """The id files of a `.npy` matrix (one id per line): a repeated id is refused at its
    line with the line of its first use, invalid UTF-8 at its line and column."""
    from metrics.retrieval.match import read_score_file
    from metrics.retrieval.rankings import RankingsError

    matrix, images, captions = (tmp_path / "s.npy", tmp_path / "images.txt",
                                tmp_path / "captions.txt")
    np.save(matrix, np.zeros((3, 1), dtype=np.float32))
    captions.write_text("c0\n", encoding="utf-8")
    images.write_text("im00\nim01\nim00\n", encoding="utf-8")
    with pytest.raises(RankingsError, match=r"images\.txt:3: id 'im00' appears twice "
                                            r"\(first at line 1\)$"):
        read_score_file(matrix, images, captions)
    images.write_bytes(b"im00\nim\xff1\nim02\n")
    with pytest.raises(RankingsError, match=r"images\.txt:2: invalid UTF-8 \(byte 0xff at "
                                            r"column 3\)$"):
        read_score_file(matrix, images, captions)
