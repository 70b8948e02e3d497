"""The registry of readers: every function of thumb-tui that reads a file a user names,
with a generator of valid inputs, the error it documents, and what a hostile input must
end in. `tests/test_readers.py` walks it (one hypothesis property over every entry, a
FIFO for every entry, every text field of every entry poisoned) and fails when a function
that reads a file is neither registered here nor allowed in `TRUSTED` below;
`benchmarks/fuzz_imports.py` runs the same examples in bulk.

An entry reads one *target* file (the one mutated) in a fresh folder that `setup` fills
with whatever else it needs (images, id files, the other half of a positive set). It is
read either by a direct call (a `metrics` reader: `read(path)` returns or raises `error`)
or through `thumb` (`command`: exit 0, or exit 2 with `error: …` and `file:line` lines; a
database that existed is byte-identical afterwards, its -wal and -shm files included, and
one that did not is not left behind).

`texts` are the text fields of the target (ids, names, captions): `valid(texts)` builds
the target with those texts. A *poisoned* target (one text with a control, bidirectional
formatting or byte-order-mark character inside it, or longer than 20,000 characters) must
be refused: accepting it is a *wrong accept*. Nothing here changes a production code path;
it only lists and calls them."""

from __future__ import annotations

import ast
import atexit
import csv
import io
import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CSV = ROOT / "sample_data" / "captions.csv"


# --- entries ---------------------------------------------------------------------------

class CliRefused(Exception):
    """`thumb` refused the input as documented: exit 2, `error: …`, file:line lines."""


class Unexpected(Exception):
    """Anything else: a traceback, another exit status, a message without the file."""


@dataclass(frozen=True)
class Reader:
    name: str
    covers: tuple[str, ...]  # `module:qualname` of the production functions exercised
    target: str  # the file read (and mutated), relative to the example's folder
    valid: Callable[[tuple[str, ...]], bytes]  # the target's bytes with these texts
    texts: tuple[str, ...] = ()  # the target's text fields, as `valid` takes them
    kind: str = "text"  # text, json (one document), lines (JSON lines), binary
    read: Callable[[Path], object] | None = None  # a direct call on the target
    error: type[BaseException] = CliRefused  # what `read` documents (ValueError kinds)
    command: tuple[str, ...] = ()  # or `thumb` arguments; {dir} is the example's folder
    setup: Callable[[Path], None] = lambda folder: None
    uses_database: bool = field(default=False)

    def __post_init__(self) -> None:
        assert (self.read is None) != (not self.command), self.name
        object.__setattr__(self, "uses_database", bool(self.command))

    def default(self) -> bytes:
        return self.valid(self.texts)


# --- valid inputs ----------------------------------------------------------------------

def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode("utf-8", "surrogatepass")


def _json_bytes(value: object, indent: int | None = None) -> bytes:
    return json.dumps(value, indent=indent).encode("utf-8")  # ASCII: escapes only


