"""Gold items in THUMB rating (issue 26, item 2): the gold file's import (every problem
named file:line, the database unchanged on any), the database's own checks, seeding into
stage-1 sessions (deterministic per annotator, indistinguishable on screen), answers and
their undo, per-annotator accuracy, exclusion from every analysis, and feedback."""

from __future__ import annotations

import json
import os
import random

import pandas as pd
import pytest
from sqlalchemy import literal, select
from sqlalchemy.exc import DBAPIError
from textual.widgets import Static
from typer.testing import CliRunner

from storage import Event
from storage.errors import InputError
from storage.models import GoldAnswer, GoldCaption, GoldImage, Rating, Stage, utcnow
from storage.rating.annotators import register
from storage.rating.dashboard import dashboard, work_for
from storage.rating.gold import (
    answer_is_right,
    feedback_query,
    gold_accuracy,
    gold_results,
    gold_settings,
    import_gold,
    is_gold,
    set_gold_settings,
)
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine, screen_text
from tests.conftest import database_dump
from thumb_tui.app import ThumbApp
from thumb_tui.screens.annotate import AnnotateScreen

GOLD_CSV = (
    "image,path,caption,precision,recall,fluency,reason\n"
    "g1,images/01_red_balls.png,Three red balls on grass.,4-5,3-5,,Everything said is true.\n"
    "g1,images/01_red_balls.png,A cat asleep on a sofa.,1,1-2,0,There is no cat or sofa.\n"
    "g2,,Two people walking a dog.,3-4,3,0.5,Roughly right; the dog is hidden.\n"
    "g3,,Snow on a mountain.,5,4-5,,Nothing is wrong or missing here.\n"
)


def gold_file(tmp_path, text: str = GOLD_CSV, name: str = "gold.csv"):
    from tests.readers import SAMPLE_CSV

    images = tmp_path / "images"
    if not images.exists():
        images.mkdir()
        (images / "01_red_balls.png").write_bytes(
            (SAMPLE_CSV.parent / "images" / "01_red_balls.png").read_bytes())
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def engine(tmp_path):
    return sample_engine(tmp_path)


def gold_rows(engine) -> tuple[list, list]:
    with engine.connect() as connection:
        return (connection.execute(select(GoldImage.__table__)).all(),
                connection.execute(select(GoldCaption.__table__)).all())


def answers(engine) -> list:
    with engine.connect() as connection:
        return connection.execute(select(GoldAnswer.__table__)).all()


# --- import ----------------------------------------------------------------------------

def test_import_csv_and_jsonl(engine, tmp_path):
    assert import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.2,
                       feedback=True) == 4
    images, captions = gold_rows(engine)
    assert sorted(image.key for image in images) == ["g1", "g2", "g3"]
    assert next(i for i in images if i.key == "g1").path.endswith("01_red_balls.png")
    cat = next(c for c in captions if c.text.startswith("A cat"))
    assert (cat.precision_min, cat.precision_max, cat.recall_min, cat.recall_max) == (1, 1, 1, 2)
    dog = next(c for c in captions if c.text.startswith("Two people"))
    assert (dog.fluency_max, dog.conciseness_max, dog.inclusive_max) == (0.5, 0.0, 0.0)
    assert dog.rubric == "thumb-1.0" and dog.reason.startswith("Roughly")
    assert gold_settings(engine).rate == 0.2 and gold_settings(engine).feedback
    lines = [json.dumps({"image": "g4", "caption": "A boat.", "precision": 4,
                         "recall": "2-3", "inclusive": 0.5, "reason": "fine"})]
    assert import_gold(engine, gold_file(tmp_path, "\n".join(lines) + "\n", "g.jsonl"),
                       actor="lead") == 1
    with engine.connect() as connection:
        logged = connection.execute(select(Event.__table__.c.table_name).where(
            Event.__table__.c.action == "import",
            Event.__table__.c.table_name.like("gold%"))).scalars().all()
    assert {"gold_image", "gold_caption"} == set(logged)


