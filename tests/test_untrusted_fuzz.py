"""Property test over every import format (CSV, JSONL, THUMB release, COCO captions,
COCO-BISON, BISON CSV/JSONL): a valid file, mutated by hypothesis — bytes replaced, inserted
or cut, JSON values swapped for hostile ones (huge or over-precise numbers, deep nesting,
control characters, lone surrogates, wrong types), keys dropped — is either imported or
refused cleanly: exit 2, every line of the message a `file:line` problem (or the one header
line), no traceback, the database byte-identical, and no file left behind when the target
database did not exist.

CI runs THUMB_FUZZ_EXAMPLES (default 10) examples per format; `benchmarks/fuzz_imports.py`
runs 150 per format, 1,050 in all."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import SAMPLE_CSV
from tests.image_files import good_png
from thumb_tui.cli import app

EXAMPLES = int(os.environ.get("THUMB_FUZZ_EXAMPLES", "10"))
COUNT_FILE = os.environ.get("THUMB_FUZZ_COUNT_FILE")
runner = CliRunner()


@dataclass(frozen=True)
class Format:
    """A format: the valid file that gets mutated, and how `thumb` imports it."""

    name: str
    target: str  # the file that is mutated, relative to the project folder
    command: tuple[str, ...]  # `thumb` arguments; {folder} is the project folder
    is_json: str = ""  # "lines" (JSON lines) or "document" (one JSON document)


FORMATS = [
    Format("csv", "captions.csv", ("import", "{folder}/captions.csv")),
    Format("jsonl", "captions.jsonl", ("import", "{folder}/captions.jsonl"), "lines"),
    Format("thumb-release", "thumb.jsonl",
           ("import-thumb", "{folder}/thumb.jsonl", "--references", "{folder}/refs.jsonl",
            "--images", "{folder}/img"), "lines"),
    Format("coco-captions", "coco.json",
           ("bison", "import", "{folder}/bison.json", "--captions", "{folder}/coco.json",
            "--images", "{folder}/img"), "document"),
    Format("coco-bison", "bison.json",
           ("bison", "import", "{folder}/bison.json", "--captions", "{folder}/coco.json",
            "--images", "{folder}/img"), "document"),
    Format("bison-csv", "own_bison.csv", ("bison", "import", "{folder}/own_bison.csv")),
    Format("bison-jsonl", "own_bison.jsonl", ("bison", "import", "{folder}/own_bison.jsonl"),
           "lines"),
]


def write_valid_project(folder: Path) -> None:
    """One valid file of every format, over two real images."""
    (folder / "img").mkdir(parents=True)
    good_png(folder / "img" / "a.png")
    good_png(folder / "img" / "b.png", (5, 9))
    rows = [{"image": "img/a.png", "system": "Human", "caption": "A dog on grass.",
             "references": ["A dog.", "A brown dog."], "annotator": "ann", "stage": "1",
             "precision": 4, "recall": 3, "note": "fine"},
            {"image": "img/b.png", "system": "Human", "caption": "Two cats.",
             "references": ["Cats.", "Two cats on a sofa."]}]
    (folder / "captions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                           encoding="utf-8")
    (folder / "captions.csv").write_text(
        "image,system,caption,reference_1,annotator,stage,precision,recall,note\n"
        "img/a.png,Human,A dog on grass.,A dog.,ann,1,4,3,fine\n"
        "img/b.png,Human,Two cats.,Cats.,,,,,\n", encoding="utf-8")
    release = [{"SYS": "S", "seg_id": "1", "set_id": 5, "hyp": "A dog.", "image": "a.png",
                "P": 4.0, "R": 3.0, "Fl": -0.0, "Inc": -0.0, "Con": -0.0, "human_score": 3.5},
               {"SYS": "S", "seg_id": "2", "set_id": 6, "hyp": "Cats.", "image": "b.png",
                "P": 5.0, "R": 4.0, "Fl": -0.1, "Inc": -0.0, "Con": -0.5, "human_score": 3.9}]
    (folder / "thumb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in release),
                                        encoding="utf-8")
    (folder / "refs.jsonl").write_text(
        json.dumps({"seg_id": "1", "set_id": 5, "refs": ["A dog."]}) + "\n"
        + json.dumps({"seg_id": "2", "set_id": 6, "refs": ["Cats."]}) + "\n", encoding="utf-8")
    (folder / "coco.json").write_text(json.dumps({"annotations": [
        {"id": 10, "image_id": 1, "caption": "A dog on grass."},
        {"id": 11, "image_id": 2, "caption": "Two cats."}]}, indent=1), encoding="utf-8")
    (folder / "bison.json").write_text(json.dumps({"data": [
        {"bison_id": 1, "caption_id": 10, "true_image_id": 1,
         "image_candidates": [{"image_id": 1, "image_filename": "a.png"},
                              {"image_id": 2, "image_filename": "b.png"}]}]}, indent=1),
        encoding="utf-8")
    own = [{"bison_id": "b1", "caption": "A dog on grass.", "image_a": "img/a.png",
            "image_b": "img/b.png", "true_image": "img/a.png"}]
    (folder / "own_bison.jsonl").write_text("".join(json.dumps(r) + "\n" for r in own),
                                            encoding="utf-8")
    (folder / "own_bison.csv").write_text(
        "bison_id,caption,image_a,image_b,true_image\n"
        "b1,A dog on grass.,img/a.png,img/b.png,img/a.png\n", encoding="utf-8")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The valid project and a database that already holds the sample project."""
    folder = tmp_path_factory.mktemp("fuzz-template")
    write_valid_project(folder / "project")
    result = runner.invoke(app, ["--db", str(folder / "existing.db"), "import",
                                 str(SAMPLE_CSV), "--allow-outside-images"])
    assert result.exit_code == 0, result.output
    return folder


