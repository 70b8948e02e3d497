"""An import is streamed: its rows are checked and spooled a chunk at a time, and written a
chunk at a time inside one transaction once every row has passed, so that what it holds
is one chunk of rows, not the file. A bad row anywhere leaves the database unchanged (on
SQLite and on PostgreSQL) and nothing is written at all; the rest of the file is still
checked, so that every problem is reported. The chunk is made small here so that a few
dozen rows span many chunks."""

from __future__ import annotations

import csv
import gc
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import storage.imports.importer as importer
from benchmarks.races import drop_everything
from storage import InputError, import_captions, open_database
from storage.imports.import_rows import CaptionRow
from tests.conftest import database_dump
from tests.image_files import good_png

CHUNK = 10
ROWS = 95  # 19 images x 5 systems: ten chunks, the last one short
SYSTEMS = ("Human", "Up-Down", "VinVL", "Show-Tell", "OSCAR")
COLUMNS = ["image", "system", "caption", "reference_1", "annotator", "stage", "precision",
           "recall"]
POSTGRES = os.environ.get("THUMB_TEST_POSTGRES")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "INSERT_CHUNK", CHUNK)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=[
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES, reason="THUMB_TEST_POSTGRES is not set")])])
def engine(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        engine = open_database(tmp_path / "project.db")
        yield engine
        engine.dispose()
        return
    drop_everything(POSTGRES)
    engine = open_database(POSTGRES)
    yield engine
    engine.dispose()
    drop_everything(POSTGRES)


def rows(folder: Path, count: int = ROWS) -> list[dict[str, object]]:
    """`count` rated caption rows, five per image (each image its own valid PNG file)."""
    (folder / "img").mkdir(exist_ok=True)
    made = []
    for index in range(count):
        image = f"img/{index // len(SYSTEMS):05d}.png"
        if not (folder / image).exists():
            good_png(folder / image)
        made.append({"image": image, "system": SYSTEMS[index % len(SYSTEMS)],
                     "caption": f"Caption {index}.", "reference_1": f"Ref {index // 5}.",
                     "annotator": "ann", "stage": 1, "precision": 1 + index % 5,
                     "recall": 1 + index // 5 % 5})
    return made


def write(path: Path, records: list[dict[str, object]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    return path


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each chunk the import writes, as it writes them."""
    written: list[int] = []
    write_chunk = importer._Writer.write

    def counted(self: importer._Writer, batch: importer._Batch) -> None:
        written.append(batch.rows)
        write_chunk(self, batch)

    monkeypatch.setattr(importer._Writer, "write", counted)
    return written


@pytest.mark.slow
def test_rows_are_written_a_chunk_at_a_time(engine, tmp_path, monkeypatch):
    written = count_writes(monkeypatch)
    summary = import_captions(engine, write(tmp_path / "all.csv", rows(tmp_path)), actor="t")
    assert (summary.images, summary.captions, summary.references, summary.ratings) == (
        ROWS // 5, ROWS, ROWS // 5, ROWS)
    assert written == [CHUNK] * (ROWS // CHUNK) + [ROWS % CHUNK]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["first", "middle", "last", "repeated"])
def test_a_bad_row_anywhere_leaves_the_database_unchanged(engine, tmp_path, monkeypatch,
                                                          where):
    """A bad first, middle or last row, or a last row that repeats an earlier rating (a
    problem only the rows before it show): the file is refused before any chunk is
    written."""
    records = rows(tmp_path)
    import_captions(engine, write(tmp_path / "first.csv", records[:5]), actor="t")
    before = database_dump(engine)
    records = records[5:]
    bad_line = {"first": 2, "middle": 50, "last": len(records) + 1,
                "repeated": len(records) + 2}[where]  # the header is line 1
    if where == "repeated":
        records.append(records[1])
        words = "duplicate rating"
    else:
        records[bad_line - 2] = {**records[bad_line - 2], "precision": 9}
        words = "precision must be a whole number from 1 to 5"
    path = write(tmp_path / "bad.csv", records)
    written = count_writes(monkeypatch)
    with pytest.raises(InputError) as refused:
        import_captions(engine, path, actor="t")
    assert [(p.file, p.line) for p in refused.value.problems] == [(path, bad_line)]
    assert words in refused.value.problems[0].message
    assert written == []
    assert database_dump(engine) == before


@pytest.mark.slow
@pytest.mark.parametrize("refused", [False, True])
def test_rows_are_held_a_chunk_at_a_time(tmp_path, monkeypatch, refused):
    """When the last row has been read, the rows still alive are at most one chunk's:
    the import keeps keys and lines of the rows before, not the rows; so does one whose
    first row is bad (the rest only checked, nothing queued to write)."""
    alive: list[int] = []
    finish = importer._Pass.finish

    def counted(self: importer._Pass) -> None:
        gc.collect()
        alive.append(sum(isinstance(item, CaptionRow) for item in gc.get_objects()))
        finish(self)

    monkeypatch.setattr(importer._Pass, "finish", counted)
    records = rows(tmp_path)
    if refused:
        records[0] = {**records[0], "precision": 9}
    path = write(tmp_path / "all.csv", records)
    engine = open_database(tmp_path / "project.db")
    if refused:
        with pytest.raises(InputError):
            import_captions(engine, path, actor="t")
    else:
        import_captions(engine, path, actor="t")
    engine.dispose()
    assert alive and alive[0] <= CHUNK


def kept_bytes_per_row(folder: Path) -> float:
    """What the import keeps of each row once every chunk is written (the rows spooled
    meanwhile are on disk), measured with tracemalloc between a file and one three times
    its size (the first import untraced: what it loads). Run in a fresh interpreter, where
    no earlier test's state is traced."""
    importer.INSERT_CHUNK = CHUNK
    kept: list[int] = []
    finish = importer._Writer.finish

    def measured(self: importer._Writer, *args: object, **options: object
                 ) -> importer.ImportSummary:
        gc.collect()
        kept.append(tracemalloc.get_traced_memory()[0])
        return finish(self, *args, **options)

    sizes = (ROWS, 2_000, 6_000)
    for size in sizes:
        (folder / str(size)).mkdir()
        path = write(folder / str(size) / "all.csv", rows(folder / str(size), size))
        engine = open_database(folder / str(size) / "project.db")
        if size != sizes[0]:
            importer._Writer.finish = measured
            tracemalloc.start()
        try:
            import_captions(engine, path, actor="t")
        finally:
            tracemalloc.stop()
            engine.dispose()
    return (kept[1] - kept[0]) / (sizes[2] - sizes[1])


@pytest.mark.slow
def test_what_is_kept_of_each_row_is_small(tmp_path):
    """Of the rows it has written the import keeps only what the checks compare with
    (keys, lines, hashes) and the ids of the images: at most 400 bytes a row (a million
    rows: 400 MB at most; the tuples it kept per row before took about 430)."""
    script = ("import sys; from pathlib import Path; "
              "from tests.test_import_stream import kept_bytes_per_row; "
              "print(kept_bytes_per_row(Path(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    per_row = float(done.stdout.split()[-1])
    assert 0 < per_row <= 400, per_row
