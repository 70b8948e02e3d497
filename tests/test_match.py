"""Match verification end to end on the sample project: proposals, batches with gold, the
verification screen through the Pilot, quality control, positives, eccv-caption files, and
every bad input refused with one line and the database unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import select, update

from metrics.retrieval.positives import eccv_caption_available
from storage.match import (
    HOLD_LEASE,
    BatchHeld,
    HoldLost,
    MatchSession,
    collection,
    load_positive_set,
    verification_frame,
)
from storage.models import (
    Event,
    MatchBatchItem,
    MatchClaim,
    MatchHold,
    MatchPair,
    MatchProposal,
    MatchVerification,
    utcnow,
)
from tests.conftest import database_dump
from tests.match_helpers import fixed_session, match_project, thumb, toy_scores
from thumb_tui.app import ThumbApp
from thumb_tui.screens.match import MatchScreen

needs_eccv_caption = pytest.mark.skipif(not eccv_caption_available(),
                                        reason="the eccv-caption package is not installed")


def rows(engine, table):
    with engine.connect() as connection:
        return connection.execute(select(table.__table__)).all()


def test_proposals_merge_models_keep_ranks_and_leave_out_known_positives(tmp_path):
    _db, engine = match_project(tmp_path)
    items = collection(engine)
    own = set(zip(items.caption_image.tolist(), items.caption_ids.tolist(), strict=True))
    pairs = {r.id: (r.image_id, r.caption_id) for r in rows(engine, MatchPair)}
    proposals = rows(engine, MatchProposal)
    proposed = {pairs[p.pair_id] for p in proposals}
    assert proposed and not proposed & own
    assert {p.rank for p in proposals} == {1, 2} and {p.direction for p in proposals} == {
        "i2t", "t2i"}
    assert {p.model_id for p in proposals} == {1, 2}
    # merged: one pair row per image-caption pair, however many models proposed it
    assert len(pairs) == len(set(pairs.values()))
    both = [pid for pid in pairs if len({p.model_id for p in proposals if p.pair_id == pid})
            == 2]
    assert both  # the toy models agree on some pairs


def test_batches_hold_gold_of_both_kinds_and_every_candidate_once(tmp_path):
    db, engine = match_project(tmp_path, size=10)
    items = rows(engine, MatchBatchItem)
    pairs = {r.id: (r.image_id, r.caption_id) for r in rows(engine, MatchPair)}
    by_batch: dict[int, list] = {}
    for item in items:
        by_batch.setdefault(item.batch_id, []).append(item)
    candidates = [i.pair_id for i in items if i.gold is None]
    assert len(candidates) == len(set(candidates)) == len(
        {p.pair_id for p in rows(engine, MatchProposal)})
    lists = collection(engine)
    own = set(zip(lists.caption_image.tolist(), lists.caption_ids.tolist(), strict=True))
    for batch in by_batch.values():
        assert len(batch) <= 10 and sorted(str(i.gold) for i in batch if i.gold) == [
            "negative", "positive"]
        for item in batch:
            assert (pairs[item.pair_id] in own) == (item.gold == "positive")
    again = thumb(db, "match", "batches", "--size", 10, "--negatives-beyond", 5)
    assert again.exit_code == 2 and "every proposed pair is in a batch already" in again.output


def test_session_answers_commit_with_time_and_event_and_undo(tmp_path):
    _db, engine = match_project(tmp_path)
    session = fixed_session(engine, "ann")
    first = session.items[0]
    session.show(0)
    session.answer(0, 2)
    session.show(1)
    session.answer(1, 4)
    answers = {r.item_id: r for r in rows(engine, MatchVerification)}
    assert answers[first.item_id].answer == 2 and answers[first.item_id].seconds == 3.0
    logged = [e for e in rows(engine, Event) if e.table_name == "match_verification"]
    assert [(e.actor, e.old_value, e.new_value) for e in logged] == [
        ("ann", "null", "2"), ("ann", "null", "4")]
    assert session.undo() == 1
    assert {r.item_id: r.answer for r in rows(engine, MatchVerification)}[
        session.items[1].item_id] is None
    assert session.undo() == 0 and session.undo() is None
    assert session.progress().answered == 0
    # a restart (the first session ended) comes back to the batch and the pair last shown
    session.show(3)
    session.close()
    again = MatchSession(engine, "ann")
    assert again.claim_id == session.claim_id and again.focus == 3


@pytest.mark.slow
def test_views_never_carry_model_or_gold(tmp_path):
    _, engine = match_project(tmp_path)
    view = fixed_session(engine, "ann").items[0]
    assert set(vars(view)) == {"item_id", "image_id", "image_key", "image_path", "caption",
                               "answer", "flagged"}


def test_redundancy_gives_each_batch_to_that_many_people_and_no_more(tmp_path):
    _, engine = match_project(tmp_path, redundancy=2, size=40)
    ann, bob, cat = (fixed_session(engine, n) for n in ("ann", "bob", "cat"))
    assert ann.claim_id != bob.claim_id
    with engine.connect() as connection:
        batch_of = dict(connection.execute(select(
            MatchBatchItem.__table__.c.id, MatchBatchItem.__table__.c.batch_id)).all())
    assert batch_of[ann.items[0].item_id] == batch_of[bob.items[0].item_id]
    assert batch_of[cat.items[0].item_id] != batch_of[ann.items[0].item_id]


@pytest.mark.slow
async def test_pilot_verifies_a_batch_and_moves_to_the_next(tmp_path):
    _db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    first_claim = session.claim_id
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("1", "2", "down", "up", "3", "4")
        await pilot.pause()
        assert session.claim_id == first_claim and session.progress().batch_done == 4
        await pilot.press("4")  # the batch's last pair: the next batch opens
        await pilot.pause()
        assert session.claim_id != first_claim and session.progress().batch_done == 0
        await pilot.press("u")  # undo reaches back into the finished batch
        await pilot.pause()
        assert session.claim_id == first_claim
        await pilot.press("2", "q")
    frame = verification_frame(engine)
    assert sorted(frame["answer"].tolist()) == [1, 2, 2, 3, 4]
    assert (frame["seconds"] > 0).all()


def test_quality_control_flags_and_reassigns_a_batch_with_a_wrong_gold(tmp_path):
    db, engine = match_project(tmp_path, size=5)
    session = fixed_session(engine, "ann")
    with engine.connect() as connection:
        gold = dict(connection.execute(select(MatchBatchItem.__table__.c.id,
                                              MatchBatchItem.__table__.c.gold)).all())
    for index, view in enumerate(session.items):  # every gold answered wrong
        session.answer(index, 4 if gold[view.item_id] == "positive" else 1)
    result = thumb(db, "match", "qc", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["annotators"][0]["gold_accuracy"] == 0.0
    assert [b["flagged"] for b in report["batches"]] == [True]
    assert "ann" in thumb(db, "match", "qc").output
    result = thumb(db, "match", "reassign", "--flagged", "--by", "lead")
    assert result.exit_code == 0 and "1 batch claim rejected" in result.output
    with pytest.raises(Exception, match="reassigned"):
        session.answer(0, 1)
    bob = fixed_session(engine, "bob")  # the batch is open to someone else again
    assert bob.claim_id is not None and bob.items[0].item_id in {
        v.item_id for v in session.items}
    assert verification_frame(engine).query("status == 'active'").empty


@pytest.mark.slow
def test_positives_merge_report_table_2_and_bias(tmp_path):
    db, engine = match_project(tmp_path, redundancy=2, size=10)
    for name in ("ann", "bob"):
        session = fixed_session(engine, name)
        while session.items and not session.batch_complete:
            for index in range(len(session.items)):
                session.answer(index, 1 + (index + len(name)) % 4)
            if session.claim_next() is None:
                break
    result = thumb(db, "match", "positives", "--bootstrap", 100, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    verified = load_positive_set(engine, "verified")
    human = load_positive_set(engine, "verified-human")
    original = load_positive_set(engine, "original")
    assert report["positives"] == sum(map(len, human["i2t"].values())) > 0
    for direction in ("i2t", "t2i"):
        for query, found in original[direction].items():
            assert set(found) <= set(verified[direction][query])
        for query, found in human[direction].items():
            assert set(found) <= set(verified[direction][query])
    table2 = {(r["positive_set"], r["direction"]): r for r in report["table2"]}
    assert table2[("original", "i2t")]["judged"] > 0  # the known positives were answered
    row = table2[("original", "i2t")]
    assert {"precision", "recall", "queries_kept", "recall_queries", "recall_dropped",
            "pooled_precision", "pooled_recall"} <= set(row)
    assert 0 < row["queries_kept"] <= row["queries"]
    assert report["table2_columns"]["precision"].startswith("ECCV Caption Table 2")
    assert report["table2_columns"]["pooled_recall"].startswith("pooled over pairs")
    shown = thumb(db, "match", "positives", "--bootstrap", 0, "--replace")
    assert shown.exit_code == 0, shown.output
    assert "ECCV Caption Table 2" in shown.output and "queries_kept" in shown.output
    assert "pooled over pairs (not the paper's definition)" in shown.output
    assert "pooled_precision" in shown.output
    statistics = {r["statistic"] for r in report["agreement"]}
    assert {"alpha_ordinal:answer", "kappa_linear:answer"} <= statistics
    bias = thumb(db, "match", "bias")
    assert bias.exit_code == 0 and "toy-a" in bias.output and "kendall_tau" in bias.output


@pytest.mark.slow
def test_table_2_counts_undecided_pairs_as_shown_and_leaves_out_flagged_images(tmp_path):
    """ECCV Table 2's h is every pair shown to people: two verifiers who disagree on every
    pair decide nothing, yet the original set's pairs they were shown are in r' (none of
    them a verified positive: precision 0); a pair on an image flagged as broken was not
    seen and is not in h."""
    import pandas as pd

    from reports.match import derive_positives
    from storage.models import Annotator
    from storage.rating.image_flags import flag_image

    _, engine = match_project(tmp_path, redundancy=2, size=10)
    for name, answer in (("ann", 1), ("bob", 4)):  # 100% yes against no: every pair tied
        session = fixed_session(engine, name)
        while session.items and not session.batch_complete:
            for index in range(len(session.items)):
                session.answer(index, answer)
            if session.claim_next() is None:
                break
    original = load_positive_set(engine, "original")["i2t"]
    answered = verification_frame(engine)

    def shown_in_original(frame: pd.DataFrame) -> set[tuple[str, str]]:
        return {(i, c) for i, c in zip(frame["image_key"], frame["caption_key"], strict=True)
                if c in original.get(i, [])}

    def table_2(name: str) -> dict[str, object]:
        quality = derive_positives(engine, name=name, actor="lead", bootstrap=0).quality
        return quality.set_index(["positive_set", "direction"]).loc[("original", "i2t")
                                                                    ].to_dict()

    shown = shown_in_original(answered)
    row = table_2("first")
    assert row["judged"] == len(shown) > 0 and row["queries_kept"] > 0
    assert row["precision"] == 0.0 and row["hits"] == 0
    image_key, _ = sorted(shown)[0]
    with engine.begin() as connection:
        image_id = answered.loc[answered["image_key"] == image_key, "image"].iloc[0]
        annotator_id = connection.execute(select(Annotator.__table__.c.id).where(
            Annotator.__table__.c.name == "ann")).scalar_one()
        flag_image(connection, int(image_id), annotator_id, "ann", "not an image")
    row = table_2("second")
    assert row["judged"] == len(shown_in_original(
        answered[answered["image_key"] != image_key])) < len(shown)


@pytest.mark.slow
@needs_eccv_caption
def test_shipped_sets_round_trip_and_table_3_counts(tmp_path):
    import eccv_caption

    from metrics.retrieval.positives import _shipped_data_dir

    db = tmp_path / "ids.db"
    data = _shipped_data_dir()
    for name, stem in (("eccv", "eccv"), ("cxc", "cxc"), ("coco", "original")):
        result = thumb(db, "match", "import-positives", name)
        assert result.exit_code == 0, result.output
        out = tmp_path / name
        result = thumb(db, "match", "export", "--positives", name, "--format", "eccv-json",
                       "--out", out)
        assert result.exit_code == 0, result.output
        assert sorted(p.name for p in out.iterdir()) == [
            f"{name}_caption_to_image.json", f"{name}_image_to_caption.json"]
        for suffix in ("image_to_caption", "caption_to_image"):
            shipped = json.loads((data / f"{stem}_{suffix}.json").read_text())
            ours = json.loads((out / f"{name}_{suffix}.json").read_text())
            assert ours.keys() == shipped.keys()
            for key, values in ours.items():
                assert all(type(v) is int for v in values) and len(set(values)) == len(values)
                assert set(values) == set(shipped[key])
        metrics = eccv_caption.Metrics()
        metrics.set_eccv_gts(str(out / f"{name}_image_to_caption.json"),
                             str(out / f"{name}_caption_to_image.json"))
        assert len(metrics.eccv_gts["i2t"]) == len(json.loads(
            (data / f"{stem}_image_to_caption.json").read_text()))
    from storage import open_database

    eccv = load_positive_set(open_database(db), "eccv")
    assert sum(map(len, eccv["t2i"].values())) == 11_279  # positive images for captions
    assert sum(map(len, eccv["i2t"].values())) == 22_550  # positive captions for images
    assert (len(eccv["i2t"]), len(eccv["t2i"])) == (1_261, 1_332)


def write_positives(folder, name, i2t, t2i):
    folder.mkdir()
    (folder / f"{name}_image_to_caption.json").write_text(json.dumps(i2t))
    (folder / f"{name}_caption_to_image.json").write_text(json.dumps(t2i))
    return folder


def test_project_keys_export_as_database_ids_with_a_map_back(tmp_path):
    db, engine = match_project(tmp_path)
    folder = write_positives(tmp_path / "mine", "mine",
                             {"img01": ["img02/Human", "img01/Human"]},
                             {"img02/Human": ["img01"]})
    result = thumb(db, "match", "import-positives", "mine", folder)
    assert result.exit_code == 0 and "mine: 2 positives imported" in result.output
    out = tmp_path / "out"
    result = thumb(db, "match", "export", "--positives", "mine", "--out", out)
    assert result.exit_code == 0, result.output
    items = collection(engine)
    image_id = dict(zip(items.image_keys, items.image_ids.tolist(), strict=True))
    caption_id = dict(zip(items.caption_keys, items.caption_ids.tolist(), strict=True))
    i2t = json.loads((out / "mine_image_to_caption.json").read_text())
    assert i2t == {str(image_id["img01"]): [caption_id["img02/Human"],
                                            caption_id["img01/Human"]]}
    back = json.loads((out / "mine_ids.json").read_text())
    assert back["images"][str(image_id["img01"])] == "img01"
    assert back["captions"][str(caption_id["img02/Human"])] == "img02/Human"
    result = thumb(db, "match", "import-positives", "again", out)  # the map applied back
    assert result.exit_code == 0, result.output
    from storage.match import load_positive_set

    assert load_positive_set(engine, "again") == load_positive_set(engine, "mine")
    (out / "mine_ids.json").write_text('{"images": {"1": 7}}')
    result = thumb(db, "match", "import-positives", "broken", out)
    assert result.exit_code == 2 and "mine_ids.json: expected" in result.output
    mixed = write_positives(tmp_path / "mixed", "mixed",
                            {"999": ["img01/Human"], "img01": ["img01/Human"]}, {})
    assert thumb(db, "match", "import-positives", "mixed", mixed).exit_code == 0
    result = thumb(db, "match", "export", "--positives", "mixed", "--out", tmp_path / "o2")
    assert result.exit_code == 2 and "image id '999' is not in the project" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["shape", "keys", "nan", "nan-parquet", "clip-model",
                                     "duplicate-model", "batch-size", "missing-file",
                                     "unknown-set"])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path, problem):
    db, engine = match_project(tmp_path)
    items = collection(engine)
    good = np.load(toy_scores(engine, tmp_path, 9))
    scores, images, captions = good["scores"], good["image_ids"], good["caption_ids"]
    path = tmp_path / "bad.npz"
    command = ["match", "propose", "--model", "bad", "--scores", path]
    expected = {"shape": "scores has shape (15, 59), expected (15, 60)",
                "keys": "caption id 'nope' is not caption of the project",
                "nan": "scores must be finite numbers",
                "nan-parquet": "bad.parquet: scores must be finite numbers (row 5: nan)",
                "clip-model": "no-such-clip",
                "duplicate-model": "model 'toy-a' has proposed already",
                "batch-size": "batch size must be at least 3",
                "missing-file": "no such file",
                "unknown-set": "no positive set named 'nothing'"}[problem]
    if problem == "shape":
        np.savez(path, scores=scores[:, :-1], image_ids=images, caption_ids=captions)
    elif problem == "keys":
        np.savez(path, scores=scores, image_ids=images,
                 caption_ids=np.array([*items.caption_keys[:-1], "nope"]))
    elif problem == "nan":
        scores = scores.copy()
        scores[1, 4] = np.nan
        np.savez(path, scores=scores, image_ids=images, caption_ids=captions)
    elif problem == "nan-parquet":  # (a NaN had been read as a missing pair)
        import pandas as pd

        long = pd.DataFrame({"image_id": np.repeat(images, len(captions)),
                             "caption_id": np.tile(captions, len(images)),
                             "score": scores.ravel()})
        long.loc[4, "score"] = np.nan
        path = tmp_path / "bad.parquet"
        long.to_parquet(path)
        command[-1] = path
    elif problem == "clip-model":
        command = ["match", "propose", "--model", "clip", "--scorer", "clip",
                   "--clip-model", str(tmp_path / "no-such-clip")]
    elif problem == "duplicate-model":
        command[3] = "toy-a"
        np.savez(path, scores=scores, image_ids=images, caption_ids=captions)
    elif problem == "batch-size":
        command = ["match", "batches", "--size", "2"]
    elif problem == "unknown-set":
        command = ["match", "export", "--positives", "nothing", "--out", tmp_path / "o"]
    before = database_dump(engine)
    result = thumb(db, *command)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert database_dump(engine) == before


def _claim_after_barrier(db: str, annotator: str, barrier, results) -> None:
    from storage import open_database

    barrier.wait()
    session = MatchSession(open_database(db), annotator)
    results.put((annotator, session.claim_id))


@pytest.mark.slow
def test_simultaneous_claims_never_exceed_a_batchs_redundancy(tmp_path):
    import multiprocessing

    db, engine = match_project(tmp_path, size=60)  # a few batches only
    batches = len({i.batch_id for i in rows(engine, MatchBatchItem)})
    context = multiprocessing.get_context("spawn")
    people = batches + 2
    barrier, results = context.Barrier(people), context.Queue()
    workers = [context.Process(target=_claim_after_barrier,
                               args=(str(db), f"ann{n}", barrier, results))
               for n in range(people)]
    for worker in workers:
        worker.start()
    claims = dict(results.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    held = [claim for claim in claims.values() if claim is not None]
    assert len(held) == batches and list(claims.values()).count(None) == 2
    with engine.connect() as connection:
        per_batch = connection.execute(select(MatchClaim.__table__.c.batch_id)).scalars().all()
    assert sorted(per_batch) == sorted(set(per_batch))  # redundancy 1: one claim per batch


@pytest.mark.slow
def test_one_annotator_verifies_in_one_process_at_a_time(tmp_path):
    """A second `thumb match annotate` under a name that another process verifies under is
    told so (exit 2) and changes nothing; once the first ends, the next resumes its batch."""
    db, engine = match_project(tmp_path, size=5)
    first = fixed_session(engine, "ann")
    first.answer(0, 2)
    before = database_dump(engine)
    result = thumb(db, "match", "annotate", "--annotator", "ann")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ann is verifying in another thumb process "
                                    f"(process {os.getpid()} on ")
    assert "--take-over" in result.output
    assert database_dump(engine) == before
    with pytest.raises(BatchHeld):
        MatchSession(engine, "ann")
    assert fixed_session(engine, "bob").claim_id != first.claim_id  # others are not held
    first.answer(1, 3)  # the first goes on
    first.close()
    again = MatchSession(engine, "ann")
    assert again.claim_id == first.claim_id and again.progress().batch_done == 2
    with engine.connect() as connection:
        claims = connection.execute(select(MatchClaim.__table__.c.id).where(
            MatchClaim.__table__.c.annotator_id == again.annotator_id)).scalars().all()
    assert claims == [first.claim_id]  # one batch open, never two


async def test_a_taken_over_screen_says_so_and_overwrites_nothing(tmp_path):
    _db, engine = match_project(tmp_path, size=5)
    first = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(first, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("1")  # pair 0; the screen moves to pair 1
        await pilot.pause()
        second = MatchSession(engine, "ann", take_over=True)
        assert second.claim_id == first.claim_id
        second.answer(1, 4)
        await pilot.press("2")  # the first screen's answer on pair 1: refused, said
        await pilot.pause()
        message = str(app.screen.query_one("#match-message").render())
        assert message.startswith("not saved: ann's verification was taken over by another "
                                  f"thumb process (process {os.getpid()} on ")
        app.screen.keep_alive()
        assert "was taken over" in str(app.screen.query_one("#match-message").render())
        with pytest.raises(HoldLost):
            first.undo()
        await pilot.press("q")
    first.close()  # gives back nothing: the hold is the second session's now
    answers = {r.item_id: r.answer for r in rows(engine, MatchVerification)}
    assert answers == {first.items[0].item_id: 1, first.items[1].item_id: 4}
    assert second.answer(2, 3) == 3
    taken = [e for e in rows(engine, Event) if e.table_name == "match_hold"]
    assert [(e.actor, e.action) for e in taken] == [("ann", "update")]


def test_the_hold_of_a_process_that_is_gone_is_replaced(tmp_path):
    """On this machine a holder whose process has ended is replaced at once (a crash, a
    killed terminal); elsewhere, once it has not been seen for HOLD_LEASE."""
    _, engine = match_project(tmp_path, size=5)
    claim = fixed_session(engine, "ann").claim_id
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    hold = MatchHold.__table__

    def holder(**values: object) -> None:
        with engine.begin() as connection:
            connection.execute(update(hold).values(**values))

    holder(pid=int(ended.stdout))
    assert MatchSession(engine, "ann").claim_id == claim  # not refused
    holder(host="elsewhere.example", pid=1, seen_at=utcnow())
    with pytest.raises(BatchHeld, match=r"process 1 on elsewhere\.example"):
        MatchSession(engine, "ann")
    holder(seen_at=utcnow() - HOLD_LEASE - timedelta(seconds=1))
    assert MatchSession(engine, "ann").claim_id == claim


@pytest.mark.slow
async def test_end_to_end_from_two_scorers_to_eccv_caption_files(tmp_path):
    """Two toy scorers -> proposals -> batches with gold -> every pair answered through the
    Pilot -> positives -> export that eccv-caption's Metrics loads."""
    db, engine = match_project(tmp_path, size=20)
    needed = sum(1 for _ in rows(engine, MatchBatchItem))
    session = fixed_session(engine, "ann")
    app = ThumbApp(screen=MatchScreen(session, "none"))
    async with app.run_test(size=(80, 24)) as pilot:
        for press in range(needed):
            await pilot.press("1" if press % 3 else "4")
        await pilot.pause()
        assert "every batch is done" in str(app.screen.query_one("#match-message").render())
        await pilot.press("q")
    assert len(verification_frame(engine)) == needed
    result = thumb(db, "match", "positives", "--bootstrap", 0)
    assert result.exit_code == 0, result.output
    out = tmp_path / "eccv-files"
    result = thumb(db, "match", "export", "--positives", "verified", "--out", out)
    assert result.exit_code == 0, result.output
    i2t = json.loads((out / "verified_image_to_caption.json").read_text())
    t2i = json.loads((out / "verified_caption_to_image.json").read_text())
    assert all(isinstance(v, int) for values in i2t.values() for v in values)
    verified = load_positive_set(engine, "verified")
    assert sum(map(len, i2t.values())) == sum(map(len, verified["i2t"].values())) > 60
    assert len(t2i) == 60  # every caption of the project queries its images
    if eccv_caption_available():
        import eccv_caption

        metrics = eccv_caption.Metrics()
        metrics.set_eccv_gts(str(out / "verified_image_to_caption.json"),
                             str(out / "verified_caption_to_image.json"))
        ranked = {"i2t": {int(q): v for q, v in i2t.items()},
                  "t2i": {int(q): v for q, v in t2i.items()}}
        scores = metrics.compute_all_metrics(ranked["i2t"], ranked["t2i"],
                                             target_metrics=("eccv_map_at_r",), Ks=(1,))
        assert scores["eccv_map_at_r"]["i2t"] == pytest.approx(1.0)
    export = tmp_path / "answers.parquet"
    result = thumb(db, "match", "export", "--format", "parquet", "--out", export)
    assert result.exit_code == 0, result.output
    import pandas as pd

    frame = pd.read_parquet(export)
    assert len(frame) == needed and {"annotator", "answer", "seconds", "gold",
                                     "proposed_by"} <= set(frame.columns)
    assert frame.loc[frame["gold"].isna(), "proposed_by"].str.contains("toy-").all()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("THUMB_TEST_POSTGRES"),
                    reason="THUMB_TEST_POSTGRES is not set")