@pytest.mark.slow
@pytest.mark.parametrize(("text", "expected"), [
    ("image,caption,precision,recall,reason\ng1,A dog.,7,3,r\n",
     "bad.csv:2: precision 7 is outside the rubric's scale 1-5"),
    ("image,caption,precision,recall,reason\ng1,A dog.,4,5-3,r\n",
     "bad.csv:2: recall range 5-3 runs backwards"),
    ("image,caption,precision,recall,reason\ng1,A dog.,four,3,r\n",
     "bad.csv:2: precision must be a level of the rubric's scale 1-5"),
    ("image,caption,precision,recall,fluency,reason\ng1,A dog.,4,3,9,r\n",
     "bad.csv:2: fluency must be the most an answer may hold, between 0 and"),
    ("image,caption,precision,recall,reason\ng1,A dog.,4,3,r\ng1,A dog.,5,5,s\n",
     "bad.csv:3: duplicate gold caption of image 'g1' (first on line 2)"),
    ("image,caption,precision,recall,reason\ng1,A \u202edog.,4,3,r\n",
     "bad.csv:2: caption: bidirectional formatting character U+202E"),
    ("image,caption,precision,recall,reason\ng1,A dog.,4,3,\n", "bad.csv:2: empty reason"),
    ("image,caption,precision,reason\ng1,A dog.,4,r\n", "bad.csv:1: missing column(s): recall"),
    ("image,caption,precision,recall,reason,extra\ng1,A dog.,4,3,r,x\ng2,A cat.,4,3,r,y\n",
     "bad.csv:1: unknown column 'extra' (a gold file has"),
    ("image,caption,precision,recall,reasons\ng1,A dog.,4,3,r\n",
     "bad.csv:1: missing column(s): reason (a gold file has image, caption, precision, "
     "recall, reason; optional path, fluency, conciseness, inclusive); unknown: reasons"),
    ("image,caption,precision,recall,reason\nimg01,A dog.,4,3,r\n",
     "bad.csv:2: image 'img01' is a project image"),
    ("image,path,caption,precision,recall,reason\ng1,../x.png,A dog.,4,3,r\n",
     "bad.csv:2: image path '../x.png'"),
])
def test_import_refusals_name_the_line_and_change_nothing(engine, tmp_path, text, expected):
    import_gold(engine, gold_file(tmp_path), actor="lead")
    before = database_dump(engine)
    with pytest.raises(InputError) as refused:
        import_gold(engine, gold_file(tmp_path, text, "bad.csv"), actor="lead", rate=0.3)
    assert expected in str(refused.value).replace(str(tmp_path) + "/", "")
    assert database_dump(engine) == before


@pytest.mark.parametrize(("cells", "named"), [("9" * 5000 + ",3", "precision"),
                                              ("4,2-" + "9" * 5000, "recall")],
                         ids=["precision", "recall"])
def test_a_level_of_thousands_of_digits_is_refused_at_its_line(engine, tmp_path, cells,
                                                               named):
    """(found by benchmarks/fuzz_imports.py: int() refuses so many digits with ValueError)"""
    text = f"image,caption,precision,recall,reason\ng1,A dog.,{cells},r\n"
    with pytest.raises(InputError) as refused:
        import_gold(engine, gold_file(tmp_path, text, "bad.csv"), actor="lead")
    assert (f"bad.csv:2: {named} must be a level of the rubric's scale 1-5"
            in str(refused.value).replace(str(tmp_path) + "/", ""))


@pytest.mark.slow
def test_importing_the_same_gold_twice_is_refused(engine, tmp_path):
    path = gold_file(tmp_path)
    import_gold(engine, path, actor="lead")
    before = database_dump(engine)
    with pytest.raises(InputError, match=r"gold.csv:2: duplicate gold caption of image 'g1' "
                                         r"\(already imported; --replace corrects it\)"):
        import_gold(engine, path, actor="lead")
    assert database_dump(engine) == before


@pytest.mark.slow
def test_replace_corrects_a_gold_caption_and_logs_it(engine, tmp_path):
    """A lead who wrote a range wrong corrects it: the caption keeps its id (and so its
    answers), takes the new range and reason, and the change is in the event log."""
    import_gold(engine, gold_file(tmp_path), actor="lead")
    (_, captions_before) = gold_rows(engine)
    fixed = GOLD_CSV.replace("4-5,3-5,,Everything said is true.",
                             "3-5,3-5,,Mostly true; one ball is half hidden.")
    assert import_gold(engine, gold_file(tmp_path, fixed, "fixed.csv"), actor="lead",
                       replace=True) == 4
    (_, captions) = gold_rows(engine)
    assert [c.id for c in captions] == [c.id for c in captions_before]
    balls = next(c for c in captions if c.text == "Three red balls on grass.")
    assert (balls.precision_min, balls.precision_max, balls.reason) == (
        3, 5, "Mostly true; one ball is half hidden.")
    with engine.connect() as connection:
        logged = connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "gold_caption",
            Event.__table__.c.action == "update")).all()
    assert {(row.field_name, json.loads(row.old_value)) for row in logged} == {
        ("precision_min", 4), ("reason", "Everything said is true.")}