def _json_lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz(compressed: bool = False, **arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def _parquet(columns: dict[str, list]) -> bytes:
    import pandas as pd

    buffer = io.BytesIO()
    pd.DataFrame(columns).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _ids(values: tuple[str, ...]) -> np.ndarray:
    """Text ids as NumPy stores them (a lone surrogate cannot be: it becomes `?`)."""
    return np.array([v.encode("utf-8", "replace").decode("utf-8") for v in values])


def _png(folder: Path) -> None:
    from tests.image_files import good_png

    (folder / "img").mkdir(exist_ok=True)
    good_png(folder / "img" / "a.png")
    good_png(folder / "img" / "b.png", (5, 9))


def _toml_template(text: str, defaults: tuple[str, ...]) -> Callable[[tuple[str, ...]], bytes]:
    """A TOML (or JSON) file whose quoted strings `"default"` are replaced by the texts,
    written with JSON's escapes (TOML's basic strings have the same)."""
    for default in defaults:
        assert json.dumps(default) in text, default

    def build(texts: tuple[str, ...]) -> bytes:
        result = text
        for default, new in zip(defaults, texts, strict=True):
            result = result.replace(json.dumps(default), json.dumps(new), 1)
        return result.encode("utf-8")
    return build


# captions (thumb import)
CAPTION_TEXTS = ("img/a.png", "Human", "A dog on grass.", "A dog.", "ann", "fine",
                 "Two cats.", "Cats.", "bea", "all grey")


def _broken_image_flags(t: tuple[str, ...]) -> list[dict[str, str]]:
    """The second image's broken-image flag (its texts inside the JSON of one cell)."""
    return [{"annotator": t[8], "reason": t[9]}]


def captions_csv(t: tuple[str, ...]) -> bytes:
    return _csv([["image", "system", "caption", "reference_1", "annotator", "stage",
                  "precision", "recall", "note", "image_flags"],
                 [t[0], t[1], t[2], t[3], t[4], "1", "4", "3", t[5], ""],
                 ["img/b.png", "Human", t[6], t[7], "", "", "", "", "",
                  json.dumps(_broken_image_flags(t))]])


def captions_jsonl(t: tuple[str, ...]) -> bytes:
    return _json_lines([
        {"image": t[0], "system": t[1], "caption": t[2], "references": [t[3], "A brown dog."],
         "annotator": t[4], "stage": "1", "precision": 4, "recall": 3, "note": t[5]},
        {"image": "img/b.png", "system": "Human", "caption": t[6], "references": [t[7]],
         "image_flags": _broken_image_flags(t)}])


def captions_parquet(t: tuple[str, ...]) -> bytes:
    return _parquet({"image": [t[0], "img/b.png"], "system": [t[1], "Human"],
                     "caption": [t[2], t[6]], "reference_1": [t[3], t[7]],
                     "annotator": [t[4], None], "stage": ["1", None],
                     "precision": [4, None], "recall": [3, None], "note": [t[5], None],
                     "image_flags": [None, json.dumps(_broken_image_flags(t))]})


RELEASE_TEXTS = ("Sy", "s1", "A dog.", "a.png", "Cats.")


def thumb_release(t: tuple[str, ...]) -> bytes:
    return _json_lines([
        {"SYS": t[0], "seg_id": t[1], "set_id": 5, "hyp": t[2], "image": t[3], "P": 4.0,
         "R": 3.0, "Fl": -0.0, "Inc": -0.0, "Con": -0.0, "human_score": 3.5},
        {"SYS": "S", "seg_id": "2", "set_id": 6, "hyp": t[4], "image": "b.png", "P": 5.0,
         "R": 4.0, "Fl": -0.1, "Inc": -0.0, "Con": -0.5, "human_score": 3.9}])


def _release_setup(folder: Path) -> None:
    _png(folder)
    (folder / "refs.jsonl").write_bytes(_json_lines([
        {"seg_id": "s1", "set_id": 5, "refs": ["A dog."]},
        {"seg_id": "2", "set_id": 6, "refs": ["Cats."]}]))


COCO_TEXTS = ("A dog on grass.", "Two cats.")


def coco_captions(t: tuple[str, ...]) -> bytes:
    return _json_bytes({"annotations": [{"id": 10, "image_id": 1, "caption": t[0]},
                                        {"id": 11, "image_id": 2, "caption": t[1]}]}, 1)


BISON_TEXTS = ("a.png", "b.png")


def coco_bison(t: tuple[str, ...]) -> bytes:
    return _json_bytes({"data": [{"bison_id": 1, "caption_id": 10, "true_image_id": 1,
                                  "image_candidates": [{"image_id": 1, "image_filename": t[0]},
                                                       {"image_id": 2, "image_filename": t[1]}]
                                  }]}, 1)


def _coco_setup(folder: Path) -> None:
    _png(folder)
    (folder / "coco.json").write_bytes(coco_captions(COCO_TEXTS))
    (folder / "bison.json").write_bytes(coco_bison(BISON_TEXTS))


OWN_BISON_TEXTS = ("b1", "A dog on grass.", "img/a.png")


def own_bison_csv(t: tuple[str, ...]) -> bytes:
    return _csv([["bison_id", "caption", "image_a", "image_b", "true_image"],
                 [t[0], t[1], t[2], "img/b.png", "img/a.png"]])


def own_bison_jsonl(t: tuple[str, ...]) -> bytes:
    return _json_lines([{"bison_id": t[0], "caption": t[1], "image_a": t[2],
                         "image_b": "img/b.png", "true_image": "img/a.png"}])


GOLD_TEXTS = ("g1", "img/a.png", "A dog on grass.", "Nothing in it is wrong.", "Two cats.")


def gold_csv(t: tuple[str, ...]) -> bytes:
    return _csv([["image", "path", "caption", "precision", "recall", "fluency", "reason"],
                 [t[0], t[1], t[2], "4-5", "3", "0.1", t[3]],
                 ["g2", "", t[4], "2", "1-2", "", "No cats."]])


def gold_jsonl(t: tuple[str, ...]) -> bytes:
    return _json_lines([
        {"image": t[0], "path": t[1], "caption": t[2], "precision": "4-5", "recall": 3,
         "fluency": 0.1, "reason": t[3]},
        {"image": "g2", "caption": t[4], "precision": 2, "recall": "1-2", "reason": "No."}])


JUDGMENT_TEXTS = ("i1", "c1", "a dog on the grass", "crowd", "two bikes")


def judgment_scores(t: tuple[str, ...]) -> bytes:
    return _csv([["image_id", "caption_id", "caption", "judge", "score"],
                 [t[0], t[1], t[2], t[3], "0.25"], ["i1", "c2", "a cat", "crowd", "0"],
                 ["i2", "c3", t[4], "crowd", "1"]])


REFERENCE_TEXTS = ("i1", "A dog on grass.", "r1", "People cycling.")


def judgment_references(t: tuple[str, ...]) -> bytes:
    return _csv([["image_id", "reference", "reference_id"], [t[0], t[1], t[2]],
                 ["i2", t[3], ""]])


def _judgment_setup(folder: Path) -> None:
    (folder / "refs.csv").write_bytes(judgment_references(REFERENCE_TEXTS))
    (folder / "j.csv").write_bytes(judgment_scores(JUDGMENT_TEXTS))


def _rubric_text() -> str:
    return (ROOT / "rubrics" / "thumb-1.0.toml").read_text(encoding="utf-8")


RUBRIC_TEXTS = ("Precision", "Is everything the caption says true of the image?",
                "Nothing in the caption is wrong.", "A yelow house with a red door.",
                "Obvious spelling error")
KEYMAP_TEXTS = ("down,ctrl+n", "f1")
KEYMAP = '[keymap]\nfluency = "v"\nnext-caption = "down,ctrl+n"\nhelp = "f1"\n'

# positive sets, ranked lists, score matrices, relevance, judgments (metrics)
POSITIVE_TEXTS = ("img01", "img01/Human", "x-7")


def positives_json(t: tuple[str, ...]) -> bytes:
    return ('{\n' + json.dumps(t[0]) + ': [' + json.dumps(t[1]) + ', ' + json.dumps(t[2])
            + '],\n"3": [4, 5]\n}').encode("utf-8")


def _positives_setup(folder: Path) -> None:
    (folder / "p").mkdir()
    (folder / "p" / "mine_caption_to_image.json").write_text('{"img01/Human": ["img01"]}')


def ids_map_json(t: tuple[str, ...]) -> bytes:
    """`thumb match export`'s map back from database ids to project keys."""
    return _json_bytes({"images": {"1": t[0]}, "captions": {"2": t[1], "3": t[2]}}, 1)


def _exported_positives_setup(folder: Path) -> None:
    (folder / "p").mkdir()
    (folder / "p" / "mine_image_to_caption.json").write_text('{"1": [2, 3]}')
    (folder / "p" / "mine_caption_to_image.json").write_text('{"2": [1]}')


RANKED_TEXTS = ("img-1", "c1", "c2", "xy")


def ranked_strings(t: tuple[str, ...]) -> bytes:
    return ("{\n" + json.dumps(t[0]) + ": [" + json.dumps(t[1]) + ", " + json.dumps(t[2])
            + "],\n\"7\": [1, " + json.dumps(t[3]) + "]\n}").encode("utf-8")


INSTANCES = _json_bytes({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2}],
                         "categories": [{"id": c} for c in range(1, 81)],
                         "annotations": [{"image_id": 1, "category_id": 3,
                                          "bbox": [1.5, 2, 3, 4]}]}, 1)
