"""The rating screens' focus state on its own, without Textual: the cursor's rules (where the
focus goes after a score, a move, an undo; which caption the penalty keys act on) and the
stage policies' differences."""

from __future__ import annotations

from dataclasses import dataclass, field

from thumb_tui.screens.cursor import FIRST, SECOND, CaptionCursor, next_missing
from thumb_tui.screens.stages import FIRST_STAGE, RESOLVE, REVIEW, reviewed_values


@dataclass
class Group:
    values: dict[str, object] = field(default_factory=dict)


def group(precision: int | None = None, recall: int | None = None) -> Group:
    return Group({"precision": precision, "recall": recall})


def opened(groups: list[Group], focus: int = 0, **kwargs: object) -> CaptionCursor:
    cursor = CaptionCursor()
    cursor.opened(3, groups, focus, **kwargs)
    return cursor


def state(cursor: CaptionCursor) -> tuple[int, str, int | None]:
    return cursor.focus_index, cursor.dimension, cursor.scored_index


def test_dimension_order() -> None:
    assert (FIRST, SECOND) == ("precision", "recall")


def test_next_missing() -> None:
    assert next_missing(group()) == FIRST
    assert next_missing(group(4)) == SECOND
    assert next_missing(group(None, 2)) == FIRST
    assert next_missing(group(4, 2)) is None


def test_resume_position_before_anything_opens() -> None:
    cursor = CaptionCursor(5, 2)
    assert (cursor.image_index, cursor.focus_index, cursor.dimension) == (5, 2, FIRST)
    assert cursor.scored_index is None and cursor.target_index == 2


def test_opening_picks_the_first_missing_dimension_and_clamps_the_focus() -> None:
    groups = [group(), group(4), group(4, 2)]
    assert state(opened(groups)) == (0, FIRST, None)
    assert state(opened(groups, 1)) == (1, SECOND, None)
    assert state(opened(groups, 2)) == (2, FIRST, None)  # complete: the first dimension
    assert opened(groups, 9).focus_index == 2
    assert opened(groups, -1).focus_index == 0
    cursor = opened(groups, 1, dimension=FIRST)  # the resolve screen always starts on P
    assert state(cursor) == (1, FIRST, None)
    assert (cursor.image_index, cursor.count) == (3, 3)


def test_opening_an_image_without_captions() -> None:
    cursor = opened([], 4)
    assert state(cursor) == (0, FIRST, None) and cursor.count == 0
    cursor.moved(1)
    assert state(cursor) == (0, FIRST, None)


def test_opening_forgets_the_caption_just_scored() -> None:
    groups = [group(), group()]
    cursor = opened(groups)
    groups[0] = group(5, 4)
    cursor.scored(groups)
    assert cursor.scored_index == 0
    cursor.opened(4, [group(), group()], 0)
    assert cursor.scored_index is None and cursor.image_index == 4


def test_stage_one_score_goes_to_the_other_missing_dimension() -> None:
    groups = [group(), group()]
    cursor = opened(groups)
    groups[0] = group(5)
    assert cursor.scored(groups) is None
    assert state(cursor) == (0, SECOND, None)


def test_stage_one_recall_first_then_precision_stays_on_the_caption() -> None:
    groups = [group(), group()]
    cursor = opened(groups)
    cursor.toggled()
    groups[0] = group(None, 2)
    assert cursor.scored(groups) is None
    assert state(cursor) == (0, FIRST, None)
    groups[0] = group(4, 2)
    assert cursor.scored(groups) == 0
    assert state(cursor) == (1, FIRST, 0)


def test_stage_one_complete_caption_moves_on_and_penalties_stay_behind() -> None:
    groups = [group(), group(3)]
    cursor = opened(groups)
    groups[0] = group(5, 4)
    assert cursor.scored(groups) == 0
    # the next caption has P already: its first missing dimension is R
    assert state(cursor) == (1, SECOND, 0)
    assert cursor.target_index == 0


def test_stage_one_last_caption_stays_and_keeps_the_penalty_keys() -> None:
    groups = [group(1, 1), group()]
    cursor = opened(groups, 1)
    groups[1] = group(5, 4)
    assert cursor.scored(groups) is None
    assert state(cursor) == (1, FIRST, None)
    assert cursor.target_index == 1


def test_a_new_score_brings_the_penalty_keys_back_to_the_focus() -> None:
    groups = [group(), group(), group()]
    cursor = opened(groups)
    groups[0] = group(5, 4)
    cursor.scored(groups)
    assert cursor.target_index == 0
    cursor.settled()  # a score on caption 2 starts: its keys act on it
    groups[1] = group(3)
    cursor.scored(groups)
    assert state(cursor) == (1, SECOND, None) and cursor.target_index == 1


def test_moving_clears_the_caption_just_scored_and_resets_the_dimension() -> None:
    groups = [group(), group(), group()]
    cursor = opened(groups)
    groups[0] = group(5, 4)
    cursor.scored(groups)
    cursor.toggled()
    cursor.scored_index = 0
    cursor.moved(1)
    assert state(cursor) == (2, FIRST, None) and cursor.target_index == 2


def test_moving_stops_at_the_first_and_the_last_caption() -> None:
    cursor = opened([group(), group(), group()])
    cursor.moved(-1)
    assert cursor.focus_index == 0
    for _ in range(5):
        cursor.moved(1)
    assert cursor.focus_index == 2