def test_cli_import_rate_feedback_and_status(engine, tmp_path):
    from thumb_tui.cli import app

    db = str(tmp_path / "app.db")
    runner = CliRunner()
    result = runner.invoke(app, ["--db", db, "gold", "import", str(gold_file(tmp_path)),
                                 "--rate", "0.25", "--no-feedback"])
    assert result.exit_code == 0, result.output
    assert "4 gold captions imported; gold rate 0.25" in result.output
    result = runner.invoke(app, ["--db", db, "gold", "rate", "0.9"])
    assert result.exit_code == 2 and "between 0 and 0.5, not 0.9" in result.output
    assert runner.invoke(app, ["--db", db, "gold", "feedback", "on"]).exit_code == 0
    assert gold_settings(engine).feedback and gold_settings(engine).rate == 0.25
    bad = gold_file(tmp_path, "image,caption,precision,recall,reason\ng9,x,0,3,r\n", "b.csv")
    result = runner.invoke(app, ["--db", db, "gold", "import", str(bad)])
    assert result.exit_code == 2
    assert "b.csv:2: precision 0 is outside the rubric's scale 1-5" in result.output
    assert "database is unchanged" in result.output


def test_the_database_checks_gold_values(engine, tmp_path):
    import_gold(engine, gold_file(tmp_path), actor="lead")
    caption = GoldCaption.__table__
    with pytest.raises(DBAPIError), engine.begin() as connection:  # off the rubric's scale
        connection.execute(caption.insert().values(
            gold_image_id=1, text="x", precision_min=0, precision_max=3, recall_min=1,
            recall_max=1, reason="r", rubric="thumb-1.0"))
    with pytest.raises(DBAPIError), engine.begin() as connection:  # a range backwards
        connection.execute(caption.insert().values(
            gold_image_id=1, text="y", precision_min=4, precision_max=3, recall_min=1,
            recall_max=1, reason="r", rubric="thumb-1.0"))
    session = AnnotationSession(engine, "alice")
    session.desk.register()
    with pytest.raises(DBAPIError), engine.begin() as connection:  # not a THUMB amount
        connection.execute(GoldAnswer.__table__.insert().values(
            gold_caption_id=1, annotator_id=session.annotator_id, precision=4, recall=3,
            conciseness=0.3, rubric="thumb-1.0"))
    with pytest.raises(DBAPIError), engine.begin() as connection:
        set_gold_settings(engine, actor="lead")  # (fine)
        connection.exec_driver_sql("UPDATE gold_setting SET rate = 0.9")


# --- a campaign ------------------------------------------------------------------------

def value_for(caption: str, annotator: str) -> dict[str, int]:
    """Deterministic P/R of a caption's text by an annotator (the same with or without
    gold, in databases whose caption ids differ: they are drawn at random)."""
    rng = random.Random(f"{annotator}:{caption}")
    return {"precision": rng.randint(1, 5), "recall": rng.randint(1, 5)}


def rate_all(session: AnnotationSession) -> None:
    for index in range(len(session.images)):
        for group in session.open_image(index):
            session.set_values(group, value_for(group.text, session.annotator),
                               image_index=index, focus=0)
        session.remember_position(index, 0)
    session.close()


def campaign(engine) -> None:
    """Alice rates at stage 1 (gold seeded where there is gold), Bob reviews."""
    rate_all(AnnotationSession(engine, "alice", seed_source=lambda: 1, clock=lambda: 0.0))
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: 2,
                            clock=lambda: 0.0)
    assert not any(is_gold(image.id) for image in bob.images)  # gold is stage 1's
    for index in range(len(bob.images)):
        for number, group in enumerate(bob.open_image(index)):
            values = {k: group.reference[k] for k in ("precision", "recall")}
            if number == 0 and index % 3 == 0:
                values["precision"] = 1 if values["precision"] > 2 else 5
            bob.set_values(group, values, image_index=index, focus=0)


def expected_accuracy(engine) -> dict[str, tuple[int, int]]:
    """Computed here from the rows, independently of storage.rating.gold."""
    with engine.connect() as connection:
        limits = {row.id: row for row in connection.execute(select(GoldCaption.__table__))}
        names = dict(connection.exec_driver_sql("SELECT id, name FROM annotator").all())
    tally: dict[str, list[int]] = {}
    for answer in answers(engine):
        if answer.precision is None or answer.recall is None:
            continue
        gold = limits[answer.gold_caption_id]
        right = (gold.precision_min <= answer.precision <= gold.precision_max
                 and gold.recall_min <= answer.recall <= gold.recall_max
                 and answer.fluency <= gold.fluency_max
                 and answer.conciseness <= gold.conciseness_max
                 and answer.inclusive <= gold.inclusive_max)
        counts = tally.setdefault(names[answer.annotator_id], [0, 0])
        counts[0] += 1
        counts[1] += right
    return {name: (a, c) for name, (a, c) in tally.items()}