# (two characters at least: a character is poisoned inside a text, never at its end,
# where NumPy drops a NUL and readers strip spaces)
SCORE_TEXTS = ("im", "jm", "ca", "cb")


def scores_npz(t: tuple[str, ...], compressed: bool = False) -> bytes:
    return _npz(compressed, scores=np.eye(2, dtype=np.float32 if compressed else np.float64),
                image_ids=_ids(t[:2]), caption_ids=_ids(t[2:]))


def scores_parquet(t: tuple[str, ...]) -> bytes:
    return _parquet({"image_id": [t[0], t[0], t[1], t[1]],
                     "caption_id": [t[2], t[3], t[2], t[3]], "score": [0.5, 1.0, 2.0, 3.0]})


KEY_TEXTS = ("img01", "img02")


def _keys_setup(folder: Path) -> None:
    np.save(folder / "ok.npy", np.ones((2, 2)))
    (folder / "keys.txt").write_text("1\n2\n")


RELEVANCE_TEXTS = ("cider-d", "sig v1", "ca", "cb")


def relevance_npz(t: tuple[str, ...]) -> bytes:
    return _npz(values=np.array([[1, 0], [0, 1]], dtype=np.float32),
                image_ids=_ids(("1", "2")), caption_ids=_ids(t[2:]),
                metric=np.array(t[0]), signature=np.array(t[1]),
                ground_truth=_ids(("1", t[2])).reshape(1, 2))


AGREEMENT_TEXTS = ("img-1", "ca", "img-2", "cb")


def agreement_csv(t: tuple[str, ...]) -> bytes:
    return _csv([["image_id", "caption_id", "grade"], [t[0], t[1], "3"], [t[2], t[3], "0.5"]])


def _direct(read: Callable[..., object]) -> Callable[[Path], object]:
    return read


def _score_npy(path: Path) -> object:
    from metrics.retrieval.match import read_score_file

    return read_score_file(path, path.parent / "keys.txt", path.parent / "keys.txt")


def _key_lines(path: Path) -> object:
    from metrics.retrieval.match import read_score_file

    return read_score_file(path.parent / "ok.npy", path, path.parent / "keys.txt")


def _image(path: Path) -> None:
    from storage.imports.images import image_problem

    problem = image_problem(path)
    if problem is not None:
        raise ImageRefused(f"{path}: {problem}")


def _rubric(path: Path) -> object:
    from rubrics import load_rubric

    return load_rubric(path)


def _keymap(path: Path) -> object:
    from thumb_tui.keymap import load_keymap

    return load_keymap(path)


class ImageRefused(ValueError):
    """`storage.imports.images.image_problem` found a reason (it returns one, never raises)."""


def _errors() -> dict[str, type[BaseException]]:
    from metrics.retrieval.positives import PositivesError
    from metrics.retrieval.rankings import RankingsError
    from metrics.retrieval.relevance import RelevanceError
    from rubrics import RubricError
    from storage.errors import InputError
    from thumb_tui.keymap import KeymapError

    return {"positives": PositivesError, "rankings": RankingsError,
            "relevance": RelevanceError, "rubric": RubricError, "keymap": KeymapError,
            "input": InputError}


def _read(module: str, name: str) -> Callable[[Path], object]:
    def read(path: Path) -> object:
        import importlib

        return getattr(importlib.import_module(module), name)(path)
    return read


def _quick_check(path: Path) -> None:
    """A large CSV import's quick check (`storage.imports.import_scan`), run in this process (an
    import runs it in a process of its own): the problems it finds refuse the file as the
    import refuses it."""
    from rubrics import load_rubric
    from storage.errors import InputError
    from storage.imports.import_scan import NOTE, scan_problems

    found = scan_problems(path, load_rubric("thumb-1.0"))
    if found:
        raise InputError(found, note=NOTE)