HOSTILE_TEXT = ["\x1b[2J", "\x1b]52;c;aGVsbG8=\x07", "\x9b", "\x00", "\r", "\u2028",
                "[bold", "<script>", "../../etc/passwd", "/etc/passwd", "x" * 25_000,
                "img/a.png\x00.png", "a" * 5000 + ".png", ""]
HOSTILE_NUMBERS = ["9" * 4300, "1." + "0" * 400, "1e999", "-1e999", "NaN", "Infinity",
                   "-0", "4.5", "1e-400", "18446744073709551616"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(HOSTILE_TEXT),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)


def _json_paths(value: object, path: tuple = ()) -> list[tuple]:
    paths = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            paths += _json_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += _json_paths(child, (*path, index))
    return paths


def _replace(value: object, path: tuple, new: object, delete: bool) -> None:
    for step in path[:-1]:
        value = value[step]  # type: ignore[index]
    if delete:
        del value[path[-1]]  # type: ignore[attr-defined]
    else:
        value[path[-1]] = new  # type: ignore[index]


@st.composite
def mutated(draw: st.DrawFn, text: str, is_json: str) -> bytes:
    """A mutation of a valid file: structural (JSON values and keys) or raw (text, bytes)."""
    kind = draw(st.sampled_from(["value", "value", "splice", "number", "nest", "cut", "bytes"]
                                if is_json else ["splice", "number", "cut", "bytes", "splice"]))
    if kind in ("value", "nest") and is_json:
        documents = ([json.loads(line) for line in text.splitlines()] if is_json == "lines"
                     else [json.loads(text)])
        index = draw(st.integers(0, len(documents) - 1))
        paths = _json_paths(documents[index])
        path = draw(st.sampled_from(paths))
        if kind == "nest":
            depth = draw(st.sampled_from([40, 1000, 100_000]))
            marker = '"__NEST__"'
            _replace(documents[index], path, "__NEST__", delete=False)
            raw = json.dumps(documents[index]).replace(marker, "[" * depth + "]" * depth, 1)
            documents[index] = None  # written raw below
        else:
            delete = draw(st.booleans()) and isinstance(path[-1], str)
            _replace(documents[index], path, draw(json_values), delete)
            raw = None
        lines = [raw if document is None else json.dumps(document)
                 for document in documents]
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    data = text.encode("utf-8")
    position = draw(st.integers(0, len(data)))
    if kind == "cut":
        return data[:position]
    if kind == "bytes":
        noise = draw(st.binary(min_size=1, max_size=8))
        return data[:position] + noise + data[position + draw(st.integers(0, 4)):]
    insert = draw(st.sampled_from(HOSTILE_NUMBERS if kind == "number" else HOSTILE_TEXT))
    end = position + draw(st.integers(0, 6))
    return data[:position] + insert.encode("utf-8", "surrogatepass") + data[end:]


def run_import(project: Path, fmt: Format, db: Path) -> tuple[int, str, BaseException | None]:
    args = [part.replace("{folder}", str(project)) for part in fmt.command]
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.output, result.exception


def check_outcome(project: Path, fmt: Format, db: Path, existed: bool, before: bytes | None,
                  code: int, output: str, exception: BaseException | None) -> None:
    assert code in (0, 2), f"exit {code}: {exception!r}\n{output[-2000:]}"
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    assert "Traceback" not in output
    if code == 0:
        return
    lines = output.rstrip("\n").split("\n")
    assert lines[0].startswith("error: "), output
    for line in lines[1:]:
        assert line.startswith(str(project)) or line.startswith("... and "), line
    if existed:
        assert db.read_bytes() == before
    else:
        assert not any(db.parent.glob(db.name + "*")), list(db.parent.iterdir())


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_every_malformed_file_is_imported_or_refused_cleanly(template, tmp_path_factory, fmt):
    valid = (template / "project" / fmt.target).read_text(encoding="utf-8")

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(content=mutated(valid, fmt.is_json), existing=st.booleans())
    def example(content: bytes, existing: bool) -> None:
        work = tmp_path_factory.mktemp(f"fuzz-{fmt.name}")
        project = work / "project"
        shutil.copytree(template / "project", project)
        (project / fmt.target).write_bytes(content)
        (work / "db").mkdir()
        db = work / "db" / "target.db"
        before = None
        if existing:
            shutil.copy(template / "existing.db", db)
            before = db.read_bytes()
        code, output, exception = run_import(project, fmt, db)
        check_outcome(project, fmt, db, existing, before, code, output, exception)
        shutil.rmtree(work)
        if COUNT_FILE:  # the benchmark counts the examples and their outcomes
            with open(COUNT_FILE, "a", encoding="utf-8") as handle:
                handle.write(f"{fmt.name} {'imported' if code == 0 else 'refused'}\n")

    example()


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_the_valid_files_import(template, tmp_path, fmt):
    """The property above means something only if the unmutated files are accepted."""
    project = tmp_path / "project"
    shutil.copytree(template / "project", project)
    code, output, _ = run_import(project, fmt, tmp_path / "new.db")
    assert code == 0, output