def test_two_annotators_rate_with_gold_seeded(engine, tmp_path):
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.2)
    alice = AnnotationSession(engine, "alice")
    gold_a = [image for image in alice.images if is_gold(image.id)]
    # 15 real images at a rate of 0.2: 4 gold wanted, the 3 there are taken, each once
    assert len(gold_a) == 3 and len({image.id for image in gold_a}) == 3
    assert len(alice.images) == 18 and alice.progress().images_total == 18
    (work,) = work_for(engine, "alice")  # `thumb next` counts what the session lists
    assert (work.command, work.count) == ("annotate", 18)
    assert [i.key for i in AnnotationSession(engine, "alice").images] == [
        i.key for i in alice.images]  # deterministic per annotator
    assert [i.key for i in AnnotationSession(engine, "carol").images] != [
        i.key for i in alice.images]
    for index in range(10):  # alice rates the first 10 of her list, then stops
        for group in alice.open_image(index):
            alice.set_values(group, value_for(group.text, "alice"),
                             image_index=index, focus=0)
    alice.close()
    done = sum(not is_gold(image.id) for image in alice.images[:10])
    assert alice.progress().images_done == 10  # gold counts in the annotator's progress
    left = [w.count for w in work_for(engine, "alice") if w.command == "annotate"]
    assert left == [8]
    set_gold_settings(engine, actor="lead", rate=0.5)
    carol = AnnotationSession(engine, "carol")
    real = [image for image in carol.images if not is_gold(image.id)]
    assert len(real) == 15 - done
    assert len(carol.images) - len(real) == min(3, len(real))  # rate 0.5: as many as real
    rate_all(carol)
    stored = answers(engine)
    assert {row.annotator_id for row in stored} == {alice.annotator_id, carol.annotator_id}
    assert all(row.rubric == "thumb-1.0" for row in stored)
    expected = expected_accuracy(engine)
    assert {row.annotator: (row.answered, row.correct) for row in gold_accuracy(engine)} == (
        expected)
    assert set(expected) == {"alice", "carol"}
    assert expected["carol"][0] == sum(
        len(carol.open_image(i)) for i, image in enumerate(carol.images) if is_gold(image.id))
    with engine.connect() as connection:  # a gold answer is logged like a rating
        logged = connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "gold_answer")).all()
    assert {e.actor for e in logged} == {"alice", "carol"}
    board = dashboard(engine)
    assert board.gold_captions == 4
    for person in board.annotators:
        assert (person.gold_answered, person.gold_correct) == expected[person.name]
    assert sum(p.rated_images for p in board.annotators) == 15  # only real images count


def test_undo_takes_back_a_gold_answer_in_turn(engine, tmp_path):
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    real_index = next(i for i, image in enumerate(session.images) if not is_gold(image.id))
    real = session.open_image(real_index)[0]
    session.set_values(real, {"precision": 3}, image_index=real_index, focus=0)
    gold = session.open_image(gold_index)[0]
    session.set_values(gold, {"precision": 2, "recall": 2}, image_index=gold_index, focus=0)
    assert session.is_complete(session.images[gold_index]) or len(
        session.open_image(gold_index)) > 1
    undone = session.undo()  # the gold answer came last
    fields = undone.fields if hasattr(undone, "fields") else undone[0]
    caption_id = undone.caption_id if hasattr(undone, "caption_id") else undone[1]
    assert fields == ["precision", "recall"] and caption_id in gold.caption_ids
    assert session.image_index_of_caption(caption_id) == gold_index
    assert session.group_for_caption(caption_id).values["precision"] is None
    (row,) = answers(engine)
    assert (row.precision, row.recall) == (None, None)
    undone = session.undo()  # then the rating
    caption_id = undone.caption_id if hasattr(undone, "caption_id") else undone[1]
    assert caption_id in real.caption_ids
    with engine.connect() as connection:
        assert connection.execute(select(Rating.__table__.c.precision)).scalar() is None


# --- gold that cannot be gamed (issue 44, item 5) -----------------------------------------

FOUR_ON_ONE = "image,caption,precision,recall,reason\n" + "".join(
    f"gq,Caption number {n} of q.,4-5,3-5,Why {n}.\n" for n in range(4))
WRONG, RIGHT = {"precision": 5, "recall": 1}, {"precision": 5, "recall": 4}  # recall 3-5