def build_readers() -> list[Reader]:
    errors = _errors()
    imports = ("storage.imports.import_files:_lines", "storage.imports.import_files:iter_records",
               "storage.imports.importer:file_digest")
    images = ("storage.imports.images:image_problem", "storage.imports.images:_problem")
    return [
        # --- storage: the imports (through `thumb`, with the database) ---
        Reader("captions CSV", (*imports, *images), "captions.csv", captions_csv,
               CAPTION_TEXTS, "text", command=("import", "{dir}/captions.csv"), setup=_png),
        # (its texts are the full pass's to check: the quick check finds values' problems)
        Reader("captions CSV, the quick check", ("storage.imports.import_scan:scan_problems",
                                                 "storage.imports.import_scan:_Scan._header",
                                                 "storage.imports.import_scan:_Scan._batches",
                                                 "storage.imports.import_scan:_strict_csv"),
               "captions.csv", lambda _texts: captions_csv(CAPTION_TEXTS), (), "text",
               read=_quick_check, error=ValueError, setup=_png),
        Reader("captions JSONL", imports, "captions.jsonl", captions_jsonl, CAPTION_TEXTS,
               "lines", command=("import", "{dir}/captions.jsonl"), setup=_png),
        Reader("captions Parquet", ("storage.imports.import_files:_parquet_records",),
               "captions.parquet", captions_parquet, CAPTION_TEXTS, "binary",
               command=("import", "{dir}/captions.parquet"), setup=_png),
        Reader("THUMB release", ("storage.imports.thumb_release:import_thumb",
                                 "storage.imports.thumb_release:_read_references",
                                 "storage.imports.import_files:read_records"),
               "thumb.jsonl", thumb_release, RELEASE_TEXTS, "lines",
               command=("import-thumb", "{dir}/thumb.jsonl", "--references",
                        "{dir}/refs.jsonl", "--images", "{dir}/img"), setup=_release_setup),
        Reader("COCO captions", ("storage.bison:coco_caption_annotations",
                                 "storage.imports.import_files:read_text"),
               "coco.json", coco_captions, COCO_TEXTS, "json",
               command=("bison", "import", "{dir}/bison.json", "--captions",
                        "{dir}/coco.json", "--images", "{dir}/img"), setup=_coco_setup),
        Reader("COCO-BISON", ("storage.bison:read_coco_bison",), "bison.json", coco_bison,
               BISON_TEXTS, "json",
               command=("bison", "import", "{dir}/bison.json", "--captions",
                        "{dir}/coco.json", "--images", "{dir}/img"), setup=_coco_setup),
        Reader("BISON CSV", ("storage.bison:read_own_bison",), "own_bison.csv",
               own_bison_csv, OWN_BISON_TEXTS, "text",
               command=("bison", "import", "{dir}/own_bison.csv"), setup=_png),
        Reader("BISON JSONL", ("storage.bison:read_own_bison",), "own_bison.jsonl",
               own_bison_jsonl, OWN_BISON_TEXTS, "lines",
               command=("bison", "import", "{dir}/own_bison.jsonl"), setup=_png),
        Reader("gold CSV",
               ("storage.rating.gold:read_gold", "storage.rating.gold:import_gold", *images),
               "gold.csv", gold_csv, GOLD_TEXTS, "text",
               command=("gold", "import", "{dir}/gold.csv"), setup=_png),
        Reader("gold JSONL", ("storage.rating.gold:read_gold", "storage.rating.gold:import_gold"),
               "gold.jsonl", gold_jsonl, GOLD_TEXTS, "lines",
               command=("gold", "import", "{dir}/gold.jsonl"), setup=_png),
        Reader("judgment set CSV", ("storage.imports.judgment_import:import_judgments",),
               "j.csv", judgment_scores, JUDGMENT_TEXTS, "text",
               command=("judgments", "import", "{dir}/j.csv", "--name", "crowd", "--scale",
                        "0-1", "--continuous", "--references", "{dir}/refs.csv"),
               setup=_judgment_setup),
        Reader("judgment references CSV", ("storage.imports.judgment_import:read_references",),
               "refs.csv", judgment_references, REFERENCE_TEXTS, "text",
               command=("judgments", "import", "{dir}/j.csv", "--name", "crowd", "--scale",
                        "0-1", "--continuous", "--references", "{dir}/refs.csv"),
               setup=_judgment_setup),
        Reader("positive set (thumb match import-positives)",
               ("metrics.retrieval.positives:read_positive_dir",
                "metrics.retrieval.positives:read_id_map",
                "reports.match:scores_digest", "storage.retrieval:file_digest"),
               "p/mine_image_to_caption.json", positives_json, POSITIVE_TEXTS, "json",
               command=("match", "import-positives", "mine", "{dir}/p"),
               setup=_positives_setup),
        Reader("positive set id map (thumb match import-positives)",
               ("reports.match:_id_renames",), "p/mine_ids.json", ids_map_json,
               POSITIVE_TEXTS, "json", command=("match", "import-positives", "mine",
                                                "{dir}/p"),
               setup=_exported_positives_setup),
        # --- rubrics and keymaps (TOML) ---
        Reader("rubric TOML", ("rubrics.model:load_rubric", "rubrics.schema:read_toml"),
               "rubric.toml", _toml_template(_rubric_text(), RUBRIC_TEXTS), RUBRIC_TEXTS,
               "text", read=_rubric, error=errors["rubric"]),
        Reader("keymap TOML", ("thumb_tui.keymap:load_keymap", "rubrics.schema:read_toml"),
               "keymap.toml", _toml_template(KEYMAP, KEYMAP_TEXTS), KEYMAP_TEXTS, "text",
               read=_keymap, error=errors["keymap"]),
        # --- metrics: retrieval and match files (direct calls) ---
        Reader("positive set (integer ids)", ("metrics.retrieval.positives:read_id_map",),
               "p.json", lambda t: b'{\n"1": [10, 11],\n"2": [11, 10, 12]\n}', (), "json",
               read=_read("metrics.retrieval.positives", "read_id_map"), error=errors["positives"]),
        Reader("ranked lists (integer ids)", ("metrics.retrieval.rankings:read_rankings_json",
                                              "metrics.retrieval.rankings:_rankings_from_integers",
                                              "metrics.retrieval.integer_lists:_opened"),
               "r.json", lambda t: b'{\n"1": [10, 11],\n"2": [11, 10]\n}', (), "json",
               read=_read("metrics.retrieval.rankings", "read_rankings_json"),
               error=errors["rankings"]),
        Reader("ranked lists (text ids)", ("metrics.retrieval.rankings:read_rankings_json",),
               "r.json", ranked_strings, RANKED_TEXTS, "json",
               read=_read("metrics.retrieval.rankings", "read_rankings_json"),
               error=errors["rankings"]),
        Reader("COCO instances", ("metrics.retrieval.positives:read_coco_presence",), "i.json",
               lambda t: INSTANCES, (), "json",
               read=_read("metrics.retrieval.positives", "read_coco_presence"),
               error=errors["positives"]),
        Reader("score matrix .npz", ("metrics.retrieval.rankings:read_scores",
                                     "metrics.untrusted:Npz.__init__",
                                     "metrics.untrusted:Npz.header",
                                     "metrics.untrusted:Npz.array"),
               "s.npz", scores_npz, SCORE_TEXTS, "binary",
               read=_read("metrics.retrieval.rankings", "read_scores"), error=errors["rankings"]),
        Reader("score matrix .npz (deflated)", ("metrics.retrieval.rankings:read_scores",),
               "s.npz", lambda t: scores_npz(t, compressed=True), SCORE_TEXTS, "binary",
               read=_read("metrics.retrieval.rankings", "read_scores"), error=errors["rankings"]),
        Reader("score matrix Parquet", ("metrics.retrieval.rankings:_parquet_matrix",), "s.parquet",
               scores_parquet, SCORE_TEXTS, "binary",
               read=_read("metrics.retrieval.rankings", "read_scores"), error=errors["rankings"]),
        Reader("score matrix .npy", ("metrics.retrieval.match:read_score_file",
                                     "metrics.untrusted:open_npy"),
               "s.npy", lambda t: _npy(np.eye(2)), (), "binary", read=_score_npy,
               error=errors["rankings"], setup=_keys_setup),
        Reader("id lines of a .npy", ("metrics.retrieval.match:_key_lines",), "ids.txt",
               lambda t: ("\n".join(t) + "\n").encode("utf-8", "surrogatepass"), KEY_TEXTS,
               "text", read=_key_lines, error=errors["rankings"], setup=_keys_setup),
        Reader("relevance matrix", ("metrics.retrieval.relevance:read_relevance",), "r.npz",
               relevance_npz, RELEVANCE_TEXTS, "binary",
               read=_read("metrics.retrieval.relevance", "read_relevance"),
               error=errors["relevance"]),
        Reader("graded judgments CSV", ("reports.retrieval:read_judgments",
                                        "storage.imports.import_files:_lines"), "j.csv",
               agreement_csv, AGREEMENT_TEXTS, "text",
               read=_read("reports.retrieval", "read_judgments"), error=errors["input"]),
        # --- image files (checked at import; the screens ask again) ---
        Reader("image file", images, "img.png", lambda t: _png_bytes(), (), "binary",
               read=_image, error=ImageRefused),
    ]


