"""A small campaign end to end (issue 26, "Done when"): two annotators rate the sample
project with gold items seeded into their stage-1 images while `thumb monitor` runs under
Pilot; each refresh shows their progress, their gold accuracy and agreement on the blind
double ratings as the ratings arrive, and a gold alert once an annotator's gold accuracy is
low enough over enough answers. Every expected figure is computed here from what the test
itself wrote (or read back from the rows), not by the code under test; the monitor writes
nothing at any point."""

from __future__ import annotations

import random

import krippendorff
import numpy as np
import pytest

from storage.rating.gold import import_gold, is_gold
from storage.rating.project_queues import assign_double
from storage.rating.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine, screen_text
from tests.conftest import database_dump
from tests.test_gold import gold_file
from tests.test_monitor import blind_values, monitor_app, reading, refreshed, row_of, ticking

# gold caption -> ((P min, P max), (R min, R max)); no penalty column: none is acceptable
GOLD = {
    "Three red balls on grass.": ((4, 5), (3, 5)),
    "A cat asleep on a sofa.": ((1, 1), (1, 2)),
    "Two people walking a dog.": ((3, 4), (3, 3)),
    "A boat on a calm lake.": ((2, 3), (2, 4)),
    "Snow on a mountain.": ((5, 5), (4, 5)),
    "A crowded city street.": ((1, 2), (1, 2)),
}
GOLD_IMAGES = {"g1": list(GOLD)[0:2], "g2": list(GOLD)[2:4], "g3": list(GOLD)[4:6]}
GOLD_CSV = "image,caption,precision,recall,reason\n" + "".join(
    f"{image},{caption},{GOLD[caption][0][0]}-{GOLD[caption][0][1]},"
    f"{GOLD[caption][1][0]}-{GOLD[caption][1][1]},Reason for {image}.\n"
    for image, captions in GOLD_IMAGES.items() for caption in captions)
RATE = 0.25
MIN_GOLD, ALERT_GOLD = 3, 0.7  # the monitor's defaults


def gold_answer(caption: str, right: bool) -> dict[str, int]:
    """P and R inside the gold ranges (right) or P outside them (wrong)."""
    (p_low, p_high), (r_low, _) = GOLD[caption]
    if right:
        return {"precision": p_low, "recall": r_low}
    return {"precision": p_low - 1 if p_low > 1 else p_high + 1, "recall": r_low}


def alice_value(caption_id: int) -> dict[str, int]:
    rng = random.Random(f"alice:{caption_id}")
    return {"precision": rng.randint(1, 5), "recall": rng.randint(1, 5)}


def bob_value(caption_id: int) -> dict[str, int]:
    """Alice's values, but one P in three a level higher (5 becomes 1): some agreement,
    not perfect."""
    values = alice_value(caption_id)
    if caption_id % 3 == 0:
        values["precision"] = values["precision"] % 5 + 1
    return values


class Rater:
    """Rates an annotator's session image by image, keeping its own tally: real captions
    rated, real images completed, gold answers and how many were right."""

    def __init__(self, session: AnnotationSession, value, right_gold) -> None:
        self.session, self.value, self.right_gold = session, value, right_gold
        self.captions = self.images = self.answered = self.correct = 0
        self.next = 0

    def rate(self, until) -> None:
        """Rate the next images until `until(self)` holds or the list ends."""
        session = self.session
        while self.next < len(session.images) and not until(self):
            index = self.next
            gold = is_gold(session.images[index].id)
            for group in session.open_image(index):
                if gold:
                    right = self.right_gold(self.answered)
                    values = gold_answer(group.text, right)
                    self.answered += 1
                    self.correct += right
                else:
                    values = self.value(group.caption_ids[0])
                    self.captions += len(group.caption_ids)
                session.set_values(group, values, image_index=index, focus=0)
            self.images += not gold
            session.remember_position(index, 0)
            self.next += 1

    @property
    def gold_cells(self) -> list[str]:
        """The gold column as the monitor should show it (split at the space)."""
        if not self.answered:
            return ["-"]
        return [f"{self.correct}/{self.answered}", f"{self.correct / self.answered:.0%}"]

    @property
    def gold_alert(self) -> str | None:
        if self.answered < MIN_GOLD or self.correct / self.answered >= ALERT_GOLD:
            return None
        return (f"{self.session.annotator}: gold {self.correct}/{self.answered} right "
                f"({self.correct / self.answered:.0%}; alert below {ALERT_GOLD:.0%})")


def gold_alerts(text: str) -> list[str]:
    return [line.strip("┃│ ").removeprefix("! ") for line in text.splitlines()
            if ": gold " in line and "right (" in line]


def stage_row(text: str, stage: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip("│ ").startswith(stage))
    return line.strip("│ ").removeprefix(stage).split()


def expected_alpha(engine) -> dict[tuple[str, str], float]:
    """Alpha of P and R at each level over the two annotators' blind ratings, from the
    rows."""
    blind = blind_values(engine)
    shared = sorted(set(blind["alice"]) & set(blind["bob"]))
    return {(dimension, level): krippendorff.alpha(reliability_data=np.array(
        [[blind[name][c][position] for c in shared] for name in ("alice", "bob")],
        dtype=float), level_of_measurement=level)
        for dimension, position in (("P", 0), ("R", 1)) for level in ("ordinal", "interval")}


def agreement_cells(text: str, dimension: str, level: str) -> list[str]:
    line = next(line for line in text.splitlines()
                if line.strip("│ ").split()[:2] == [dimension, level])
    return line.strip("│ ").split()[2:]