def scored_by_hand(engine) -> dict[str, tuple[int, int]]:
    """(answered, right) per annotator, each caption judged by its first complete answer
    replayed here from the event log (independently of storage.rating.gold)."""
    with engine.connect() as connection:
        limits = {row.id: row for row in connection.execute(select(GoldCaption.__table__))}
        rows = {row.id: row for row in connection.execute(select(GoldAnswer.__table__))}
        names = dict(connection.exec_driver_sql("SELECT id, name FROM annotator").all())
        events = connection.execute(select(Event.__table__).where(
            Event.__table__.c.table_name == "gold_answer").order_by(Event.__table__.c.id)).all()
    now: dict[int, dict] = {}
    first: dict[int, dict] = {}
    for event in events:
        values = now.setdefault(event.row_id, {"precision": None, "recall": None})
        values[event.field_name] = json.loads(event.new_value)
        if event.row_id not in first and None not in (values["precision"], values["recall"]):
            first[event.row_id] = dict(values)
    tally: dict[str, list[int]] = {}
    for answer_id, values in first.items():
        gold = limits[rows[answer_id].gold_caption_id]
        counts = tally.setdefault(names[rows[answer_id].annotator_id], [0, 0])
        counts[0] += 1
        counts[1] += (gold.precision_min <= values["precision"] <= gold.precision_max
                      and gold.recall_min <= values["recall"] <= gold.recall_max)
    return {name: (answered, right) for name, (answered, right) in tally.items()}


@pytest.mark.slow
async def test_going_back_after_the_feedback_cannot_raise_the_gold_accuracy(engine,
                                                                            tmp_path):
    """The trial of issue 44: a gold image answered wrongly, the feedback read, `[` back
    and the right answer typed. The first complete answers are scored (0 of 4, not 4 of
    4); the new ones are kept and logged, and the lead sees each as changed after it."""
    from thumb_tui.cli import app as cli

    import_gold(engine, gold_file(tmp_path, FOUR_ON_ONE), actor="lead", rate=0.5,
                feedback=True)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    app = ThumbApp(session, "none")
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        screen.load_image(gold_index)
        await pilot.pause()
        for _ in screen.groups:
            await pilot.press(*(str(WRONG[key]) for key in ("precision", "recall")))
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert "Why 0." in " ".join(screen_text(app).split())  # the feedback was read
        await pilot.press("escape", "left_square_bracket")
        await pilot.pause()
        assert screen.image_index == gold_index
        for _ in screen.groups:
            await pilot.press(*(str(RIGHT[key]) for key in ("precision", "recall")))
        await pilot.pause()
    (accuracy,) = gold_accuracy(engine)
    assert (accuracy.answered, accuracy.correct) == (4, 0)
    assert accuracy.changed == 4
    stored = answers(engine)
    assert {(row.precision, row.recall) for row in stored} == {tuple(RIGHT.values())}
    assert {(row.first_precision, row.first_recall) for row in stored} == {
        tuple(WRONG.values())}
    assert scored_by_hand(engine) == {"alice": (4, 0)}
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "app.db"), "gold", "results"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("alice  gq  ")]
    assert lines == [f"alice  gq  “Caption number {n} of q.”: P5 R1 wrong; changed after "
                     "feedback to P5 R4" for n in range(4)]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "app.db"), "gold", "accuracy"])
    assert "alice: 0/4 right (0%); 4 changed afterwards" in result.output


def test_the_feedback_names_exactly_the_first_answers_answer_is_right_refuses(engine,
                                                                             tmp_path):
    """The feedback is judged in SQL (`first_right_clause`), so that a team's function
    returns no key: over random first answers (incomplete ones too), it names a gold
    caption exactly when `answer_is_right` finds its first answer wrong."""
    import_gold(engine, gold_file(tmp_path), actor="lead", feedback=True)
    answer = GoldAnswer.__table__
    _, captions = gold_rows(engine)
    draw = random.Random(45)
    with engine.begin() as connection:
        me, _ = register(connection, "alice", None)
        connection.execute(answer.insert(), [
            {"gold_caption_id": caption.id, "annotator_id": me, "note": "", "seconds": 0,
             "rubric": caption.rubric, "created_at": utcnow(), "updated_at": utcnow()}
            for caption in captions])
    for _ in range(40):
        first = {caption.id: {"precision": draw.choice([None, 1, 3, 4, 5]),
                              "recall": draw.choice([None, 1, 2, 3, 5]),
                              "fluency": draw.choice([None, 0.0, 0.5, 1.0]),
                              "conciseness": 0.0, "inclusive": draw.choice([0.0, 0.5])}
                 for caption in captions}
        with engine.begin() as connection:
            for caption_id, values in first.items():
                connection.execute(answer.update().where(
                    answer.c.gold_caption_id == caption_id).values(
                    first_answered_at=utcnow(),
                    **{f"first_{key}": value for key, value in values.items()}))
            named = {row.text for caption in captions for row in connection.execute(
                feedback_query(literal(caption.gold_image_id), literal(me)))}
        assert named == {caption.text for caption in captions
                         if not answer_is_right(first[caption.id], caption._mapping)}