@cache
def _png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


@cache
def readers() -> tuple[Reader, ...]:
    return tuple(build_readers())


# Functions that read a file but not one a user names for thumb-tui to parse: each with
# why it is trusted. The scan below must find each (a stale entry fails the test too).
TRUSTED = {
    "metrics.retrieval.integer_lists:_busy":
        "the kernel's /proc/loadavg (how many threads run now): part of the machine",
    "metrics.retrieval.positives:coco_test_ids":
        "the COCO test ids shipped inside the installed eccv-caption package",
    "metrics.text.spice:Spice.compute":
        "the JSON the SPICE jar wrote into this process's own temporary folder",
    "metrics.text.wordnet:WordNet.__init__":
        "the system's WordNet database (/usr/share/wordnet): part of the machine",
    "metrics.models.bertscore:_rescaling":
        "the --bert-baseline file, hashed whole for the signature and parsed by bert-score: "
        "a model's data, trusted like its folder (SECURITY.md)",
    "metrics.models.torch_device:model_label":
        "a local model folder's config.json: model folders are trusted (SECURITY.md)",
    "metrics.models.clip:ClipEmbedder._embed_images":
        "project images, each checked by storage.imports.images.image_problem at import "
        "(registered: 'image file')",
    "storage.imports.import_scan:serve_quick_check":
        "its stdin: the path and rubric the importing process sends it, as JSON",
    "storage.imports.importer:_Spool.__iter__":
        "pickle.load of the import's own spool: an unnamed temporary file (mode 0600, "
        "unlinked at once) holding the rows this import checked and pickled itself",
    "storage.match:unpack_top_lists":
        "np.load over a blob from the database (io.BytesIO), not a file",
    "storage.db.migrations:_head_in_files":
        "the Alembic revisions installed with thumb-tui",
    "reports.retrieval:ModelFiles.where":
        "a ranking file that read_rankings_json has read and checked whole (registered: "
        "'ranked lists'), read again only to name the line of an id it refuses",
    "reports.thumb.render:_figures_html":
        "the report's own SVG figures, written by this command a moment before",
    "thumb_tui.cli.common:_sqlite_file":
        "the first 16 bytes of --db, after is_file(): the database is trusted "
        "(SECURITY.md: write access to it is not defended against)",
    "thumb_tui.widgets.image_view:open_in_viewer":
        "webbrowser.open hands an imported image to the desktop's viewer (SECURITY.md: "
        "not defended); nothing is read here",
}


# --- the scan: which functions read a file ---------------------------------------------

