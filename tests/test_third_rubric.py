"""A third rubric rates on screen with nothing of THUMB 1.0 shown: TS-7 (tests/rubrics/
ts7-1.toml: Truth 1-7 and Scope 1-3 weighted 0.2/0.8, a Grammar penalty of 0.3 per error
capped at 0.6, a Bias penalty the rater sets from 0.5 to 1.5) by the digit keys and
ZT-10 (tests/rubrics/zt10-1.toml: two 0-10 scales) by a typed score; then TS-7 through
import, annotate, review, resolve, the fluency round, agreement, the report and export."""

from __future__ import annotations

import csv
import datetime
import itertools
import json
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from reports.thumb.render import write_report
from reports.thumb.tables import build_report
from rubrics import load_rubric
from storage import final_scores, import_captions, open_database
from storage.models import Annotator, Rating, Stage
from storage.rating.project_queues import disagreements, fluency_queue
from storage.rating.rating_sessions import AnnotationSession, FluencyRoundSession, ResolutionSession
from tests.app_helpers import fixed_seeds, make_app, sample_engine, screen_text
from tests.conftest import SAMPLE_CSV
from thumb_tui.app import ThumbApp
from thumb_tui.cli import app as cli
from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
from thumb_tui.screens.entry import EntryScreen
from thumb_tui.screens.fluency import FluencyScreen
from thumb_tui.screens.fluency_round import FluencyRoundScreen
from thumb_tui.screens.help import HelpScreen
from thumb_tui.screens.resolve import ReasonScreen, ResolveScreen

RUBRICS = Path(__file__).parent / "rubrics"
TS7 = load_rubric(RUBRICS / "ts7-1.toml")
ZT10 = load_rubric(RUBRICS / "zt10-1.toml")
# Words that only THUMB 1.0 (or the rating table's column names) would put on a screen;
# the program's own name, thumb-tui, is no THUMB word.
THUMB_WORDS = re.compile(r"precision|recall|fluen|concise|inclusive|P/R|THUMB(?!-tui)",
                         re.IGNORECASE)
runner = CliRunner()


def message(app: ThumbApp) -> str:
    return str(app.screen.query_one("#message").content)


def entry_error(app: ThumbApp) -> str:
    return str(app.screen.query_one("#entry-error").content)


def ratings(engine: Engine, annotator: str, stage: Stage = Stage.FIRST) -> dict[int, dict]:
    """An annotator's ratings at a stage, by caption id, as the database holds them."""
    rating, person = Rating.__table__, Annotator.__table__
    with engine.connect() as connection:
        rows = connection.execute(
            select(rating).join(person, rating.c.annotator_id == person.c.id)
            .where(person.c.name == annotator, rating.c.stage == int(stage))).mappings().all()
    return {row["caption_id"]: dict(row) for row in rows}


