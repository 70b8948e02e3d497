"""A BISON item whose two candidates are one image is refused at its `file:line`, however
the two are named (by key, by path, by two spellings of one path), and the database is left
as it was: never a database error from the `bison_two_images` constraint."""

from __future__ import annotations

import json

import pytest

from storage import InputError, import_captions, open_database
from storage.bison import import_bison
from tests.conftest import database_dump
from tests.image_files import good_png


@pytest.fixture
def project(tmp_path):
    """A project with image `i1` (images/a.png); images/b.png and images/c.png exist but
    are not in it."""
    (tmp_path / "images").mkdir()
    for name in ("a.png", "b.png", "c.png"):
        good_png(tmp_path / "images" / name)
    captions = tmp_path / "captions.csv"
    captions.write_text("image,image_id,system,caption\nimages/a.png,i1,A,Two red balls.\n",
                        encoding="utf-8")
    engine = open_database(tmp_path / "p.db")
    import_captions(engine, captions, actor="t")
    return engine, tmp_path


def items_file(folder, *pairs: tuple[str, str]):
    lines = [json.dumps({"bison_id": f"b{number}", "caption": "A red picture.",
                         "image_a": first, "image_b": second, "true_image": first})
             for number, (first, second) in enumerate(pairs, start=1)]
    path = folder / "items.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("first", "second"), [
    ("i1", "images/a.png"),  # the stored image by its key, then by its file
    ("images/a.png", "i1"),
    ("images/b.png", "images/./b.png"),  # a new image, its path spelled two ways
    ("images/b.png", "images/b.png"),
])
def test_one_image_named_twice_is_refused_at_its_line(project, first, second):
    engine, folder = project
    path = items_file(folder, ("i1", "images/c.png"), (first, second))
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_bison(engine, path, actor="t")
    assert [(problem.line, problem.message) for problem in caught.value.problems] == [
        (2, "the two candidate images are the same")]
    assert f"{path}:2: the two candidate images are the same" in str(caught.value)
    assert database_dump(engine) == before


def test_two_images_named_each_way_are_imported(project):
    engine, folder = project
    path = items_file(folder, ("i1", "images/b.png"), ("images/a.png", "images/c.png"))
    assert import_bison(engine, path, actor="t") == 2