def test_undo_and_retyping_keep_the_first_complete_answer(engine, tmp_path):
    """Taking back a complete gold answer and typing another does not replace the scored
    one; a half answer (P alone) is not yet one, so correcting it before R counts."""
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    index = next(i for i, image in enumerate(session.images)
                 if is_gold(image.id) and len(session.open_image(i)) == 1)  # g2 or g3
    (group,) = session.open_image(index)
    group = session.set_values(group, {"precision": 1}, image_index=index, focus=0)
    group = session.set_values(group, {"precision": 5}, image_index=index, focus=0)
    group = session.set_values(group, {"recall": 1}, image_index=index, focus=0)
    first = [(row.first_precision, row.first_recall) for row in answers(engine)]
    assert first == [(5, 1)]
    session.undo()
    session.set_values(session.group_for_caption(group.caption_ids[0]), {"recall": 5},
                       image_index=index, focus=0)
    (row,) = answers(engine)
    assert (row.precision, row.recall) == (5, 5)
    assert [(row.first_precision, row.first_recall)] == first
    assert scored_by_hand(engine) == {
        "alice": (1, int(gold_results(engine)[0].right))}
    assert gold_results(engine)[0].changed_to is not None


def test_the_upgrade_scores_answers_changed_before_it_by_their_first(tmp_path):
    """A database of 0013 whose gold answers were changed after their first complete
    answer (one retyped, one taken back by undo and retyped, one right at once): 0014
    finds each one's first complete answer in the event log, so its accuracy drops to
    what was first answered."""
    from sqlalchemy import create_engine

    from storage import open_database
    from tests.test_migrations import T0, insert_rows, migrate

    old = create_engine(f"sqlite:///{tmp_path / '0013.db'}")
    migrate(old, "0013")
    answer = {"gold_caption_id": 1, "annotator_id": 1, **RIGHT, "fluency": 0.0,
              "conciseness": 0.0, "inclusive": 0.0, "note": "", "seconds": 1.0,
              "rubric": "thumb-1.0", "created_at": T0, "updated_at": T0}
    changes = [(1, "a", {**WRONG}), (1, "b", {"recall": 4}),  # retyped
               (2, "c", {"precision": 5}), (2, "d", {"recall": 4}),  # right at once
               (3, "e", {**WRONG}), (3, "f", {"recall": None}),  # undone, then retyped
               (3, "g", {"recall": 4})]
    insert_rows(old, {
        "annotator": [{"id": 1, "name": "alice", "created_at": T0}],
        "gold_image": [{"id": 1, "key": "gq", "created_at": T0}],
        "gold_caption": [{"id": n, "gold_image_id": 1, "text": f"Caption {n}.",
                          "precision_min": 4, "precision_max": 5, "recall_min": 3,
                          "recall_max": 5, "fluency_max": 0.0, "conciseness_max": 0.0,
                          "inclusive_max": 0.0, "reason": "r", "rubric": "thumb-1.0",
                          "created_at": T0} for n in (1, 2, 3)],
        "gold_answer": [{**answer, "id": n, "gold_caption_id": n} for n in (1, 2, 3)],
        "event_log": [{"at": T0, "actor": "alice", "action": "update",
                       "table_name": "gold_answer", "row_id": row, "field_name": field,
                       "new_value": json.dumps(value), "change_id": change}
                      for row, change, values in changes for field, value in values.items()],
    })
    old.dispose()
    engine = open_database(tmp_path / "0013.db")
    assert [(row.first_precision, row.first_recall) for row in answers(engine)] == [
        (5, 1), (5, 4), (5, 1)]
    assert {row.annotator: (row.answered, row.correct, row.changed)
            for row in gold_accuracy(engine)} == {"alice": (3, 1, 2)}
    assert scored_by_hand(engine) == {"alice": (3, 1)}


def test_gold_keeps_its_places_across_sessions(engine, tmp_path):
    """Two sessions of one annotator list gold at the same places though gold was answered
    between them; and where others took real images meanwhile, each gold image still
    follows the same real images, as the real images keep their order."""
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5)
    first = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    keys = [image.key for image in first.images]
    gold_at = [i for i, image in enumerate(first.images) if is_gold(image.id)]
    assert len(gold_at) == 3
    last = gold_at[-1]  # the last gold image answered first: it was listed first after
    for group in first.open_image(last):
        first.set_values(group, RIGHT, image_index=last, focus=0)
    first.close()
    again = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    assert [image.key for image in again.images] == keys
    taken = [image.key for image in first.images if not is_gold(image.id)][::3]
    bob = AnnotationSession(engine, "bob", seed_source=lambda: 2)
    for index, image in enumerate(bob.images):
        if image.key in taken:
            for group in bob.open_image(index):
                bob.set_values(group, RIGHT, image_index=index, focus=0)
    bob.close()
    later = [image.key for image in AnnotationSession(engine, "alice").images]
    assert set(later) == set(keys) - set(taken)
    assert later == [key for key in keys if key not in taken]


