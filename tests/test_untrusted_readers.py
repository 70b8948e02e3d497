"""The readers of user-supplied files in `metrics/` (score matrices, ranked lists, positive
sets, COCO instances, relevance matrices, judgment CSVs) treat them as untrusted (#24
items 3 and 4): every problem ends in the reader's own error type naming the file (and
`thumb` in one line, exit 2), a FIFO is refused instead of blocking, an array's header is
checked before any memory is allocated for its data, JSON is bounded (nesting, numbers,
NaN/Infinity), scores are ranked in their own dtype.

Each reproduction of the issue is a test here, item 5's too (every text a reader takes
from a file is checked like imported text; the τ plot's labels are escaped). The property
that mutates a valid file of every kind is tests/test_readers.py, over the registry of
readers in tests/readers.py."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib import format as npy_format
from typer.testing import CliRunner

from metrics.retrieval import match
from metrics.retrieval.positives import (
    PositivesError,
    read_coco_presence,
    read_id_map,
    read_positive_dir,
)
from metrics.retrieval.rankings import RankingsError, read_rankings_json, read_scores
from metrics.retrieval.relevance import RelevanceError, read_relevance
from reports.retrieval import read_judgments
from storage.errors import InputError
from thumb_tui.cli import app

runner = CliRunner()
EXAMPLES = int(os.environ.get("THUMB_READER_EXAMPLES", "50"))


# --- files ----------------------------------------------------------------------------

def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _header_only(shape: tuple[int, ...], dtype: str) -> bytes:
    """A .npy header declaring `shape` of `dtype`, and no data."""
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False,
                                               "shape": shape})
    return buffer.getvalue()


def _npz(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)
    return path


def _ids() -> dict[str, bytes]:
    return {"image_ids": _npy_bytes(np.array([1, 2])),
            "caption_ids": _npy_bytes(np.array(["a", "b"]))}


def _gt(folder: Path) -> Path:
    positives = folder / "gt"
    positives.mkdir()
    (positives / "gt_image_to_caption.json").write_text('{"1": [10], "2": [11]}')
    (positives / "gt_caption_to_image.json").write_text('{"10": [1], "11": [2]}')
    return positives


def _evaluate(folder: Path, *args: object):
    return runner.invoke(app, ["--db", str(folder / "r.db"), "retrieval", "evaluate",
                               "--name", "m", *map(str, args), "--positives",
                               str(_gt(folder)), "--bootstrap", "0"])


def _one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, \
        result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


# --- score matrices (item 3) ----------------------------------------------------------

def test_a_file_that_only_starts_like_a_zip_is_one_line(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"PK\x03\x04garbage")
    _one_line_error(_evaluate(tmp_path, "--scores", path), f"{path}: not a readable .npz")


def test_empty_score_files_are_one_line_not_aborted(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"")
    _one_line_error(_evaluate(tmp_path, "--scores", path), f"{path}:", "an empty file")
    empty_npy = tmp_path / "m.npy"
    empty_npy.write_bytes(b"")
    (tmp_path / "i.txt").write_text("1\n2\n")
    (tmp_path / "c.txt").write_text("a\nb\n")
    with pytest.raises(RankingsError, match=r"m\.npy: an empty file"):
        match.read_score_file(empty_npy, tmp_path / "i.txt", tmp_path / "c.txt")


def test_a_header_declaring_a_huge_matrix_is_refused_before_any_allocation(tmp_path):
    path = _npz(tmp_path / "m.npz", {"scores": _header_only((10**6, 10**6), "<f4"), **_ids()})
    assert path.stat().st_size < 1024
    with pytest.raises(RankingsError, match=r"scores: the header declares \(1000000, "
                                            r"1000000\) float32 \(4,000,000,000,000 bytes\)"):
        read_scores(path)


def test_the_expected_shape_is_checked_before_the_data_is_inflated(tmp_path):
    """A deflated matrix of zeros (the issue's 2 MB file declaring 23,000² float32,
    scaled down): refused for its shape without reading a byte of its data."""
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("scores.npy", _npy_bytes(np.zeros((3000, 3000), np.float32)))
        for name, data in _ids().items():
            archive.writestr(f"{name}.npy", data)
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(RankingsError, match=r"shape \(3000, 3000\), expected \(2, 2\)"):
            read_scores(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # the matrix is 36 MB


def test_the_matrix_must_hold_the_bytes_its_header_declares(tmp_path):
    whole = _npy_bytes(np.ones((2, 2)))
    _npz(tmp_path / "short.npz", {"scores": whole[:-8], **_ids()})
    with pytest.raises(RankingsError, match=r"scores: the header declares \(2, 2\) float64"):
        read_scores(tmp_path / "short.npz")
    (tmp_path / "i.txt").write_text("1\n2\n")
    (tmp_path / "c.txt").write_text("a\nb\n")
    (tmp_path / "long.npy").write_bytes(whole + b"\0" * 8)
    with pytest.raises(RankingsError, match=r"long\.npy: the header declares 32 bytes of data "
                                            "but the file holds 40"):
        match.read_score_file(tmp_path / "long.npy", tmp_path / "i.txt", tmp_path / "c.txt")
    np.save(tmp_path / "wrong.npy", np.ones((3, 2)))
    with pytest.raises(RankingsError, match="the matrix is 3 x 2 but the id files name 2 "
                                            "images and 2 captions"):
        match.read_score_file(tmp_path / "wrong.npy", tmp_path / "i.txt", tmp_path / "c.txt")


@pytest.mark.parametrize(("values", "refused"), [
    (np.array([[1 + 1j, 0.5], [0.2, 0.9 + 5j]]), "complex"),
    (np.array([[True, False], [False, True]]), "true/false"),
    (np.array([[b"1", b"2"], [b"3", b"4"]]), "byte-string"),
    (np.zeros((2, 2), dtype=[("a", "<f8"), ("b", "<f8")]), "structured"),
])
def test_scores_are_real_numbers(tmp_path, values, refused):
    path = tmp_path / "m.npz"
    np.savez(path, scores=values, image_ids=np.array([1, 2]), caption_ids=np.array(["a", "b"]))
    with pytest.raises(RankingsError, match=f"scores: {refused}"):
        read_scores(path)
    np.save(tmp_path / "m.npy", values)
    (tmp_path / "i.txt").write_text("1\n2\n")
    (tmp_path / "c.txt").write_text("a\nb\n")
    with pytest.raises(RankingsError, match=refused):
        match.read_score_file(tmp_path / "m.npy", tmp_path / "i.txt", tmp_path / "c.txt")


def test_complex_scores_are_refused_not_cast_with_a_warning(tmp_path):
    with pytest.raises(ValueError, match="complex"):
        match.top_k_rows(np.array([[1 + 1j, 0.5]]), 1)


def test_float64_scores_are_ranked_in_float64():
    """float32 would make 1e300 infinite ("is inf") and 1 + 1e-12 a tie with 1."""
    scores = np.array([[1.0, 1.0 + 1e-12, 0.0], [0.0, 1e300, 1.0], [2.0, 2.0, 2.0 + 1e-12]])
    assert match.top_k_rows(scores, 2).tolist() == [[1, 0], [1, 2], [2, 0]]
    assert match.top_k_columns(scores, 2).tolist() == [[2, 0], [1, 2], [2, 1]]


def test_a_float64_npy_proposes_in_float64(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[1.0, 1.0 + 1e-12], [1e300, 0.0]]))
    (tmp_path / "i.txt").write_text("1\n2\n")
    (tmp_path / "c.txt").write_text("a\nb\n")
    found = match.read_score_file(tmp_path / "m.npy", tmp_path / "i.txt", tmp_path / "c.txt")
    assert found.scores.dtype == np.float64
    assert match.top_k_rows(found.scores, 1).tolist() == [[1], [0]]


def test_unsigned_and_wide_integer_scores(tmp_path):
    """uint8 scores negated wrap around (5 ranked below 0); integers rank as float64,
    which must hold them exactly."""
    path = tmp_path / "m.npz"
    np.savez(path, scores=np.array([[0, 5], [7, 1]], dtype=np.uint8),
             image_ids=np.array([1, 2]), caption_ids=np.array(["a", "b"]))
    from metrics.retrieval.rankings import scored_directions

    scores, images, captions = read_scores(path)
    assert scores.dtype == np.float64
    i2t = scored_directions(scores, images, captions)["i2t"]
    assert i2t.top(np.array([0, 1]), 1, None).tolist() == [[1], [0]]
    np.savez(path, scores=np.array([[0, 2**60], [1, 2]]), image_ids=np.array([1, 2]),
             caption_ids=np.array(["a", "b"]))
    with pytest.raises(RankingsError, match="beyond 2"):
        read_scores(path)


def test_parquet_scores_must_be_numbers_and_ids_scalars(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"image_id": [1, 1, 2, 2], "caption_id": ["a", "b", "a", "b"],
                          "score": ["0.5", "1", "2", "3"]})
    frame.to_parquet(tmp_path / "s.parquet")
    with pytest.raises(RankingsError, match=r"score is a .* column; scores are real numbers"):
        read_scores(tmp_path / "s.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1garbagePAR1")
    with pytest.raises(RankingsError, match=r"bad\.parquet: not a readable Parquet file"):
        read_scores(tmp_path / "bad.parquet")


# --- JSON (item 4) --------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_ranked_lists_are_one_line(tmp_path):
    (tmp_path / "i2t.json").write_text('{"a": ' + DEEP + "}")
    (tmp_path / "t2i.json").write_text('{"10": [1, 2], "11": [2, 1]}')
    _one_line_error(_evaluate(tmp_path, "--i2t", tmp_path / "i2t.json", "--t2i",
                              tmp_path / "t2i.json"), "i2t.json: JSON nested deeper than 32")
    (tmp_path / "i2t.json").write_text('{"a": ' + "[" * 40 + "1" + "]" * 40 + "}")
    with pytest.raises(RankingsError, match=r"i2t.json:1: query 'a': an id must be an "
                                            "integer or a string, not a list"):
        read_rankings_json(tmp_path / "i2t.json")


def _instances(path: Path, replace: tuple[str, str] | None = None, tail: str = "") -> Path:
    text = json.dumps({"images": [{"id": 1}, {"id": 2}],
                       "categories": [{"id": c} for c in range(1, 81)],
                       "annotations": [{"image_id": 1, "category_id": 3}]})
    if replace:
        text = text.replace(*replace, 1)
    path.write_text(text[:-1] + tail + "}")
    return path


@pytest.mark.parametrize(("replace", "tail", "message"), [
    (None, ', "info": ' + DEEP, "nested deeper than 32 levels"),
    (None, ', "info": ' + "[" * 33 + "]" * 33, "nested deeper than 32 levels"),
    (('{"id": 2}', '{"id": Infinity}'), "", ":1: Infinity is not a JSON number"),
    (('{"id": 2}', '{"id": NaN}'), "", ":1: NaN is not a JSON number"),
    (('{"id": 2}', '{"id": 1e999}'), "", "'id' inf, not an integer"),  # other reals: unused
    (('{"id": 2}', '{"id": ' + "9" * 5000 + "}"), "", ":1: a number with 5000 digits"),
    (('{"id": 2}', '{"id": 2.0}'), "", "'id' 2.0, not an integer"),
    (('{"id": 2}', '{"id": true}'), "", "'id' True, not an integer"),
    (('{"id": 2}', '{"id": "2"}'), "", "'id' '2', not an integer"),
    (('"category_id": 3', '"category_id": 99'), "", "names category 99, which is not"),
], ids=["deep", "33-deep", "Infinity", "NaN", "1e999", "5000-digits", "float-id", "true-id",
        "string-id", "unknown-category"])
def test_instances_files_are_bounded_and_ids_strict(tmp_path, replace, tail, message):
    path = _instances(tmp_path / "instances.json", replace, tail)
    with pytest.raises(PositivesError, match=message) as refused:
        read_coco_presence(path)
    assert str(refused.value).startswith(str(path))


@pytest.mark.parametrize(("replace", "tail", "message"), [
    (('{"id": 2}', '{"id": Infinity}'), "", "Infinity is not a JSON number"),
    (None, ', "info": ' + DEEP, "nested deeper than 32 levels")], ids=["Infinity", "deep"])
def test_pm_from_with_infinity_or_deep_nesting_is_one_line(tmp_path, replace, tail, message):
    path = _instances(tmp_path / "instances.json", replace, tail)
    (tmp_path / "i2t.json").write_text('{"1": [10, 11], "2": [11, 10]}')
    (tmp_path / "t2i.json").write_text('{"10": [1, 2], "11": [2, 1]}')
    result = _evaluate(tmp_path, "--i2t", tmp_path / "i2t.json", "--t2i",
                       tmp_path / "t2i.json", "--pm-from", path)
    _one_line_error(result, str(path), message)


def test_an_empty_object_is_not_ranked_lists(tmp_path):
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(RankingsError, match=r"r.json:1: no ranked lists"):
        read_rankings_json(tmp_path / "r.json")


def test_an_empty_object_proposes_nothing_in_one_line(tmp_path):
    from tests.conftest import SAMPLE_CSV
    from tests.match_helpers import thumb

    db = tmp_path / "m.db"
    assert thumb(db, "import", SAMPLE_CSV, "--allow-outside-images").exit_code == 0
    (tmp_path / "x_image_to_caption.json").write_text("{}")
    result = thumb(db, "match", "propose", "--model", "m", "--scores",
                   tmp_path / "x_image_to_caption.json")
    _one_line_error(result, "x_image_to_caption.json:1: no ranked lists")


@pytest.mark.parametrize("reader", ["rankings", "positives"])
def test_a_5000_digit_id_is_named_with_its_file_and_line(tmp_path, reader):
    path = tmp_path / "x_image_to_caption.json"
    path.write_text('{\n"1": [10],\n"2": [' + "9" * 5000 + ", 10]\n}")
    error, read = ((RankingsError, read_rankings_json) if reader == "rankings"
                   else (PositivesError, read_id_map))
    with pytest.raises(error, match=r"x_image_to_caption.json:3: a number with 5000 digits"):
        read(path)


def test_integer_ids_have_at_most_20_digits(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{\n"1": [2],\n"2": [123456789012345678901]\n}')
    with pytest.raises(RankingsError, match=r"r\.json:3: query '2': an integer id has at most "
                                            "20 digits"):
        read_rankings_json(path)
    with pytest.raises(PositivesError, match=r"r\.json:3: query '2': an integer id has at "
                                             "most 20 digits"):
        read_id_map(path)
    path.write_text('{"1": [18446744073709551615, 1, "123456789012345678901"]}')
    assert read_id_map(path) == {1: (18446744073709551615, 1, "123456789012345678901")}
    assert read_rankings_json(path).items == (18446744073709551615, 1,
                                              "123456789012345678901")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_refused_in_id_files(tmp_path, constant):
    path = tmp_path / "r.json"
    path.write_text('{\n"1": [1],\n"2": [' + constant + "]\n}")
    with pytest.raises(RankingsError, match=r"r.json:3: .*(not a JSON number|not a finite)"):
        read_rankings_json(path)
    with pytest.raises(PositivesError, match=r"r.json:3: .*(not a JSON number|not a finite)"):
        read_id_map(path)


# --- special files --------------------------------------------------------------------

def test_a_fifo_is_not_hashed(tmp_path):
    """`thumb match propose --scores` hashes the file it names (the readers themselves
    are walked with a FIFO by tests/test_readers.py)."""
    from reports.match import scores_digest
    from storage.match import MatchError

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(MatchError, match="not a regular file but a FIFO"):
        scores_digest(tmp_path / "fifo")


def test_a_directory_where_a_file_is_expected(tmp_path):
    with pytest.raises(RankingsError, match="not a regular file but a directory"):
        read_rankings_json(tmp_path)
    with pytest.raises(RelevanceError, match="not a regular file but a directory"):
        read_relevance(tmp_path)


def test_the_limits_are_the_imports(tmp_path):
    import storage.imports.untrusted
    from metrics import untrusted
    from metrics.retrieval.positives import MAX_ID_CHARS

    assert untrusted.MAX_DEPTH == storage.imports.untrusted.MAX_DEPTH
    assert untrusted.MAX_NUMBER_CHARS == storage.imports.untrusted.MAX_NUMBER_CHARS
    assert MAX_ID_CHARS == storage.imports.untrusted.MAX_TEXT_CHARS
    # integers: 20 digits here (a uint64 id), 18 in the import (int64 columns)
    assert len(str(2**64 - 1)) == untrusted.MAX_INTEGER_DIGITS


# --- property: any arrays under a score matrix's names -------------------------------
# (the mutation property over every reader is tests/test_readers.py)

DTYPES = ["<f8", ">f4", "<f2", "<i8", "<u1", "|b1", "<c16", "|S3", "<U2", "<M8[s]",
          "<m8[s]", "|V4", [("a", "<f8")], ("<f8", (2,))]


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(arrays=st.lists(st.tuples(
    st.sampled_from(["scores", "image_ids", "caption_ids"]), st.sampled_from(DTYPES),
    st.lists(st.integers(0, 3), max_size=3)), max_size=4))
def test_any_arrays_in_an_npz_are_read_or_refused(tmp_path, arrays):
    """Every dtype NumPy saves without pickling, in any shape, under the names a score
    matrix has: read, or RankingsError."""
    members = {name: _npy_bytes(np.zeros(tuple(shape), dtype=np.dtype(dtype)))
               for name, dtype, shape in arrays}
    path = _npz(tmp_path / "m.npz", members)
    try:
        scores, images, captions = read_scores(path)
    except RankingsError as exc:
        assert str(path) in str(exc)
    else:
        assert scores.dtype.kind == "f" and scores.shape == (len(images), len(captions))


def test_the_json_gate_by_default(tmp_path):
    from metrics.untrusted import load_json

    assert load_json('{"a": [1, 2.5, "x", null]}', "f.json", RankingsError) == {
        "a": [1, 2.5, "x", None]}
    for text, message in (("[1,\n" + "9" * 21 + "]", r"f\.json:2: a number with 21 digits"),
                          ("[1,\n" + "1." + "0" * 40 + "]", "written with 42 characters"),
                          ("[" * 33 + "]" * 33, "nested deeper than 32 levels"),
                          ('{"a":\n NaN}', r"f\.json:2: NaN is not a JSON number")):
        with pytest.raises(RankingsError, match=message):
            load_json(text, "f.json", RankingsError)
    assert load_json("[" * 32 + "]" * 32, "f.json", RankingsError) is not None


# --- text fields (#24 item 5) ---------------------------------------------------------
# Every text a reader takes from a file (ids, names derived from file names) passes the
# import's check: no control, bidirectional-formatting or byte-order-mark character, at
# most 20,000 characters; `file:line: problem`, exit 2, nothing stored.

OSC52 = "\x1b]52;c;aGk=\x07"
HOSTILE_IDS = {"ESC": "img\x1b[2J01", "OSC 52": f"img{OSC52}01", "BEL": "img\x0701",
               "C1": "img\x8501", "NUL": "img\x0001", "bidi": "img\u202e10gmi",
               "BOM": "img\ufeff01", "long": "x" * 1_000_000}


def _positives_folder(folder: Path, prefix: str, i2t: dict, t2i: dict) -> Path:
    folder.mkdir()
    (folder / f"{prefix}_image_to_caption.json").write_text(json.dumps(i2t),
                                                            encoding="utf-8")
    (folder / f"{prefix}_caption_to_image.json").write_text(json.dumps(t2i),
                                                            encoding="utf-8")
    return folder


def _database_files(db: Path) -> dict[str, bytes]:
    """The bytes of a SQLite database and its -wal, -shm and -journal files, once the
    commands run here have closed it."""
    from tests.readers import close_engines, database_files

    close_engines()
    return database_files(db)


def _text_refused(message: str, path: Path, line: int | None = 1) -> None:
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert where in message, message
    assert "is not allowed" in message or "at most 20,000)" in message, message
    assert "\x1b" not in message and "\x07" not in message and "\x00" not in message


@pytest.mark.slow
@pytest.mark.parametrize("where", ["query", "item"])
@pytest.mark.parametrize("hostile", list(HOSTILE_IDS))
def test_positive_ids_with_control_characters_are_refused(tmp_path, hostile, where):
    text = HOSTILE_IDS[hostile]
    i2t = {text: ["img01/Human"]} if where == "query" else {"img01": ["a", text]}
    folder = _positives_folder(tmp_path / "p", "mine", {"img02": ["b"], **i2t}, {})
    path = folder / "mine_image_to_caption.json"
    with pytest.raises(PositivesError) as refused:
        read_id_map(path)
    _text_refused(str(refused.value), path)


@pytest.mark.parametrize("hostile", ["ESC", "OSC 52", "C1", "NUL", "bidi", "long"])
def test_import_positives_with_hostile_ids_stores_nothing(tmp_path, hostile):
    from tests.conftest import SAMPLE_CSV
    from tests.match_helpers import thumb

    db = tmp_path / "m.db"
    assert thumb(db, "import", SAMPLE_CSV, "--allow-outside-images").exit_code == 0
    before = _database_files(db)
    folder = _positives_folder(tmp_path / "p", "mine",
                               {"img01": ["img01/Human", HOSTILE_IDS[hostile]]},
                               {"img01/Human": ["img01"]})
    result = thumb(db, "match", "import-positives", "mine", folder)
    _one_line_error(result)
    _text_refused(result.output, folder / "mine_image_to_caption.json")
    assert _database_files(db) == before


@pytest.mark.parametrize("hostile", ["ESC", "OSC 52", "C1", "bidi"])
def test_a_positive_set_named_by_a_hostile_file_prefix_is_refused(tmp_path, hostile):
    prefix = HOSTILE_IDS[hostile]
    folder = _positives_folder(tmp_path / "p", prefix, {"1": [10]}, {"10": [1]})
    with pytest.raises(PositivesError) as refused:
        read_positive_dir(folder)
    message = str(refused.value)
    assert f"{folder}:" in message and "file prefix" in message, message
    assert "is not allowed" in message and "\x1b" not in message
    assert read_positive_dir(folder, "named").name == "named"  # a name given is used


@pytest.mark.slow
def test_evaluate_with_a_hostile_prefix_stores_nothing(tmp_path):
    folder = _positives_folder(tmp_path / "p", f"gt{OSC52}", {"1": [10], "2": [11]},
                               {"10": [1], "11": [2]})
    (tmp_path / "i2t.json").write_text('{"1": [10, 11], "2": [11, 10]}')
    (tmp_path / "t2i.json").write_text('{"10": [1, 2], "11": [2, 1]}')
    db = tmp_path / "r.db"
    base = ["--db", str(db), "retrieval", "evaluate", "--i2t", str(tmp_path / "i2t.json"),
            "--t2i", str(tmp_path / "t2i.json"), "--bootstrap", "0"]
    assert runner.invoke(app, [*base, "--name", "a", "--positives", str(_gt(tmp_path))]
                         ).exit_code == 0
    before = _database_files(db)
    result = runner.invoke(app, [*base, "--name", "b", "--positives", str(folder)])
    _one_line_error(result, "file prefix")
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert _database_files(db) == before


@pytest.mark.parametrize("option", ["--name", "--model"])
def test_model_names_are_checked_like_imported_text(tmp_path, option):
    (tmp_path / "i2t.json").write_text('{"1": [10, 11], "2": [11, 10]}')
    (tmp_path / "t2i.json").write_text('{"10": [1, 2], "11": [2, 1]}')
    db = tmp_path / "r.db"
    if option == "--name":
        command = ["retrieval", "evaluate", "--name", f"m{OSC52}", "--i2t",
                   str(tmp_path / "i2t.json"), "--t2i", str(tmp_path / "t2i.json"),
                   "--bootstrap", "0", "--positives", str(_gt(tmp_path))]
    else:
        from tests.conftest import SAMPLE_CSV
        from tests.match_helpers import thumb, toy_scores

        assert thumb(db, "import", SAMPLE_CSV, "--allow-outside-images").exit_code == 0
        from storage import open_database

        engine = open_database(db)
        scores = toy_scores(engine, tmp_path, 1)
        engine.dispose()
        command = ["match", "propose", "--model", f"m{OSC52}", "--scores", str(scores),
                   "--top-k", "2"]
    before = _database_files(db)
    result = runner.invoke(app, ["--db", str(db), *command])
    _one_line_error(result, "U+001B")
    assert _database_files(db) == before


@pytest.mark.parametrize("column", ["image_id", "caption_id"])
@pytest.mark.parametrize("hostile", ["ESC", "OSC 52", "C1", "NUL", "bidi", "long"])
def test_judgment_ids_are_checked(tmp_path, column, hostile):
    row = {"image_id": "1", "caption_id": "a", "grade": "3"}
    row[column] = HOSTILE_IDS[hostile]
    path = tmp_path / "j.csv"
    path.write_text("image_id,caption_id,grade\n2,b,1\n" + ",".join(
        json.dumps(row[c]) if "\n" in row[c] else row[c]
        for c in ("image_id", "caption_id", "grade")) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        read_judgments(path)
    if hostile == "long":  # read as every import reads a CSV: past the csv module's limit
        assert f"{path}:3: malformed CSV: field larger than field limit" in str(
            refused.value)
    else:
        _text_refused(str(refused.value), path, 3)


def test_id_lines_of_a_score_matrix_are_checked(tmp_path):
    np.save(tmp_path / "m.npy", np.ones((2, 2)))
    (tmp_path / "i.txt").write_text("1\n2\n")
    (tmp_path / "c.txt").write_text(f"a\nb{OSC52}c\n")
    with pytest.raises(RankingsError) as refused:
        match.read_score_file(tmp_path / "m.npy", tmp_path / "i.txt", tmp_path / "c.txt")
    _text_refused(str(refused.value), tmp_path / "c.txt", 2)


@pytest.mark.parametrize("where", ["image_ids", "caption_ids"])
def test_string_ids_of_a_score_matrix_are_checked(tmp_path, where):
    ids = {"image_ids": np.array(["i", "j"]), "caption_ids": np.array(["a", "b"])}
    ids[where] = np.array(["ok", f"b{OSC52}c"])
    np.savez(tmp_path / "s.npz", scores=np.eye(2), **ids)
    with pytest.raises(RankingsError) as refused:
        read_scores(tmp_path / "s.npz")
    _text_refused(str(refused.value), tmp_path / "s.npz", None)


def test_relevance_texts_are_checked(tmp_path):
    from metrics.retrieval.relevance import RelevanceMatrix, write_relevance

    for metric, signature, captions in (("cider-d\x1b[2J", "sig", ("a", "b")),
                                        ("cider-d", f"sig{OSC52}", ("a", "b")),
                                        ("cider-d", "sig", ("a", "b\u202ec"))):
        write_relevance(RelevanceMatrix(metric, signature, (1, 2), captions,
                                        np.eye(2, dtype=np.float32)), tmp_path / "r.npz")
        with pytest.raises(RelevanceError) as refused:
            read_relevance(tmp_path / "r.npz")
        _text_refused(str(refused.value), tmp_path / "r.npz", None)


# --- the τ heat map -------------------------------------------------------------------

PLOT_LABELS = [f"R@1 (gt{OSC52})", "R@5 ($\\frac{a}{b$)", "mAP@R (a\x9bb\u202ec) a--b",
               "NCS@5 (<x> & \"y\")", "R-P (\x00\x7f)"]


def _tau(labels: list[str]):
    import pandas as pd

    values = np.linspace(-1, 1, len(labels) ** 2).reshape(len(labels), len(labels))
    return pd.DataFrame(values, index=labels, columns=labels)


def test_the_tau_plot_is_valid_xml_with_every_label_literal(tmp_path, capfd):
    """Labels stored by an older version (or names no check covers) reach the SVG as
    escapes (`\\x1b`), never as raw bytes that make the file invalid XML; `$…$` is not
    parsed as mathtext (an unbalanced one used to fail the plot); matplotlib's warnings
    print no control character."""
    import xml.etree.ElementTree as ET

    from reports.retrieval_text import draw_tau

    path = tmp_path / "tau.svg"
    draw_tau(_tau(PLOT_LABELS), path)
    data = path.read_bytes()
    ET.fromstring(data)  # well-formed XML
    text = data.decode("utf-8")
    import re

    from rubrics.escape import forbidden_character

    assert forbidden_character(re.sub(r"[\r\t\n]", "", text)) is None
    assert "\\x1b]52;c;aGk=\\x07" in text and "\\u202e" in text
    assert "$\\frac{a}{b$" in text  # shown as typed
    captured = capfd.readouterr()
    assert forbidden_character(captured.err.replace("\n", "")) is None, captured.err
    assert forbidden_character(captured.out.replace("\n", "")) is None, captured.out


def test_an_unbalanced_dollar_label_draws_a_png(tmp_path):
    from reports.retrieval_text import draw_tau

    draw_tau(_tau(["R@1 ($\\frac{a}{b$)", "R@5 ($x$)"]), tmp_path / "tau.png")
    assert (tmp_path / "tau.png").read_bytes().startswith(b"\x89PNG")