def test_toggling_flips_the_dimension_and_clears_the_caption_just_scored() -> None:
    cursor = opened([group(), group()])
    cursor.scored_index = 0
    cursor.toggled()
    assert state(cursor) == (0, SECOND, None)
    cursor.toggled()
    assert cursor.dimension == FIRST


def test_focusing_a_caption_clears_the_caption_just_scored() -> None:
    cursor = opened([group(), group(), group()])
    cursor.toggled()
    cursor.scored_index = 0
    cursor.focused(2)
    assert state(cursor) == (2, SECOND, None)


def test_review_order_is_p_then_r_then_next_even_when_both_are_filled() -> None:
    cursor = opened([group(4, 4), group(3, 3)], dimension=FIRST)
    assert cursor.scored_in_order() is None
    assert state(cursor) == (0, SECOND, None)
    assert cursor.scored_in_order() == 0
    assert state(cursor) == (1, FIRST, 0)
    cursor.settled()
    cursor.toggled()
    assert cursor.scored_in_order() is None  # at the last caption the focus stays
    assert state(cursor) == (1, FIRST, None)


def test_accepting_moves_on_without_changing_the_dimension() -> None:
    cursor = opened([group(4, 4), group(3, 3)], dimension=FIRST)
    cursor.toggled()
    assert cursor.advanced() == 0
    assert state(cursor) == (1, SECOND, 0)
    assert cursor.advanced() is None
    assert state(cursor) == (1, SECOND, 0)


def test_undo_focuses_the_reverted_caption_and_dimension() -> None:
    cursor = opened([group(), group(), group()])
    cursor.undone(2, ["recall"])
    assert state(cursor) == (2, SECOND, None)
    cursor.undone(1, ["precision", "fluency"])
    assert state(cursor) == (1, FIRST, None)
    cursor.undone(0, ["note"])  # no score reverted: the dimension stays
    assert state(cursor) == (0, FIRST, None)
    cursor.toggled()
    cursor.undone(None, ["fluency"])  # the caption is not on the image: the focus stays
    assert state(cursor) == (0, SECOND, None)


def test_closing_leaves_nothing_to_move_over() -> None:
    cursor = opened([group(), group()])
    cursor.scored_index = 0
    cursor.closed()
    assert cursor.count == 0 and cursor.scored_index is None


# -- the stage policies ------------------------------------------------------------------------


@dataclass
class Reviewed:
    values: dict[str, object]
    reference: dict[str, object] | None = None


STAGE_ONE_VALUES = {"precision": 4, "recall": 3, "fluency": 0.1, "fluency_type": "spelling",
                    "note": "stage-1 note"}


def test_stage_one_and_resolve_go_to_what_is_missing() -> None:
    for stage in (FIRST_STAGE, RESOLVE):
        groups = [group(5, 4), group(None, 2)]
        cursor = opened(groups)
        assert stage.after_score(cursor, groups) == 0
        assert state(cursor) == (1, FIRST, 0)


def test_review_goes_p_then_r_then_next() -> None:
    groups = [group(4, 4), group(3, 3)]
    cursor = opened(groups, dimension=FIRST)
    assert REVIEW.after_score(cursor, groups) is None
    assert REVIEW.after_score(cursor, groups) == 0
    assert state(cursor) == (1, FIRST, 0)


def test_review_first_edit_starts_from_the_stage_one_values_but_not_the_note() -> None:
    fresh = Reviewed(dict.fromkeys(STAGE_ONE_VALUES), dict(STAGE_ONE_VALUES))
    assert reviewed_values(fresh) == {k: v for k, v in STAGE_ONE_VALUES.items() if k != "note"}
    assert REVIEW.first_values(fresh, {"precision": 2}) == {
        "precision": 2, "recall": 3, "fluency": 0.1, "fluency_type": "spelling"}
    started = Reviewed({**dict.fromkeys(STAGE_ONE_VALUES), "recall": 5},
                       dict(STAGE_ONE_VALUES))
    assert REVIEW.first_values(started, {"precision": 2}) == {"precision": 2}
    assert REVIEW.first_values(Reviewed(dict.fromkeys(STAGE_ONE_VALUES)),
                               {"note": "x"}) == {"note": "x"}
    for stage in (FIRST_STAGE, RESOLVE):
        assert stage.first_values(fresh, {"precision": 2}) == {"precision": 2}


def test_status_words() -> None:
    assert FIRST_STAGE.status_words == ("complete", "to rate")
    assert REVIEW.status_words == ("reviewed", "to review")
    assert RESOLVE.status_words == ("resolved", "to resolve")


def test_the_stages_differ_only_in_their_policy() -> None:
    from thumb_tui.screens.annotate import AnnotateScreen, ReviewScreen
    from thumb_tui.screens.rating import RatingScreen
    from thumb_tui.screens.resolve import ResolveScreen

    assert ReviewScreen.STAGE is REVIEW and AnnotateScreen.STAGE is FIRST_STAGE
    assert not [name for name, value in vars(ReviewScreen).items() if callable(value)]
    assert issubclass(ResolveScreen, RatingScreen)
    assert not issubclass(ResolveScreen, AnnotateScreen)
    first = [b.id for b in AnnotateScreen.BINDINGS]
    review = [b.id for b in ReviewScreen.BINDINGS]
    assert review == [*first[:-2], "accept", "accept-all", *first[-2:]]
