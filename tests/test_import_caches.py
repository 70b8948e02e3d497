"""The shortcuts a large import takes must not change what it reads or refuses: ratings
parsed once per distinct values and types, CSV cells unescaped only in rows that hold a
quote, and THUMB's protocol judged once for images in the same state."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rubrics import THUMB_1_0
from storage import InputError, import_captions, open_database
from storage.errors import Problems
from storage.imports import importer
from storage.imports.import_files import iter_records
from storage.imports.import_rows import RowError, RowReader
from storage.models import Stage
from storage.rating.protocol import ImageState, refusals
from tests.conftest import database_dump
from tests.image_files import good_png


def rating_record(**values: object) -> dict[str, object]:
    return {"annotator": "ann", "stage": "1", "precision": "4", "recall": "5", **values}


def test_equal_text_ratings_are_parsed_once_and_shared(tmp_path):
    reader = RowReader(tmp_path, THUMB_1_0)
    first = reader.rating(rating_record())
    again = reader.rating(rating_record())  # another record, equal values
    assert again is first
    assert reader.rating(rating_record(precision="3")).precision == 3


def test_equal_values_of_other_types_are_parsed_afresh(tmp_path):
    """JSON's 1 and true are equal (and hash alike), yet only 1 is a score; 1.0 is."""
    reader = RowReader(tmp_path, THUMB_1_0)
    assert reader.rating(rating_record(precision=1, stage=1)).precision == 1
    with pytest.raises(RowError, match="precision must be a number, not True"):
        reader.rating(rating_record(precision=True, stage=1))
    assert reader.rating(rating_record(precision=1.0, stage=1)).precision == 1
    with pytest.raises(RowError, match="precision must be a number, not True"):
        reader.rating(rating_record(precision=True, stage=1))


def test_csv_cells_are_unescaped_only_where_a_quote_is(tmp_path):
    path = tmp_path / "cells.csv"
    path.write_text("image,system,caption,note\n"
                    "a.png, H ,'=1+1, '@x\n"
                    "b.png,H,A man's dog.,\n"
                    "c.png,  H,  A dog.  ,\n", encoding="utf-8")
    records = [record for _, record in iter_records(path, problems=Problems(path))]
    assert records == [
        {"image": "a.png", "system": "H", "caption": "=1+1", "note": "@x"},
        {"image": "b.png", "system": "H", "caption": "A man's dog.", "note": None},
        {"image": "c.png", "system": "H", "caption": "A dog.", "note": None},
    ]


@pytest.mark.parametrize("state", [
    ImageState("a", 1),
    ImageState("a", 1, first=frozenset({"ann"}), complete=frozenset({"ann"})),
    ImageState("a", 2, first=frozenset({"ann", "bea"}), second=frozenset({"cy"}),
               complete=frozenset({"ann"}), closed=True),
])
def test_refusals_judge_the_state_not_which_image_it_is(state):
    """The import judges images in the same state once (`_check_protocol`): a refusal
    must not depend on the image's key."""
    writes = [("ann", Stage.FIRST), ("bea", Stage.FIRST), ("ann", Stage.SECOND),
              ("cy", Stage.SECOND), ("bea", Stage.FINAL)]
    assert refusals(state, writes) == refusals(replace(state, key="another"), writes)
    assert refusals(state, writes, resolutions=False) == refusals(
        replace(state, key=""), writes, resolutions=False)


@pytest.mark.parametrize("kept", [None, 1])
def test_images_in_the_same_state_are_each_refused_at_their_own_line(tmp_path, monkeypatch,
                                                                      kept):
    """Alike or not, each image is refused at its own line, with what is judged kept or
    (`kept`: at most one state) forgotten."""
    if kept is not None:
        monkeypatch.setattr(importer, "JUDGED_STATES", kept)
    (tmp_path / "img").mkdir()
    for name in ("a.png", "b.png", "c.png"):
        good_png(tmp_path / "img" / name)
    engine = open_database(tmp_path / "alike.db")
    before = database_dump(engine)
    path = tmp_path / "alike.csv"
    path.write_text("image,system,caption,annotator,stage,precision,recall\n"
                    "img/a.png,H,A dog.,ann,1,5,4\n"
                    "img/a.png,S,A cat.,bea,1,5,4\n"
                    "img/b.png,H,A dog.,ann,1,5,4\n"
                    "img/c.png,H,A dog.,ann,1,5,4\n"
                    "img/b.png,S,A cat.,bea,1,5,4\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_captions(engine, path, actor="t")
    assert [(p.line, p.message) for p in caught.value.problems] == [
        (3, "image 'img/a.png': 2 annotators rate it at stage 1 (ann, bea) but it takes 1 "
            "(double_rating=true takes two)"),
        (6, "image 'img/b.png': 2 annotators rate it at stage 1 (ann, bea) but it takes 1 "
            "(double_rating=true takes two)"),
    ]
    assert database_dump(engine) == before
