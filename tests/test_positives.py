from __future__ import annotations

import json
from pathlib import Path

import pytest

from metrics.retrieval.positives import (
    PositivesError,
    coco_1k_folds,
    eccv_caption_available,
    normalize_id,
    positive_set,
    positive_set_from_pairs,
    read_positive_dir,
    shipped_positive_set,
    write_positive_dir,
)

needs_eccv_caption = pytest.mark.skipif(
    not eccv_caption_available(), reason="the eccv-caption package is not installed"
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(391895, 391895), ("391895", 391895), ("-3", -3), ("0", 0), ("img-01", "img-01"),
     ("007", "007"), ("-0", "-0"), ("1.5", "1.5"), (" 7", " 7")],
)
def test_normalize_id_turns_only_canonical_integers_into_ints(raw, expected):
    assert normalize_id(raw) == expected
    assert type(normalize_id(raw)) is type(expected)


@pytest.mark.parametrize("raw", [True, 1.0, None, "", [1]])
def test_normalize_id_refuses_non_ids(raw):
    with pytest.raises(ValueError):
        normalize_id(raw)


def test_positive_set_normalises_ids_and_drops_duplicates():
    positives = positive_set("mine", {"10": [1, "1", 2]}, {"1": ["10"], "x": [10]})
    assert positives.image_to_captions == {10: (1, 2)}
    assert positives.caption_to_images == {1: (10,), "x": (10,)}
    assert positives.size == {"i2t_queries": 1, "i2t_pairs": 2, "t2i_queries": 2, "t2i_pairs": 2}


def test_positive_set_refuses_a_query_written_twice():
    with pytest.raises(ValueError, match="appears twice"):
        positive_set("mine", {"5": [1], 5: [2]}, {})


def test_pairs_give_both_directions():
    positives = positive_set_from_pairs("project", [("a", "c1"), ("a", "c2"), ("b", "c2")])
    assert positives.direction("i2t") == {"a": ("c1", "c2"), "b": ("c2",)}
    assert positives.direction("t2i") == {"c1": ("a",), "c2": ("a", "b")}
    with pytest.raises(ValueError):
        positives.direction("both")


def test_write_then_read_round_trips(tmp_path: Path):
    positives = positive_set_from_pairs("verified", [(1, 10), (1, 11), ("img-2", 10)])
    write_positive_dir(positives, tmp_path / "out")
    written = json.loads((tmp_path / "out" / "verified_image_to_caption.json").read_text())
    assert written == {"1": [10, 11], "img-2": [10]}  # integer ids stay JSON integers
    again = read_positive_dir(tmp_path / "out")
    assert again == positives
    assert again.name == "verified"


def test_writer_refuses_a_directory_with_another_set(tmp_path: Path):
    write_positive_dir(positive_set_from_pairs("a", [(1, 2)]), tmp_path)
    with pytest.raises(PositivesError, match=r"already holds a_image_to_caption\.json"):
        write_positive_dir(positive_set_from_pairs("b", [(1, 2)]), tmp_path)


def _layout(directory: Path, i2t: str, t2i: str = '{"1": [1]}') -> Path:
    directory.mkdir()
    (directory / "x_image_to_caption.json").write_text(i2t)
    (directory / "x_caption_to_image.json").write_text(t2i)
    return directory


@pytest.mark.parametrize(
    ("i2t", "message"),
    [
        ('{\n"1": [1],\n"2": [2,\n', r"x_image_to_caption.json:4: not valid JSON"),
        ('{\n"1": [1],\n"2": 5\n}', r"x_image_to_caption.json:3: the value of '2' must be a list"),
        ('{\n"1": [1],\n"2": [1.5]\n}', r"x_image_to_caption.json:3: query '2': an id must be"),
        ('{\n"1": [1],\n"1": [2]\n}', r"x_image_to_caption.json:2: key '1' appears twice"),
        ("[1, 2]", r"x_image_to_caption.json:1: expected a JSON object"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path: Path, i2t: str, message: str):
    with pytest.raises(PositivesError, match=message):
        read_positive_dir(_layout(tmp_path / "set", i2t))


def test_a_directory_needs_exactly_one_file_per_direction(tmp_path: Path):
    directory = _layout(tmp_path / "set", '{"1": [1]}')
    (directory / "y_image_to_caption.json").write_text("{}")
    with pytest.raises(PositivesError, match=r"exactly one \*_image_to_caption\.json"):
        read_positive_dir(directory)
    with pytest.raises(PositivesError, match="not a directory"):
        read_positive_dir(tmp_path / "missing")


@pytest.mark.slow
@needs_eccv_caption
def test_shipped_sets_are_the_package_files():
    from importlib.util import find_spec

    data = Path(next(iter(find_spec("eccv_caption").submodule_search_locations))) / "data"
    for name, stem in (("eccv", "eccv"), ("cxc", "cxc"), ("coco-5k", "original")):
        shipped = shipped_positive_set(name)
        raw = json.loads((data / f"{stem}_caption_to_image.json").read_text())
        assert shipped.caption_to_images == {int(k): tuple(v) for k, v in raw.items()}
    eccv = shipped_positive_set("eccv")
    assert eccv.size["i2t_queries"] == 1261 and eccv.size["t2i_queries"] == 1332


@needs_eccv_caption
def test_coco_1k_folds_partition_the_5k_test_split():
    folds = coco_1k_folds()
    assert len(folds) == 5
    assert all(len(f.images) == 1000 and len(f.captions) == 5000 for f in folds)
    assert len(set().union(*(f.images for f in folds))) == 5000
    first = folds[0]
    assert set(first.image_to_captions) == first.images
    assert all(set(c) <= first.captions for c in first.image_to_captions.values())


def _instances(path: Path, labels: dict[int, list[int]]) -> Path:
    path.write_text(json.dumps({
        "images": [{"id": image} for image in labels],
        "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 81)],
        "annotations": [{"image_id": image, "category_id": c}
                        for image, classes in labels.items() for c in classes]}))
    return path


def test_plausible_matches_differ_in_at_most_zeta_classes(tmp_path: Path):
    from metrics.retrieval.positives import plausible_matches, read_coco_presence

    presence = read_coco_presence(_instances(tmp_path / "i.json", {
        1: [1, 2], 2: [1, 2], 3: [1], 4: [5, 6, 7]}))
    captions = {10: (1,), 11: (1,), 20: (2,), 30: (3,), 40: (4,), 99: (7,)}
    exact = plausible_matches(presence, captions, 0)
    assert exact.image_to_captions[1] == (10, 11, 20)
    assert exact.caption_to_images[30] == (3,)
    one = plausible_matches(presence, captions, 1)
    assert one.image_to_captions[3] == (10, 11, 20, 30)
    assert 99 not in one.caption_to_images  # its image has no class vector
    assert plausible_matches(presence, captions, 3).caption_to_images[40] == (4,)
    assert plausible_matches(presence, captions, 5).caption_to_images[40] == (1, 2, 3, 4)


def test_a_bad_instances_file_is_named(tmp_path: Path):
    from metrics.retrieval.positives import read_coco_presence

    path = tmp_path / "i.json"
    path.write_text('{"images": []}')
    with pytest.raises(PositivesError, match="not a COCO instances file"):
        read_coco_presence(path)
