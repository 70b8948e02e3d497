"""A JSON object that names a key twice is refused by every reader of a user's JSON file,
at the line where the key is named the second time: JSON itself keeps the last value
without a word, so `"precision": 5, …, "precision": 1` imported as 1 (as a CSV header
naming a column twice is refused). The import's reader (`storage.imports.untrusted`), the files it
reads (caption and judgment JSON lines, BISON files) and the metrics' readers
(`metrics.untrusted`) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metrics.retrieval.positives import PositivesError, read_coco_presence
from metrics.untrusted import load_json as load_metrics_json
from storage import InputError, import_captions, open_database
from storage.bison import coco_caption_annotations
from storage.imports.judgment_import import Scale, import_judgments
from storage.imports.untrusted import JsonProblem, load_json
from tests.conftest import database_dump
from tests.image_files import good_png


class ReaderError(ValueError):
    """The error type a metrics reader passes to `metrics.untrusted.load_json`."""


# (text, line of the second naming, key): spellings JSON allows for one key, and a
# repeat inside an object inside a list
REPEATS = [
    ('{"precision": 5, "recall": 3, "precision": 1}', 1, "precision"),
    ('{\n  "a" : 1,\n\n  "\\u0061"\t: 2\n}', 4, "a"),
    ('[{"k": "x: y"},\n {"k": 1, "j": {"z": [1, {"q": 1}],\n  "z": 3}}]', 3, "z"),
    ('{"outer": {"b": 1},\n "outer": {"b": 2}}', 2, "outer"),
]
# one key in many objects, a key's name as a value, colons and braces inside texts
NO_REPEAT = ['{"id": 1, "items": [{"id": 2}, {"id": 3}], "caption": "id: {\\"id\\": 1}"}',
             '{"a": "a", "b": {"a": "b"}}']


@pytest.mark.parametrize(("text", "line", "key"), REPEATS)
def test_the_import_reader_names_the_key_and_its_line(text, line, key):
    with pytest.raises(JsonProblem) as caught:
        load_json(text)
    assert (caught.value.line, str(caught.value)) == (
        line, f"key {key!r} appears twice in one object")


@pytest.mark.parametrize(("text", "line", "key"), REPEATS)
def test_the_metrics_reader_names_file_key_and_line(text, line, key):
    with pytest.raises(ReaderError) as caught:
        load_metrics_json(text, "f.json", ReaderError)
    assert str(caught.value) == f"f.json:{line}: key {key!r} appears twice in one object"


@pytest.mark.parametrize("text", NO_REPEAT)
def test_a_key_in_many_objects_is_no_repeat(text):
    assert load_json(text) == json.loads(text)
    assert load_metrics_json(text, "f.json", ReaderError) == json.loads(text)


def test_a_long_key_is_cut_in_the_message():
    key = "k" * 5000
    with pytest.raises(JsonProblem) as caught:
        load_json(f'{{"{key}": 1, "x": 2, "{key}": 3}}')
    assert str(caught.value) == f"key {'k' * 40!r}… appears twice in one object"


def test_a_caller_hook_keeps_its_own_words():
    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if len({key for key, _ in pairs}) < len(pairs):
            raise ReaderError("query named twice")
        return dict(pairs)

    with pytest.raises(ReaderError, match=r"^query named twice$"):
        load_metrics_json('{"q": [1], "q": [2]}', "f.json", ReaderError, object_pairs_hook=hook)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir()
    good_png(tmp_path / "img" / "a.png")
    return tmp_path


def test_a_caption_line_with_a_repeated_score_is_refused(folder):
    """The trial's file: precision 5, then 1, on one line; before, 1 was stored."""
    engine = open_database(folder / "p.db")
    rows = [{"image": "img/a.png", "system": "A", "caption": "Two red balls."},
            {"image": "img/a.png", "system": "A", "caption": "Two red balls.",
             "annotator": "alice", "stage": 1, "precision": 5, "recall": 3}]
    lines = [json.dumps(row) for row in rows]
    lines[1] = lines[1].removesuffix("}") + ', "precision": 1}'
    path = folder / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_captions(engine, path, actor="t")
    assert str(caught.value) == f"{path}:2: key 'precision' appears twice in one object"
    assert database_dump(engine) == before


def test_a_judgment_line_with_a_repeated_score_is_refused(folder):
    engine = open_database(folder / "j.db")
    path = folder / "j.jsonl"
    path.write_text('{"image_id": "i1", "caption": "a", "judge": "j", "score": 2}\n'
                    '{"image_id": "i1", "caption": "b", "judge": "j", "score": 2, '
                    '"score": 3}\n', encoding="utf-8")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_judgments(engine, path, name="likert", kind="score", scale=Scale.parse("1-5"),
                         actor="t")
    assert str(caught.value) == f"{path}:2: key 'score' appears twice in one object"
    assert database_dump(engine) == before


def test_a_coco_file_names_the_line_of_the_repeat(tmp_path):
    """A whole JSON file (COCO captions, read for BISON): the line of the second naming."""
    annotations = [{"id": n, "image_id": 1, "caption": f"Picture {n}."} for n in range(3)]
    text = json.dumps({"annotations": annotations}, indent=1)
    text = text.replace('"caption": "Picture 2."', '"caption": "Picture 2.",\n'
                                                   '   "image_id": 2')
    path = tmp_path / "captions.json"
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index('   "image_id": 2') + 1
    with pytest.raises(InputError) as caught:
        coco_caption_annotations(path)
    assert str(caught.value) == f"{path}:{line}: key 'image_id' appears twice in one object"


def test_a_coco_instances_file_for_the_metrics(tmp_path):
    path = tmp_path / "instances.json"
    path.write_text('{"images": [{"id": 1}], "categories": [{"id": 1}],\n'
                    ' "annotations": [{"image_id": 1, "category_id": 1,\n'
                    '                  "image_id": 1}]}', encoding="utf-8")
    with pytest.raises(PositivesError) as caught:
        read_coco_presence(path)
    assert str(caught.value) == f"{path}:3: key 'image_id' appears twice in one object"


def test_keys_that_differ_in_case_only_are_one_key_named_twice(folder):
    """Keys are read without letter case or spaces (as CSV headers are, where
    `precision,Precision` is refused): two such are one key named twice."""
    engine = open_database(folder / "p.db")
    path = folder / "c.jsonl"
    path.write_text('{"image": "img/a.png", "system": "A", "caption": "Balls.", '
                    '"annotator": "alice", "stage": 1, "precision": 5, "recall": 3, '
                    '"Precision": 1}\n', encoding="utf-8")
    before = database_dump(engine)
    with pytest.raises(InputError) as caught:
        import_captions(engine, path, actor="t")
    assert "c.jsonl:1: key 'precision' appears twice in one object" in str(caught.value)
    assert database_dump(engine) == before