def test_a_rate_that_cannot_be_met_says_what_it_will_be(engine, tmp_path):
    """`thumb gold rate 0.5` with 4 gold images and the 15 project images: 15 gold images
    would make half of each list gold, 4 can; the command says the share will be
    4 / (4 + 15), and a session lists just that."""
    from thumb_tui.cli import app as cli

    four = "image,caption,precision,recall,reason\n" + "".join(
        f"g{n},Caption {n}.,4-5,3-5,Why {n}.\n" for n in range(4))
    import_gold(engine, gold_file(tmp_path, four), actor="lead")
    with engine.connect() as connection:
        real = connection.exec_driver_sql("SELECT count(*) FROM image").scalar_one()
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(tmp_path / "app.db"), "gold", "rate", "0.5"])
    assert result.exit_code == 0, result.output
    will_be = 4 / (4 + real)
    assert (f"gold rate 0.5 asked; with 4 gold images and {real} real images the rate "
            f"will be {will_be:.2f} ({real} gold images would reach it)") in result.output
    session = AnnotationSession(engine, "alice")
    seeded = sum(is_gold(image.id) for image in session.images)
    assert seeded / len(session.images) == pytest.approx(will_be)
    result = runner.invoke(cli, ["--db", str(tmp_path / "app.db"), "gold", "rate", "0.1"])
    assert "asked" not in result.output  # 0.1 of 15 real images wants 2: there are 4


# --- excluded from every analysis --------------------------------------------------------

def analyses(engine, tmp_path) -> dict[str, object]:
    from reports.agreement import agreement_report
    from reports.thumb.tables import build_report
    from storage.exporter import export_frame

    def timeless(frame: pd.DataFrame) -> pd.DataFrame:
        """Aside: when each row was written, the caption ids (drawn at random) and the
        rating ids (identical captions are rated together in the order of their ids)."""
        return frame[[c for c in frame.columns if not str(c).endswith("_at")
                      and c not in ("image", "caption_id", "rating_id")]].reset_index(
            drop=True)

    board = dashboard(engine)
    exported = timeless(export_frame(engine, tmp_path / "out.csv"))
    report = build_report(engine, bootstrap=20)
    return {
        "stages": board.stages, "images": board.images, "captions": board.captions,
        "rated": [(p.name, p.rated_images, p.reviewed_images) for p in board.annotators],
        "export": exported,
        "agreement": agreement_report(engine, bootstrap=20).reset_index(drop=True),
        "report": timeless(report.data),
    }


@pytest.mark.slow
def test_gold_changes_no_analysis(tmp_path):
    without, with_gold = tmp_path / "a", tmp_path / "b"
    without.mkdir()
    with_gold.mkdir()
    plain = sample_engine(without)
    seeded = sample_engine(with_gold)
    import_gold(seeded, gold_file(with_gold), actor="lead", rate=0.5, feedback=True)
    campaign(plain)
    campaign(seeded)
    assert answers(seeded) and not answers(plain)
    a, b = analyses(plain, without), analyses(seeded, with_gold)
    for name in a:
        if isinstance(a[name], pd.DataFrame):
            pd.testing.assert_frame_equal(a[name], b[name], check_like=True, obj=name)
        else:
            assert a[name] == b[name], name


@pytest.mark.slow
def test_the_report_has_a_gold_table_only_with_gold(tmp_path):
    from reports.thumb.render import _markdown_tables, to_json
    from reports.thumb.tables import build_report

    (tmp_path / "plain").mkdir()
    engine = sample_engine(tmp_path / "plain")
    campaign(engine)
    plain = build_report(engine, bootstrap=0)
    assert plain.gold.empty and "gold" not in plain.header
    assert not any("Gold" in title for title, _ in _markdown_tables(plain))
    engine = sample_engine(tmp_path)
    import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5)
    campaign(engine)
    report = build_report(engine, bootstrap=0)
    rows = json.loads(to_json(report))["gold"]
    expected = expected_accuracy(engine)
    assert {r["annotator"]: (r["answered"], r["correct"]) for r in rows} == expected
    assert report.header["gold"] == {"captions": 4, "rate": 0.5, "feedback": "off"}
    (title, table), = [(t, x) for t, x in _markdown_tables(report) if t.startswith("Gold")]
    assert "4 gold captions" in title and "alice" in table


# --- on screen ---------------------------------------------------------------------------

def structure(screen: AnnotateScreen) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """The screen's widgets (type, id, classes) in order: its structure, texts aside."""
    return [(type(widget).__name__, widget.id, tuple(sorted(widget.classes)))
            for widget in screen.query("*")]