async def settle(pilot) -> None:
    """Let a dialog just opened (or a screen just changed) paint before reading it."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await pilot.pause(0.05)


def thumb_words(text: str) -> list[str]:
    return sorted({match.group(0).lower() for match in THUMB_WORDS.finditer(text)})


def test_the_rubrics_take_digits_or_typed_scores():
    from thumb_tui.screens.annotate import digit_scores
    assert digit_scores(TS7) and not digit_scores(ZT10)
    assert [d.label for d in TS7.dimensions] == ["Truth", "Scope"]
    assert TS7.penalty("inclusive").types[0].min == 0.5


@pytest.mark.slow
async def test_rating_by_digit_keys_under_a_one_to_seven_rubric(tmp_path):
    """6 and 7 score Truth; a digit off Scope's scale says so and writes nothing; the Bias
    amount is typed (refused outside 0.5-1.5); a Grammar error from the dialog."""
    engine = sample_engine(tmp_path, rubric=TS7)
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        shown = screen_text(app)
        assert " 1-7  score T/S " in shown and " ←→  T/S " in shown
        assert " f  grammar " in shown and " i  bias " in shown and " c  " not in shown
        first, second = screen.groups[0], screen.groups[1]
        await pilot.press("6")
        assert screen.dimension == "recall"
        await pilot.press("7")  # Scope takes 1-3
        assert message(app) == "Scope takes 1–3: not saved"
        assert screen.groups[0].values["recall"] is None
        assert ratings(engine, "alice")[first.caption_ids[0]]["recall"] is None
        await pilot.press("3")
        assert screen.focus_index == 1 and "f i n still act on 1" in message(app)
        await pilot.press("i")  # Bias: a ranged type, so its amount is typed
        assert isinstance(app.screen, EntryScreen)
        assert "from 0.5 to 1.5" in screen_text(app)
        await pilot.press("2", "enter")
        assert isinstance(app.screen, EntryScreen)
        assert "takes 0.5–1.5, not 2" in entry_error(app)
        await pilot.pause()  # the refusal wraps in the dialog: its end is on screen at 80x24
        assert "not 2" in screen_text(app).replace("\n", " ")
        await pilot.press("backspace", *"abc", "enter")
        assert "is not a number" in entry_error(app)
        await pilot.press(*["backspace"] * 3, *"1.2", "enter")
        assert app.screen is screen
        await pilot.press("f")
        assert isinstance(app.screen, FluencyScreen)
        assert "Grammar errors now: none" in screen_text(app)
        await pilot.press("enter")  # the first type: agreement, 0.3
        assert app.screen is screen
        await pilot.press("7", "1")  # the second caption: Truth 7, Scope 1
        await pilot.press("0")
        assert message(app) == "Truth takes 1–7: not saved"
    rows = ratings(engine, "alice")
    assert {k: rows[first.caption_ids[0]][k] for k in (
        "precision", "recall", "fluency", "fluency_type", "inclusive", "inclusive_type",
        "conciseness", "rubric")} == {
        "precision": 6, "recall": 3, "fluency": pytest.approx(0.3), "fluency_type": "agreement",
        "inclusive": pytest.approx(1.2), "inclusive_type": "stereotype", "conciseness": 0.0,
        "rubric": "ts7-1"}
    assert (rows[second.caption_ids[0]]["precision"], rows[second.caption_ids[0]]["recall"]) \
        == (7, 1)
    assert rows[second.caption_ids[0]]["inclusive"] == 0.0


@pytest.mark.slow
async def test_rating_by_typed_scores_under_a_zero_to_ten_rubric(tmp_path):
    """0-10 has eleven levels: `s` (or a digit, typed in) opens the entry; 10 and 0 are
    saved, 11 and words are refused with the reason; the fixed Padding penalty cycles."""
    engine = sample_engine(tmp_path, rubric=ZT10)
    app = make_app(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        shown = screen_text(app)
        assert " s  type a score K/M " in shown and " c  padding " in shown
        assert "0-10  score" not in shown and " f  " not in shown
        first = screen.groups[0]
        await pilot.press("s")
        assert isinstance(app.screen, EntryScreen)
        await pilot.press("1", "1", "enter")
        assert "Correctness takes 0–10, not 11" in entry_error(app)
        await pilot.press("backspace", "0", "enter")
        assert app.screen is screen and screen.groups[0].values["precision"] == 10
        assert screen.dimension == "recall"
        await pilot.press("escape")  # nothing open: nothing happens
        await pilot.press("0")  # a digit opens the entry with it typed
        assert isinstance(app.screen, EntryScreen)
        assert app.screen.query_one("#entry-input").value == "0"
        await pilot.press("escape")  # cancelled: nothing saved
        assert screen.groups[0].values["recall"] is None
        await pilot.press("s", "0", "enter")
        assert screen.focus_index == 1
        await pilot.press("c")
        assert "D 1" in screen_text(app)
    row = ratings(engine, "alice")[first.caption_ids[0]]
    assert (row["precision"], row["recall"], row["conciseness"], row["conciseness_type"],
            row["fluency"], row["inclusive"], row["rubric"]) == (10, 0, 1.0, "padded", 0.0,
                                                                0.0, "zt10-1")


# -- every rating screen under TS-7, grepped for THUMB's words -------------------------------

def rate_all(session: AnnotationSession, scores: tuple[int, int], **extra: object) -> None:
    for index in range(len(session.images)):
        for group in session.open_image(index):
            session.set_values(group, {"precision": scores[0], "recall": scores[1], **extra},
                               image_index=index, focus=0)


def review_all(engine: Engine, change_first: int) -> None:
    """Bob reviews every image, changing Truth of the first caption of the first
    `change_first` images (the disagreements)."""
    seeds = itertools.count(2000)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: next(seeds))
    for index in range(len(bob.images)):
        for number, group in enumerate(bob.open_image(index)):
            assert group.reference is not None
            values = {k: v for k, v in group.reference.items() if k != "note"}
            if index < change_first and number == 0:
                values["precision"] = 1
            bob.set_values(group, values, image_index=index, focus=0)


def add_native(engine: Engine, name: str = "dave") -> None:
    with engine.begin() as connection:
        connection.execute(Annotator.__table__.insert().values(
            name=name, native_english=True, created_at=datetime.datetime(2026, 1, 1)))


@pytest.mark.slow
async def test_no_rating_screen_shows_thumb_words_under_another_rubric(tmp_path):
    engine = sample_engine(tmp_path, rubric=TS7)
    seen: dict[str, str] = {}

    app = make_app(engine)  # annotate, caption card, both dialogs, help
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await settle(pilot)
        seen["annotate"] = screen_text(app)
        await pilot.press("6", "3")
        await settle(pilot)
        seen["annotate, scored"] = screen_text(app) + message(app)
        await pilot.press("i")
        await settle(pilot)
        seen["penalty entry"] = screen_text(app)
        await pilot.press(*"9", "enter")
        await settle(pilot)
        seen["penalty entry, refused"] = screen_text(app)
        await pilot.press("backspace", *"0.7", "enter", "f")
        await settle(pilot)
        seen["error dialog"] = screen_text(app)
        await pilot.press("enter", "f", "enter", "f", "enter")  # over Grammar's cap
        await settle(pilot)
        seen["annotate, penalties"] = screen_text(app) + message(app)
        await pilot.press("up", "u")
        await settle(pilot)
        seen["undo"] = message(app)
        await pilot.press("s")  # no typed entry on a digit rubric: says so
        await settle(pilot)
        seen["unbound key"] = message(app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await settle(pilot)
        seen["help"] = screen_text(app)
        # the keys section (past the screen's end) lists binding ids, which stay THUMB's
        # (they are the keymap's stable names): what is shown besides them counts
        source = app.screen.query_one("Markdown").source
        await settle(pilot)
        seen["help, all of it"] = re.sub(r"\(id `[^`]*`\)|e\.g\. `\[keymap\]` then `[^`]*`",
                                         "", source)
    assert "Truth" in seen["help, all of it"] and "Bias" in seen["help, all of it"]

    alice = AnnotationSession(engine, "alice")
    rate_all(alice, (5, 2), fluency=0.3, fluency_type="article", note="seen")
    review = ThumbApp(screen=ReviewScreen(AnnotationSession(
        engine, "bob", stage=Stage.SECOND, seed_source=lambda: 2), "none"))
    async with review.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await settle(pilot)
        seen["review"] = screen_text(review)
        assert "stage 1: T 5  S 2  G 0.3  B -" in seen["review"]
        await pilot.press("1", "a")
        await settle(pilot)
        seen["review, changed"] = screen_text(review) + message(review)
    assert "grammar: article" in seen["review"]
    review_all(engine, change_first=2)

    resolve = ThumbApp(screen=ResolveScreen(ResolutionSession(engine, "carol"),
                                            disagreements(engine), "none"))
    async with resolve.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await settle(pilot)
        seen["resolve"] = screen_text(resolve)
        await pilot.press("a", "r")
        assert isinstance(resolve.screen, ReasonScreen)
        await settle(pilot)
        seen["reasons"] = screen_text(resolve)
        await pilot.press("enter", "]")
        await settle(pilot)
        seen["resolve, next"] = screen_text(resolve) + message(resolve)

    add_native(engine)
    queue = fluency_queue(engine)
    assert queue
    round_app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), queue))
    async with round_app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await settle(pilot)
        seen["fluency round"] = screen_text(round_app)
        await pilot.press("f")
        await settle(pilot)
        seen["fluency round dialog"] = screen_text(round_app)
        await pilot.press("enter", "[", "x")
        await settle(pilot)
        seen["fluency round, verdicts"] = screen_text(round_app)
        await pilot.press("question_mark")
        await settle(pilot)
        seen["fluency round help"] = screen_text(round_app)
    empty = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"), []))
    async with empty.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await settle(pilot)
        seen["fluency round, empty"] = screen_text(empty)

    assert "Grammar round 1/" in seen["fluency round"]
    hits = {name: words for name, text in seen.items() if (words := thumb_words(text))}
    assert hits == {}, "\n\n".join(seen[name] for name in hits)


# -- end to end ---------------------------------------------------------------------------

def _ts7_ratings(tmp_path: Path, skip_image: str) -> Path:
    """The sample project's example ratings moved onto TS-7's scales (Truth as rated,
    Scope capped at 3, a Grammar error for THUMB's fluency errors, no conciseness), one
    Bias penalty of 0.7 (inside its range, not its minimum), without the image rated on
    the screens."""
    with (SAMPLE_CSV.parent / "example_ratings.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["image_id"] != skip_image]
    out = tmp_path / "ts7_ratings.csv"
    biased = False
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[
            "image_id", "system", "caption", "annotator", "stage", "precision", "recall",
            "fluency", "fluency_type", "inclusive", "inclusive_type"])
        writer.writeheader()
        for row in rows:
            bias = not biased and row["stage"] == "1"
            biased = biased or bias
            writer.writerow({
                **{k: row[k] for k in ("image_id", "system", "caption", "annotator", "stage")},
                "precision": row["precision"],
                "recall": min(int(row["recall"]), 3),
                "fluency": 0.3 if row["fluency"] else 0,
                "fluency_type": "article" if row["fluency"] else "",
                "inclusive": 0.7 if bias else 0,
                "inclusive_type": "stereotype" if bias else "",
            })
    return out


@pytest.mark.slow
async def test_the_third_rubric_end_to_end(tmp_path):
    """TS-7 through import (a ranged Bias amount of 0.7 included), the annotate screen
    rated by keys, review, resolve, the fluency round, agreement, export and the report:
    its names, scales and weights everywhere, and none of THUMB's words."""
    db = str(tmp_path / "ts7.db")
    imported = runner.invoke(cli, ["--db", db, "import", str(SAMPLE_CSV), "--rubric",
                                   str(RUBRICS / "ts7-1.toml")])
    assert imported.exit_code == 0, imported.output
    engine = open_database(db)
    seeds = fixed_seeds()
    alice = AnnotationSession(engine, "alice", seed_source=lambda: next(seeds))
    assert alice.rubric == TS7

    app = ThumbApp(alice, "none")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, AnnotateScreen)
        await pilot.pause()
        await pilot.press("6", "3", "i", *"1.5", "enter", "f", "enter")
        for _ in screen.groups[1:]:
            await pilot.press("7", "2")
        groups = list(screen.groups)
        image_key = alice.images[screen.image_index].key
    stage_one = ratings(engine, "alice")
    first = stage_one[groups[0].caption_ids[0]]
    assert (first["precision"], first["recall"], first["fluency"], first["fluency_type"],
            first["inclusive"], first["inclusive_type"]) == (6, 3, pytest.approx(0.3),
                                                             "agreement", 1.5, "stereotype")
    assert all((stage_one[g.caption_ids[0]]["precision"], stage_one[g.caption_ids[0]]["recall"])
               == (7, 2) for g in groups[1:])
    assert groups[0].total(TS7) == pytest.approx(0.2 * 6 + 0.8 * 3 - 0.3 - 1.5)

    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND, seed_source=lambda: next(seeds))
    review = ThumbApp(screen=ReviewScreen(bob, "none"))
    async with review.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert bob.images[review.screen.image_index].key == image_key
        shown = screen_text(review)
        assert "stage 1: T 6  S 3  G 0.3  B 1.5" in shown
        await pilot.press("4")  # bob lowers Truth of the first caption to 4 (Scope kept)
        await pilot.press("3", "A")  # and accepts the rest as they are
    reviewed = ratings(engine, "bob", Stage.SECOND)
    assert reviewed[groups[0].caption_ids[0]]["precision"] == 4
    assert reviewed[groups[0].caption_ids[0]]["inclusive"] == 1.5

    # the rest of the project from a file, a ranged Bias amount of 0.7 among its values
    import_captions(engine, _ts7_ratings(tmp_path, image_key), actor="t")
    everything = ratings(engine, "ann-a")
    assert any(row["inclusive"] == pytest.approx(0.7) and row["inclusive_type"] == "stereotype"
               for row in everything.values())

    queue = disagreements(engine)
    assert groups[0].caption_ids[0] in {item.caption_id for item in queue}
    resolve = ThumbApp(screen=ResolveScreen(ResolutionSession(engine, "carol"), queue, "none"))
    async with resolve.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for _ in queue:  # the stage-1 values are right: taken, the reason pre-ticked
            await pilot.press("a", "r", "enter", "]")
    assert disagreements(engine) == []
    resolved = ratings(engine, "carol", Stage.FINAL)[groups[0].caption_ids[0]]
    assert (resolved["precision"], resolved["recall"], resolved["inclusive"],
            resolved["fluency_type"]) == (6, 3, 1.5, "agreement")

    add_native(engine)
    waiting = fluency_queue(engine)
    assert waiting
    round_app = ThumbApp(screen=FluencyRoundScreen(FluencyRoundSession(engine, "dave"),
                                                   waiting))
    async with round_app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("f", "down", "enter")  # the first caption: an article error
        for _ in waiting[1:]:
            await pilot.press("x")
    assert fluency_queue(engine) == []

    finals = final_scores(engine)
    assert set(finals["rubric"]) == {"ts7-1"}
    expected = (0.2 * finals["precision"] + 0.8 * finals["recall"] - finals["fluency"]
                - finals["inclusive"])
    assert finals["total"].to_numpy() == pytest.approx(expected.to_numpy())
    assert finals["recall"].max() <= 3 and finals["conciseness"].eq(0).all()
    checked = finals.set_index("caption_id").loc[waiting[0].caption_id]
    assert checked["fluency"] == pytest.approx(0.3)

    agreement = runner.invoke(cli, ["--db", db, "agreement", "--bootstrap", "0"])
    assert agreement.exit_code == 0, agreement.output
    assert re.search(r"statistic +T +S +grammar>0 +Total\n", agreement.output)
    # the confusion matrices on each scale: Truth 1-7, Scope 1-3 only
    assert re.search(r"T +1 +2 +3 +4 +5 +6 +7 +S +1 +2 +3 +grammar>0 ", agreement.output)
    assert thumb_words(agreement.output) == []

    out = tmp_path / "export.jsonl"
    exported = runner.invoke(cli, ["--db", db, "export", "--format", "jsonl", "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    first_row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first_row["rubric"] == "ts7-1"
    assert not {"conciseness", "conciseness_type"} & set(first_row)
    csv_out = tmp_path / "export.csv"
    assert runner.invoke(cli, ["--db", db, "export", "--format", "csv", "--out",
                               str(csv_out)]).exit_code == 0
    header = csv_out.read_text(encoding="utf-8").splitlines()[0]
    assert "conciseness" not in header

    report = build_report(engine, bootstrap=0)
    assert report.rubric == TS7
    markdown = write_report(report, tmp_path / "report", "md").read_text(encoding="utf-8")
    # the tables' header rows (the section headings cite the paper's tables: "THUMB
    # Table 2", which names the layout's source rather than the rubric)
    headers = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert re.search(r"\| system +\| +n \| +T \| +S \| +Gram \| +Bias \| +Total \|",
                     markdown), markdown
    assert thumb_words("\n".join(headers)) == []
    assert "ts7-1" in markdown


# -- the keymap knows every score key ------------------------------------------------------

def test_the_keymap_accepts_the_new_score_keys_and_refuses_clashes(tmp_path):
    from tests.test_keymap import write_keymap
    from thumb_tui.keymap import KeymapError, load_keymap

    write_keymap('[keymap]\nscore-7 = "z"\ntype-score = "t"\nscore-0 = "ctrl+0"\n')
    assert load_keymap() == {"score-7": "z", "type-score": "t", "score-0": "ctrl+0"}
    write_keymap('[keymap]\nfluency = "7"\n')  # 7 scores on a 1-7 scale
    with pytest.raises(KeymapError, match="the key '7' would do both score-7 and fluency"):
        load_keymap()
    write_keymap('[keymap]\nnote = "s"\n')
    with pytest.raises(KeymapError, match="the key 's' would do both type-score and note"):
        load_keymap()


async def test_remapped_score_keys_rate_under_another_rubric(tmp_path):
    engine = sample_engine(tmp_path, rubric=TS7)
    seeds = fixed_seeds()
    app = ThumbApp(AnnotationSession(engine, "alice", seed_source=lambda: next(seeds)), "none",
                   keymap={"score-7": "z", "score-3": "y"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("z", "y")
        group = app.screen.groups[0]
    assert (group.values["precision"], group.values["recall"]) == (7, 3)


def test_the_error_dialog_offers_only_amounts_a_ranged_type_allows():
    from rubrics import ErrorType
    from thumb_tui.screens.fluency import range_values

    odd = ErrorType("odd", "Odd", 0.25, 0.75)
    assert range_values(odd) == (0.25, 0.35, 0.45, 0.55, 0.65, 0.75)  # no 0.2 (round)
    thumb = {t.code: range_values(t) for t in load_rubric("thumb-1.0").penalty("fluency").types
             if not t.fixed}
    assert thumb == {"awkward": (0.1, 0.2, 0.3, 0.4, 0.5),
                     "broken": tuple(step / 2 for step in range(1, 11))}
