"""A large import checks its image files in worker processes (`ImageChecker`): each
verdict is the one this process would give, a worker that dies leaves its images to this
process, and an import past `RowReader.IMAGES_IN_PROCESS` images uses the workers and
reports the same problems, at the same lines, as one that checks every image itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import InputError, import_captions, open_database
from storage.imports.images import ImageChecker, ImageFolder, _Worker, checked_image
from storage.imports.import_rows import RowReader
from tests.conftest import database_dump
from tests.image_files import broken_files, good_png


@pytest.fixture
def names(tmp_path: Path) -> list[str]:
    """Image names of every kind: good files, broken ones, missing ones, paths that lead
    out of the folder or cannot be used, a name with a character JSON must escape."""
    images = tmp_path / "images"
    images.mkdir()
    good = [good_png(images / f"good-{k}.png").name for k in range(5)]
    broken = [path.name for path in broken_files(images).values()]
    odd = good_png(images / "odd \udcff name.png").name if os.name == "posix" else good[0]
    (tmp_path / "outside.png").write_bytes((images / good[0]).read_bytes())
    return [*good, *broken, odd, "missing.png", "../outside.png", "/etc/passwd", "a\0b.png",
            "sub/../good-1.png"]


def verdicts_from_workers(checker: ImageChecker, names: list[str]) -> list:
    for name in names:
        checker.ahead(name)
    try:
        return [checker.verdict(name) for name in names]
    finally:
        checker.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_workers_verdict_is_this_processs(tmp_path, names, workers, monkeypatch):
    monkeypatch.setattr(ImageChecker, "BATCH", 4)  # several tasks, some half full
    folder = ImageFolder(tmp_path / "images")
    expected = [checked_image(folder, name) for name in names]
    assert sum(problem is None for _, problem in expected) == 7  # good, odd, sub/../
    checker = ImageChecker(ImageFolder(tmp_path / "images"), workers)
    assert verdicts_from_workers(checker, names) == expected
    assert checker.checked_elsewhere == len(names)
    assert checker.verdict("never sent.png") is None


def test_the_images_of_a_worker_that_died_are_checked_here(tmp_path, names, monkeypatch):
    monkeypatch.setattr(ImageChecker, "BATCH", 4)
    folder = ImageFolder(tmp_path / "images")
    expected = [checked_image(folder, name) for name in names]
    checker = ImageChecker(ImageFolder(tmp_path / "images"), 1)
    checker._workers[0].process.kill()
    assert verdicts_from_workers(checker, names) == expected
    assert checker.checked_elsewhere < len(names)


def rows(count: int, bad_line: int | None = None) -> str:
    """A CSV of `count` images with one caption each; the image of `bad_line` is missing."""
    lines = ["image,system,caption"]
    for k in range(count):
        name = "missing.png" if k + 2 == bad_line else f"images/{k:04d}.png"
        lines.append(f"{name},S,Caption {k}.")
    return "\n".join(lines) + "\n"


@pytest.fixture
def folder_of_images(tmp_path: Path) -> Path:
    (tmp_path / "images").mkdir()
    for k in range(60):
        good_png(tmp_path / "images" / f"{k:04d}.png")
    return tmp_path


@pytest.fixture
def workers_started(monkeypatch) -> list[_Worker]:
    """The workers an import starts, with a small import counted as a large one."""
    started: list[_Worker] = []
    made = _Worker.__init__

    def counted(self: _Worker) -> None:
        made(self)
        started.append(self)

    monkeypatch.setattr(_Worker, "__init__", counted)
    monkeypatch.setattr(RowReader, "IMAGES_IN_PROCESS", 10)
    monkeypatch.setattr(RowReader, "LOOKAHEAD", 16)
    monkeypatch.setattr(ImageChecker, "BATCH", 8)
    monkeypatch.setattr("storage.imports.import_rows.spare_cpus", lambda: 1)
    return started


def test_an_import_past_its_threshold_checks_images_in_a_worker(folder_of_images,
                                                                 workers_started):
    source = folder_of_images / "captions.csv"
    source.write_text(rows(60), encoding="utf-8")
    engine = open_database(folder_of_images / "project.db")
    summary = import_captions(engine, source, actor="t")
    assert (summary.images, summary.captions) == (60, 60)
    assert len(workers_started) == 1
    assert workers_started[0].process.returncode == 0  # ended when the file was read


@pytest.mark.parametrize("bad_line", [5, 40, 61])
def test_a_missing_image_is_reported_at_its_line_either_way(folder_of_images, bad_line,
                                                             workers_started, monkeypatch):
    source = folder_of_images / "captions.csv"
    source.write_text(rows(60, bad_line), encoding="utf-8")
    engine = open_database(folder_of_images / "project.db")
    before = database_dump(engine)
    with pytest.raises(InputError) as in_workers:
        import_captions(engine, source, actor="t")
    assert len(workers_started) == 1
    monkeypatch.setattr(RowReader, "IMAGES_IN_PROCESS", 10**6)
    with pytest.raises(InputError) as here:
        import_captions(engine, source, actor="t")
    assert len(workers_started) == 1
    assert str(in_workers.value) == str(here.value)
    assert f"captions.csv:{bad_line}: image file not found: missing.png" in str(here.value)
    assert database_dump(engine) == before


def test_an_import_whose_workers_cannot_start_checks_its_images_itself(
        folder_of_images, workers_started, monkeypatch):
    def no_interpreter(*args: object, **kwargs: object) -> None:
        raise OSError("no such file: the interpreter")

    monkeypatch.setattr("storage.imports.images.subprocess.Popen", no_interpreter)
    source = folder_of_images / "captions.csv"
    source.write_text(rows(60), encoding="utf-8")
    summary = import_captions(open_database(folder_of_images / "project.db"), source,
                              actor="t")
    assert (summary.images, summary.captions, workers_started) == (60, 60, [])