@pytest.mark.slow
async def test_a_gold_image_looks_like_any_image_and_is_answered(engine, tmp_path):
    four = "image,caption,precision,recall,reason\n" + "".join(
        f"gq,Caption number {n} of q.,4-5,3-5,Why {n}.\n" for n in range(4))
    import_gold(engine, gold_file(tmp_path, four), actor="lead", rate=0.5, feedback=True)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    app = ThumbApp(session, "none")
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    real_index = 0 if gold_index else 1
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, AnnotateScreen)
        screen.load_image(real_index)
        await pilot.pause()
        real_text, real_structure = screen_text(app), structure(screen)
        screen.load_image(gold_index)
        await pilot.pause()
        gold_text = screen_text(app)
        assert "gold" not in gold_text.lower() and "gq" in gold_text
        assert len(screen.cards) == 4
        assert structure(screen) == real_structure
        assert len(gold_text.splitlines()) == len(real_text.splitlines())
        assert f"Image {gold_index + 1}/{len(session.images)}" in gold_text
        for _ in screen.groups:  # P5 R1 on every caption: recall out of range
            await pilot.press("5", "1")
        await pilot.pause()
        assert session.is_complete(session.images[gold_index])
        await pilot.press("right_square_bracket")
        await pilot.pause()
        message = str(screen.query_one("#message", Static).content)
        assert "Why 0." in message and "gold" not in message.lower()
        await pilot.pause()  # the message names each caption with its reason, wrapped
        notice = " ".join(screen_text(app).split())
        for n in range(4):
            assert f"Caption number {n} of q.”: Why {n}." in notice
    stored = answers(engine)
    assert len(stored) == 4 and {(r.precision, r.recall) for r in stored} == {(5, 1)}
    assert gold_accuracy(engine)[0].correct == 0


@pytest.mark.slow
async def test_no_feedback_when_off(engine, tmp_path):
    four = "image,caption,precision,recall,reason\n" + "".join(
        f"gq,Caption number {n} of q.,4-5,3-5,Why {n}.\n" for n in range(4))
    import_gold(engine, gold_file(tmp_path, four), actor="lead", rate=0.5, feedback=False)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    app = ThumbApp(session, "none")
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        screen.load_image(gold_index)
        await pilot.pause()
        for _ in screen.groups:
            await pilot.press("5", "1")
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert "Why" not in str(screen.query_one("#message", Static).content)
    assert len(answers(engine)) == 4


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("THUMB_TEST_POSTGRES"),
                    reason="THUMB_TEST_POSTGRES is not set")
def test_gold_on_postgresql(tmp_path):
    from benchmarks.races import drop_everything
    from storage import import_captions, open_database
    from tests.conftest import SAMPLE_CSV

    url = os.environ["THUMB_TEST_POSTGRES"]
    drop_everything(url)
    engine = open_database(url)
    try:
        import_captions(engine, SAMPLE_CSV, actor="t")
        import_gold(engine, gold_file(tmp_path), actor="lead", rate=0.5, feedback=True)
        session = AnnotationSession(engine, "alice")
        index = next(i for i, image in enumerate(session.images)
                     if is_gold(image.id) and image.key == "01_red_balls")  # g1, by its file
        for group in session.open_image(index):
            session.set_values(group, {"precision": 5, "recall": 5}, image_index=index,
                               focus=0)
        assert session.undo() is not None
        # two captions answered, one taken back: the first complete answer still counts
        # (#44: going back cannot change a scored answer), and it is counted as changed
        assert {r.annotator: (r.answered, r.changed) for r in gold_accuracy(engine)} == {
            "alice": (2, 1)}
        with pytest.raises(DBAPIError), engine.begin() as connection:
            connection.execute(GoldAnswer.__table__.insert().values(
                gold_caption_id=1, annotator_id=session.annotator_id, precision=9, recall=3,
                rubric="thumb-1.0"))
    finally:
        engine.dispose()
        drop_everything(url)


async def test_the_lead_s_gold_key_never_reaches_the_screen(engine, tmp_path):
    """A gold image is shown by its file's name, as a project image is; the key the lead
    gave it in the gold file (here one that says what it is) appears nowhere, not even in
    the broken-image dialog."""
    four = "image,path,caption,precision,recall,reason\n" + "".join(
        f"GOLD-check-7,images/01_red_balls.png,Caption {n} of it.,4-5,3-5,Why {n}.\n"
        for n in range(4))
    import_gold(engine, gold_file(tmp_path, four), actor="lead", rate=0.5)
    session = AnnotationSession(engine, "alice", seed_source=lambda: 1)
    gold_index = next(i for i, image in enumerate(session.images) if is_gold(image.id))
    assert session.images[gold_index].key == "01_red_balls"
    app = ThumbApp(session, "none")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.load_image(gold_index)
        await pilot.pause()
        shown = screen_text(app)
        await pilot.press("x")
        await pilot.pause()
        shown += screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        shown += screen_text(app)
    assert "01_red_balls" in shown and "gold" not in shown.lower()