SCANNED = ("metrics", "storage", "rubrics", "reports", "thumb_tui")
READ_CALLS = {"read_text", "read_bytes"}  # Path methods: always a read
# Functions that read the file (or file object) they are given, by their full name: a
# call is resolved through the module's imports, whatever they alias (`import pickle as
# p; p.load`, `from pyarrow import csv as pc; pc.read_csv`, `from pandas import
# read_excel`). Not listed: sqlite3.connect and SQLAlchemy engines (the --db, trusted).
READ_FUNCTIONS = {
    "numpy.load", "numpy.memmap", "numpy.fromfile", "numpy.loadtxt", "numpy.genfromtxt",
    "json.load", "tomllib.load", "pickle.load", "pickle.Unpickler", "marshal.load",
    "shelve.open", "dbm.open",
    *(f"pandas.read_{kind}" for kind in (
        "csv", "table", "fwf", "json", "parquet", "excel", "feather", "orc", "pickle", "hdf",
        "html", "xml", "sas", "spss", "stata")),
    "pandas.ExcelFile", "pandas.HDFStore",
    "pyarrow.csv.read_csv", "pyarrow.csv.open_csv", "pyarrow.json.read_json",
    "pyarrow.parquet.read_table", "pyarrow.parquet.read_pandas", "pyarrow.parquet.ParquetFile",
    "pyarrow.parquet.ParquetDataset", "pyarrow.feather.read_table",
    "pyarrow.feather.read_feather", "pyarrow.ipc.open_file", "pyarrow.ipc.open_stream",
    "pyarrow.dataset.dataset", "pyarrow.input_stream", "pyarrow.memory_map", "pyarrow.OSFile",
    "zipfile.ZipFile", "shutil.copy", "shutil.copyfile", "shutil.copy2"}
# Openers whose second argument is the mode: a read unless it writes.
OPEN_WITH_MODE = {"open", "builtins.open", "io.open", "io.FileIO", "codecs.open",
                  "gzip.open", "bz2.open", "lzma.open", "tarfile.open", "PIL.Image.open"}
# Aliases so common that a snippet uses them without its import.
CONVENTIONAL = {"np": "numpy", "pd": "pandas", "pq": "pyarrow.parquet", "pa": "pyarrow"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _mode(call: ast.Call, position: int) -> str | None:
    """The literal mode of an open() call (`position`: its index among the arguments),
    "" when none is given, None when it is not a literal."""
    node = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    if node is None:
        return ""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


def _writes(mode: str | None) -> bool:
    return mode is not None and any(c in mode for c in "wax+")


def _flags(call: ast.Call, function: ast.AST | None) -> set[str]:
    """The `os.O_…` names in an os.open() call's flags, following a variable to its
    assignments in the same function."""
    flags = call.args[1] if len(call.args) > 1 else None
    nodes = [flags] if flags is not None else []
    if isinstance(flags, ast.Name) and function is not None:
        nodes += [node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == flags.id for t in node.targets)]
    return {n.attr for node in nodes for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def imported_names(tree: ast.AST) -> dict[str, str]:
    """What each name that the module's imports bind (at its top or inside a function)
    stands for: `import pickle as p` binds p to pickle, `import pyarrow.csv` binds pyarrow,
    `from pyarrow import csv as pc` binds pc to pyarrow.csv, `from pandas import
    read_excel` binds read_excel to pandas.read_excel; CONVENTIONAL where not bound."""
    names = dict(CONVENTIONAL)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _full_name(function: ast.expr, imports: dict[str, str]) -> str | None:
    """`a.b.c` of a call to a name or a chain of attributes of a name, its first part
    resolved through `imports`; None for a call on anything else (`f().read()`)."""
    parts: list[str] = []
    while isinstance(function, ast.Attribute):
        parts.insert(0, function.attr)
        function = function.value
    if not isinstance(function, ast.Name):
        return None
    return ".".join([imports.get(function.id, function.id), *parts])


def reads_a_file(call: ast.Call, enclosing: ast.AST | None, imports: dict[str, str]) -> bool:
    """Whether `call` reads a file: open() and the openers of OPEN_WITH_MODE, and any
    other `.open()`, in a read mode (or an unknown one), `os.open` without write flags,
    Path.read_text/read_bytes, and the loaders of READ_FUNCTIONS, each found under
    whatever name `imports` (the module's, `imported_names`) gives it. `enclosing` is the
    function the call is in (where os.open's flags variable is looked up)."""
    function = call.func
    name = _full_name(function, imports)
    if name in OPEN_WITH_MODE:
        return not _writes(_mode(call, 1))
    if name == "os.open":
        return not _flags(call, enclosing) & WRITE_FLAGS
    if name in READ_FUNCTIONS:
        return True
    if not isinstance(function, ast.Attribute):
        return False
    if function.attr in READ_CALLS:
        return True
    return function.attr == "open" and not _writes(_mode(call, 0))  # Path.open, zip.open


def scan_source(source: str, module: str) -> set[str]:
    """`module:qualname` of every function in `source` that holds a call reading a file
    (`<module>` for code outside any function)."""
    found: set[str] = set()
    tree = ast.parse(source)
    imports = imported_names(tree)

    def visit(node: ast.AST, scope: list[str], function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child.name],
                      function if isinstance(child, ast.ClassDef) else child)
                continue
            if isinstance(child, ast.Call) and reads_a_file(child, function, imports):
                found.add(f"{module}:{'.'.join(scope) or '<module>'}")
            visit(child, scope, function)

    visit(tree, [], None)
    return found