@pytest.mark.slow
async def test_a_small_campaign_with_gold_under_the_monitor(tmp_path):
    engine = sample_engine(tmp_path)
    assign_double(engine, 0.4, seed=3, actor="lead")  # 6 of 15 images: two blind ratings
    assert import_gold(engine, gold_file(tmp_path, GOLD_CSV), actor="lead", rate=RATE) == 6
    app = monitor_app(engine)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.screen

        async def shown() -> str:
            """Refresh; the monitor changed nothing in the database."""
            before = database_dump(engine)
            text = await refreshed(pilot, screen)
            assert database_dump(engine) == before
            return text

        await reading(pilot, screen, 0)
        text = screen_text(app)
        assert "nobody has rated yet" in text and "too few: 0 of 5 images" in text
        assert "gold: gold captions right/answered" in text and "ALERTS (0)" in text

        # alice: stage 1 with gold seeded (15 real images, 3 gold ones: all there are);
        # she gets her first gold answer wrong and every other right
        alice = Rater(AnnotationSession(engine, "alice", seed_source=lambda: 1,
                                        clock=ticking(10)),
                      alice_value, right_gold=lambda answered: answered > 0)
        gold_images = [image for image in alice.session.images if is_gold(image.id)]
        assert len(alice.session.images) == 18 and len(gold_images) == 3
        alice.rate(until=lambda rater: rater.images == 7)
        text = await shown()
        row = row_of(text, "alice")
        assert row[:4] == ["alice", str(alice.captions), "0", "0"]
        assert row[6:6 + len(alice.gold_cells)] == alice.gold_cells
        assert stage_row(text, "stage 1")[3] == "7"  # images done (gold ones aside)
        assert gold_alerts(text) == [alert for alert in [alice.gold_alert] if alert]

        alice.rate(until=lambda rater: False)  # the rest of her list
        alice.session.close()
        assert (alice.images, alice.answered, alice.correct) == (15, 6, 5)
        text = await shown()
        row = row_of(text, "alice")
        assert row[1] == "60" and alice.captions == 60
        assert row[6:8] == ["5/6", "83%"]
        assert gold_alerts(text) == []  # 83% is not below 70%
        assert "too few: 0 of 5 images" in text  # nobody rated a double image twice yet

        # bob: the second blind rating of the 6 double images, with gold seeded as well;
        # he gets only his first gold answer right
        bob = Rater(AnnotationSession(engine, "bob", seed_source=lambda: 2,
                                      clock=ticking(10)),
                    bob_value, right_gold=lambda answered: answered == 0)
        real = [image for image in bob.session.images if not is_gold(image.id)]
        assert len(real) == 6
        bob_gold = len(bob.session.images) - len(real)
        assert bob_gold == round(RATE * 6 / (1 - RATE))  # 2 gold images
        bob.rate(until=lambda rater: rater.answered == 2)  # up to his first gold image
        text = await shown()
        assert row_of(text, "bob")[6:8] == ["1/2", "50%"]
        assert gold_alerts(text) == []  # 50%, but only 2 gold answers: no alert yet
        bob.rate(until=lambda rater: rater.images == 3)
        text = await shown()
        row = row_of(text, "bob")
        assert row[:2] == ["bob", str(bob.captions)]
        assert row[6:6 + len(bob.gold_cells)] == bob.gold_cells
        assert "too few: 3 of 5 images" in text
        assert gold_alerts(text) == [alert for alert in [bob.gold_alert] if alert]

        bob.rate(until=lambda rater: False)
        assert (bob.images, bob.answered, bob.correct) == (6, 4, 1)
        text = await shown()
        row = row_of(text, "bob")
        assert row[1] == str(bob.captions) and row[6:8] == ["1/4", "25%"]
        assert gold_alerts(text) == ["bob: gold 1/4 right (25%; alert below 70%)"]
        assert row_of(text, "alice")[6:8] == ["5/6", "83%"]
        assert "too few" not in text and stage_row(text, "second blind rating")[3] == "6"
        expected = expected_alpha(engine)
        for (dimension, level), value in expected.items():
            cells = agreement_cells(text, dimension, level)
            assert cells[0] == f"{value:.2f}"
            assert " ".join(cells[-4:]) == f"{bob.captions} captions, 6 images"
        agreement_alert = any(value < 0.4 for value in expected.values())
        assert ("agreement: α" in text) == agreement_alert
        count = len(screen.figures.alerts)
        assert f"ALERTS ({count})" in text and count >= 1

        # bob changes his mind on his first blind caption: agreement follows
        session = bob.session
        first = next(i for i, image in enumerate(session.images) if not is_gold(image.id))
        group = session.open_image(first)[0]
        old = group.values["precision"]
        session.set_values(group, {"precision": 1 if old != 1 else 5}, image_index=first,
                           focus=0)
        session.close()
        text = await shown()
        changed = expected_alpha(engine)
        assert changed != expected
        for (dimension, level), value in changed.items():
            assert agreement_cells(text, dimension, level)[0] == f"{value:.2f}"

        # at 80 columns the table with the gold column still fits, nothing cut off
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        text = await shown()
        for name, cells in (("alice", ["5/6", "83%"]), ("bob", ["1/4", "25%"])):
            row = row_of(text, name)
            assert row[6:8] == cells and not any("…" in cell for cell in row), row
    assert app.return_code in (None, 0)
