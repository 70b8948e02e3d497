"""A large file is streamed and written in chunks, yet stays all or nothing: problems
anywhere in it (first rows, middle, last row) are all reported in one pass, and a refused
import leaves the database file byte for byte as it was."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from storage import InputError, import_captions, open_database
from tests.conftest import database_dump
from tests.image_files import good_png

SYSTEMS = ("Human", "Up-Down", "VinVL", "Show-Tell", "OSCAR")
ROWS = 20_000
COLUMNS = ["image", "system", "caption", "reference_1", "reference_2", "annotator", "stage",
           "precision", "recall", "fluency"]


def records(folder: Path) -> list[dict[str, object]]:
    """ROWS rated caption rows over ROWS / 5 images (hard links to one PNG: each path is
    still checked as its own image)."""
    (folder / "img").mkdir()
    picture = good_png(folder / "picture.png")
    rows = []
    for index in range(ROWS):
        image = f"img/{index // len(SYSTEMS):05d}.png"
        if index % len(SYSTEMS) == 0:
            os.link(picture, folder / image)
        rows.append({"image": image, "system": SYSTEMS[index % len(SYSTEMS)],
                     "caption": f"Caption {index}.", "reference_1": f"Ref {index // 5}.",
                     "reference_2": "Another reference.", "annotator": "ann", "stage": 1,
                     "precision": 1 + index % 5, "recall": 1 + index // 5 % 5, "fluency": 0})
    return rows


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        if path.suffix == ".csv":
            writer = csv.DictWriter(handle, COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        else:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_problems_at_start_middle_and_end_come_in_one_pass(tmp_path, suffix):
    rows = records(tmp_path)
    database = tmp_path / "project.db"
    engine = open_database(database)
    import_captions(engine, write(tmp_path / f"first{suffix}", rows[:50]), actor="t")
    before_dump = database_dump(engine)
    engine.dispose()
    before = database.read_bytes()

    clean = rows[50:]
    line = 1 if suffix == ".csv" else 0  # the header is line 1 of a CSV file
    broken = {  # line -> the problem's words
        line + 1: "precision must be a whole number from 1 to 5",
        line + 7_000: "control character U+001B",
        line + 10_001: "image file not found",
        line + 14_000: "fluency must be a number",
        line + len(clean) + 1: "duplicate rating",
    }
    rows = list(clean)
    rows[0] = {**rows[0], "precision": 9}
    rows[6_999] = {**rows[6_999], "caption": "A red \x1b[31mcar."}
    rows[10_000] = {**rows[10_000], "image": "img/missing.png"}
    rows[13_999] = {**rows[13_999], "fluency": "x"}
    rows.append(rows[1])  # the same rating again, on the file's last line
    path = write(tmp_path / f"large{suffix}", rows)

    engine = open_database(database)
    with pytest.raises(InputError) as refused:
        import_captions(engine, path, actor="t")
    found = {problem.line: problem.message for problem in refused.value.problems}
    assert sorted(found) == sorted(broken)
    for number, words in broken.items():
        assert words in found[number], (number, found[number])
    assert all(problem.file == path for problem in refused.value.problems)
    assert database_dump(engine) == before_dump
    engine.dispose()
    assert database.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("project.db*")) == ["project.db"]

    engine = open_database(database)  # the same file without its problems imports
    summary = import_captions(engine, write(path, clean), actor="t")
    assert (summary.images, summary.captions, summary.ratings) == (
        (ROWS - 50) // 5, ROWS - 50, ROWS - 50)