def scan(root: Path = ROOT) -> set[str]:
    """The readers of every module in SCANNED."""
    found: set[str] = set()
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            if "versions" in path.parts:  # Alembic revisions: schema changes, no files
                continue
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            found |= scan_source(path.read_text(encoding="utf-8"), module)
    return found


# --- running one example ----------------------------------------------------------------

FORBIDDEN_SAMPLES = ["\x1b", "\x1b]52;c;aGk=\x07", "\x07", "\x00", "\x08", "\x0b", "\x0c",
                     "\r", "\x1f", "\x7f", "\x85", "\x9b", "\u061c", "\u200e", "\u202e",
                     "\u2066", "\u2069", "\ufeff", "\ud800"]
HOSTILE_TEXT = ["\x1b[2J", "\x1b]52;c;aGVsbG8=\x07", "\x9b", "\x00", "\r", "\u2028",
                "\u202e", "[bold", "<script>", "../../etc/passwd", "/etc/passwd",
                "x" * 25_000, "img/a.png\x00.png", "$\\frac{a}{b$", ""]
HOSTILE_NUMBERS = ["9" * 5000, "1." + "0" * 400, "1e999", "-1e999", "NaN", "Infinity",
                   "-0", "4.5", "true", "null", "18446744073709551616", '"x"', "{}", "[]"]
def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    return (st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=8), children, max_size=3))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(HOSTILE_TEXT), _containers, max_leaves=8)


def poisoned(text: str, surrogates: bool = True) -> st.SearchStrategy[str]:
    """`text` made one that every reader must refuse: a forbidden character inside it
    (never at an end, where a reader may strip whitespace), or over 20,000 characters.
    A lone surrogate only where the format can carry one (a JSON escape; invalid UTF-8
    in a text file): NumPy and Arrow cannot store one at all."""
    characters = [c for c in FORBIDDEN_SAMPLES if surrogates or c != "\ud800"]
    inside = st.builds(lambda at, c: text[:at] + c + text[at:],
                       st.integers(1, max(1, len(text) - 1)), st.sampled_from(characters))
    return inside | st.just(too_long(text))


def too_long(text: str) -> str:
    """`text` made 20,001 characters long (by letters: a reader may strip spaces)."""
    return text + "x" * (20_001 - len(text))


def _json_paths(value: object, path: tuple = ()) -> list[tuple]:
    paths = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            paths += _json_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += _json_paths(child, (*path, index))
    return paths


def _set(value: object, path: tuple, new: object, delete: bool) -> None:
    for step in path[:-1]:
        value = value[step]  # type: ignore[index]
    if delete:
        del value[path[-1]]  # type: ignore[attr-defined]
    else:
        value[path[-1]] = new  # type: ignore[index]


@dataclass(frozen=True)
class Example:
    content: bytes
    must_refuse: bool  # a poisoned text field
    existing: bool  # (`thumb` entries) the database exists before the command
    kind: str  # which mutation made it


@st.composite
def examples(draw: st.DrawFn, reader: Reader) -> Example:
    """A valid target mutated: bytes flipped, inserted or cut, truncated, hostile text or
    numbers spliced in; for JSON, a value replaced (hostile numbers and texts, wrong
    types), a key dropped, or 40 to 100,000 levels of nesting; a text field poisoned."""
    data = reader.default()
    kinds = ["flip", "bytes", "cut", "splice", "number"]
    if reader.kind in ("json", "lines"):
        kinds += ["value", "value", "nest"]
    if reader.texts:
        kinds += ["poison", "poison"]
    kind = draw(st.sampled_from(kinds))
    # a new database costs an Alembic upgrade (0.4 s): one example in four makes one
    existing = draw(st.sampled_from([True, True, True, False])) if reader.uses_database \
        else False
    if kind == "poison":
        index = draw(st.integers(0, len(reader.texts) - 1))
        texts = list(reader.texts)
        texts[index] = draw(poisoned(texts[index], surrogates=reader.kind != "binary"))
        return Example(reader.valid(tuple(texts)), True, existing, kind)
    if kind in ("value", "nest"):
        text = data.decode("utf-8")
        documents = ([json.loads(line) for line in text.splitlines()] if reader.kind == "lines"
                     else [json.loads(text)])
        index = draw(st.integers(0, len(documents) - 1))
        path = draw(st.sampled_from(_json_paths(documents[index])))
        if kind == "nest":
            depth = draw(st.sampled_from([40, 1000, 100_000]))
            _set(documents[index], path, "__NEST__", delete=False)
            raw = json.dumps(documents[index]).replace('"__NEST__"', "[" * depth + "]" * depth, 1)
        else:
            delete = draw(st.booleans()) and isinstance(path[-1], str)
            _set(documents[index], path, draw(json_values), delete)
            raw = json.dumps(documents[index])
        lines = [raw if i == index else json.dumps(d) for i, d in enumerate(documents)]
        return Example(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), False,
                       existing, kind)
    position = draw(st.integers(0, len(data)))
    if kind == "cut":
        content = data[:position]
    elif kind == "flip" and data:
        at = min(position, len(data) - 1)
        content = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    elif kind == "bytes" or not data:
        noise = draw(st.binary(min_size=1, max_size=8))
        content = data[:position] + noise + data[position + draw(st.integers(0, 4)):]
    else:
        insert = draw(st.sampled_from(HOSTILE_NUMBERS if kind == "number" else HOSTILE_TEXT))
        end = position + draw(st.integers(0, 6))
        content = data[:position] + insert.encode("utf-8", "surrogatepass") + data[end:]
    return Example(content, False, existing, kind)