def test_match_verification_on_postgresql(tmp_path):
    from benchmarks.races import drop_everything
    from tests.test_postgres import URL

    drop_everything(URL)
    try:
        db, engine = match_project(tmp_path, db=URL, redundancy=2, size=10)
        ann, bob = fixed_session(engine, "ann"), fixed_session(engine, "bob")
        assert ann.claim_id != bob.claim_id and ann.items
        with pytest.raises(BatchHeld):  # ann verifies in one process at a time
            fixed_session(engine, "ann")
        for index in range(len(ann.items)):
            ann.answer(index, 1)
        assert ann.undo() == len(ann.items) - 1
        result = thumb(db, "match", "positives", "--bootstrap", 0)
        assert result.exit_code == 0, result.output
        assert thumb(db, "match", "reassign", "--batch", 1, "--annotator", "ann"
                     ).exit_code == 0
        out = tmp_path / "pg"
        assert thumb(db, "match", "export", "--positives", "verified", "--out", out
                     ).exit_code == 0
        assert (out / "verified_image_to_caption.json").is_file()
        engine.dispose()
    finally:
        drop_everything(URL)


@pytest.mark.slow
def test_clip_scorer_proposes_from_embeddings_it_computes(tmp_path, tiny_clip):
    """`--scorer clip` with a tiny random CLIP saved to a folder: each image and caption is
    embedded once; the candidates equal the top k of the cosine matrix computed here."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from metrics.models.clip import PREFIX, ClipEmbedder
    from metrics.retrieval.match import top_k_rows
    from storage.match import caption_texts

    model = tiny_clip
    db = tmp_path / "clip.db"
    from storage import import_captions, open_database
    from tests.conftest import SAMPLE_CSV

    engine = open_database(db)
    import_captions(engine, SAMPLE_CSV, actor="t", allow_outside_images=True)
    result = thumb(db, "match", "propose", "--model", "tiny-clip", "--scorer", "clip",
                   "--clip-model", model, "--device", "cpu", "--top-k", 3,
                   "--direction", "i2t")
    assert result.exit_code == 0, result.output
    assert "match-proposals|source:clip|digest:local:clip#" in result.output
    paths, texts = caption_texts(engine)
    clip = ClipEmbedder(str(model), "cpu", 64)
    scores = clip.images(paths) @ clip.texts([PREFIX + t for t in texts]).T
    items = collection(engine)
    expected = set()
    for row, best in enumerate(top_k_rows(scores, 3)):
        for column in best:
            if items.caption_image[column] != items.image_ids[row]:
                expected.add((int(items.image_ids[row]), int(items.caption_ids[column])))
    pairs = {(r.image_id, r.caption_id) for r in rows(engine, MatchPair)}
    assert pairs == expected


@pytest.mark.parametrize("layout", ["npy", "ranked"])
def test_npy_with_id_files_and_ranked_lists_propose_like_the_npz(tmp_path, layout):
    """The same toy model given as a memory-mapped .npy with id files, or as ranked lists
    in the eccv-caption layout, proposes exactly the pairs its .npz proposes."""
    db, engine = match_project(tmp_path)
    items = collection(engine)
    archive = np.load(toy_scores(engine, tmp_path, 1))  # toy-a's matrix
    if layout == "npy":
        np.save(tmp_path / "a.npy", archive["scores"])
        (tmp_path / "images.txt").write_text("\n".join(items.image_keys))
        (tmp_path / "captions.txt").write_text("\n".join(items.caption_keys))
        args = ["--scores", tmp_path / "a.npy", "--image-keys", tmp_path / "images.txt",
                "--caption-keys", tmp_path / "captions.txt"]
    else:
        from metrics.retrieval.match import top_k_columns, top_k_rows

        folder = tmp_path / "ranked"
        folder.mkdir()
        rows_ = top_k_rows(archive["scores"], 5)
        columns = top_k_columns(archive["scores"], 5)
        (folder / "a_image_to_caption.json").write_text(json.dumps(
            {items.image_keys[i]: [items.caption_keys[c] for c in best]
             for i, best in enumerate(rows_)}))
        (folder / "a_caption_to_image.json").write_text(json.dumps(
            {items.caption_keys[c]: [items.image_keys[i] for i in best]
             for c, best in enumerate(columns)}))
        args = ["--scores", folder]
    result = thumb(db, "match", "propose", "--model", "again", *args, "--top-k", 2,
                   "--depth", 5)
    assert result.exit_code == 0, result.output
    proposed = {}
    with engine.connect() as connection:
        for model_id, pair_id, direction, rank in connection.execute(select(
                MatchProposal.__table__.c.model_id, MatchProposal.__table__.c.pair_id,
                MatchProposal.__table__.c.direction, MatchProposal.__table__.c.rank)):
            proposed.setdefault(model_id, set()).add((pair_id, direction, rank))
    assert proposed[3] == proposed[1]  # toy-a is model 1, this run model 3


def test_a_wide_match_table_is_split_to_80_columns_repeating_the_row_names():
    import pandas as pd

    from reports.match import frame_text

    note = "undefined: fewer than 2 items in this verification round"
    frame = pd.DataFrame({
        "positive_set": ["original", "original"], "direction": ["i2t", "t2i"],
        "recall": [0.5, float("nan")],  # undefined: no query to average
        **{f"a_rather_long_column_{n}": [n + 0.25, n + 0.5] for n in range(6)},
        "note": [note, None]})
    text = frame_text(frame)
    assert max(map(len, text.splitlines())) <= 80
    tables = text.split("\n\n")
    assert len(tables) > 1
    for table in tables:  # each names its rows: set and direction
        assert table.startswith("positive_set") and "direction" in table.splitlines()[0]
        assert {"i2t", "t2i"} <= set(table.split())
    for n in range(6):
        assert f"{n + 0.25:.3f}" in text and f"{n + 0.5:.3f}" in text
    assert "nan" not in text and "0.500" in text
    rows = tables[-1].splitlines()[2:]
    assert rows[-1].split() == ["original", "t2i", "-"]  # no note: "-", not "nan"
    words = [word for line in rows[:-1]  # i2t's note, wrapped under its column
             for word in (line.split()[2:] if line.startswith("original") else line.split())]
    assert " ".join(words) == note