@dataclass
class Outcome:
    reader: str
    accepted: bool = False
    refused: bool = False
    traceback: str = ""  # anything but success or the documented error
    wrong_accept: bool = False  # a poisoned text field accepted
    database_unchanged: bool | None = None  # None: no database involved (or accepted)
    files_left: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not self.traceback and not self.wrong_accept
                and self.database_unchanged is not False and not self.files_left)


def close_engines() -> None:
    """Make sure a `thumb` command run in this process left no engine open (every command
    closes its own when it ends): SQLite has then checkpointed and removed its -wal and
    -shm files, and what is left can be compared byte for byte."""
    from thumb_tui.cli.common import state

    state.close_databases()


def database_files(db: Path) -> dict[str, bytes]:
    """The bytes of a SQLite database and of its -wal, -shm and -journal files."""
    return {suffix: Path(f"{db}{suffix}").read_bytes()
            for suffix in ("", "-wal", "-shm", "-journal") if Path(f"{db}{suffix}").exists()}


@cache
def template_database() -> Path:
    """A database holding the sample project, closed (no -wal or -shm file)."""
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    folder = Path(tempfile.mkdtemp(prefix="thumb-readers-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    db = folder / "existing.db"
    result = CliRunner().invoke(app, ["--db", str(db), "import", str(SAMPLE_CSV),
                                      "--allow-outside-images"])
    assert result.exit_code == 0, result.output
    close_engines()
    assert set(database_files(db)) == {""}, database_files(db)
    return db


@cache
def _command() -> object:
    import typer

    from thumb_tui.cli import app

    return typer.main.get_command(app)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_cli(reader: Reader, folder: Path, db: Path) -> None:
    """`thumb --db DB …` in this process: returns on exit 0, raises CliRefused for exit 2
    with the documented message (the first line `error: …`, every other a problem in a
    file of `folder`, or `... and N more`), Unexpected otherwise."""
    from unittest import mock

    from typer.testing import CliRunner

    from thumb_tui.cli import app

    args = [part.replace("{dir}", str(folder)) for part in reader.command]
    # the click command is built once (typer builds it on every call: 70 ms)
    with mock.patch("typer.testing._get_command", lambda _app: _command()):
        result = CliRunner().invoke(app, ["--db", str(db), *args])
    output = result.output
    if result.exit_code == 0:
        return
    lines = output.rstrip("\n").split("\n")
    if (result.exit_code != 2 or not isinstance(result.exception, SystemExit | None)
            or "Traceback" in output or not lines[0].startswith("error: ")
            or str(folder) not in output
            or not all(line.startswith(str(folder)) or line.startswith("... and ")
                       for line in lines[1:])):
        detail = "".join(traceback.format_exception(result.exception)) \
            if result.exception and not isinstance(result.exception, SystemExit) else ""
        raise Unexpected(f"exit {result.exit_code}: {output[-2000:]}{detail[-3000:]}")
    raise CliRefused(output)


def _fresh_input(reader: Reader, work: Path) -> tuple[Path, Path]:
    """`work` emptied, the reader's input folder set up in it, and the target's path."""
    folder = work / "input"
    shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True)
    reader.setup(folder)
    target = folder / reader.target
    target.parent.mkdir(parents=True, exist_ok=True)
    return folder, target


def run_example(reader: Reader, example: Example, work: Path) -> Outcome:
    """Write the example into a fresh folder under `work`, read it, and say what came of
    it; `work` is emptied afterwards."""
    folder, target = _fresh_input(reader, work)
    target.write_bytes(example.content)
    db = work / "db" / "target.db"
    db.parent.mkdir()
    if example.existing:
        shutil.copy(template_database(), db)
    before = database_files(db)
    files = _files(work)
    outcome = Outcome(reader.name)
    try:
        if reader.command:
            run_cli(reader, folder, db)
        else:
            assert reader.read is not None
            reader.read(target)
        outcome.accepted = True
    except reader.error as exc:
        if str(folder) in str(exc):
            outcome.refused = True
        else:
            outcome.traceback = f"{type(exc).__name__} without the file's name: {exc}"
    except Unexpected as exc:
        outcome.traceback = str(exc)
    except Exception as exc:
        outcome.traceback = "".join(traceback.format_exception(exc))[-4000:]
    if reader.command:
        close_engines()
    if outcome.accepted:
        outcome.wrong_accept = example.must_refuse
    elif outcome.refused:
        if reader.command:
            outcome.database_unchanged = database_files(db) == before
        outcome.files_left = sorted(_files(work) - files)
    shutil.rmtree(work, ignore_errors=True)
    return outcome


def run_valid(reader: Reader, work: Path) -> Outcome:
    return run_example(reader, Example(reader.default(), False, False, "valid"), work)


def called_functions(run: Callable[[], object]) -> set[str]:
    """`module:qualname` of every function called while `run` runs (any thread)."""
    import sys
    import threading

    called: set[tuple[str, str]] = set()

    def profile(frame, event, _arg):
        if event == "call":
            code = frame.f_code
            called.add((code.co_filename, code.co_qualname))

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    found = set()
    for filename, qualname in called:
        path = Path(filename)
        if path.is_relative_to(ROOT) and path.suffix == ".py":
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found.add(f"{module.removesuffix('.__init__')}:{qualname}")
    return found


def fifo_in_place(reader: Reader, work: Path) -> tuple[Path, Callable[[], object]]:
    """The reader's folder with a FIFO as its target, and how to read it."""
    folder, target = _fresh_input(reader, work)
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    (work / "db").mkdir()
    if reader.command:
        return target, lambda: run_cli(reader, folder, work / "db" / "target.db")
    assert reader.read is not None
    return target, lambda: reader.read(target)


def iter_readers() -> Iterator[Reader]:
    yield from readers()
