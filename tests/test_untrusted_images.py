"""Image files named by an import are checked (inside the images folder, a decodable image
of a known format, no decompression bomb), and the screens never crash on one."""

from __future__ import annotations

import os

import pytest

from storage.imports.images import ImagePathError, image_problem, resolve_image
from tests.image_files import bomb_png, broken_files, good_png


@pytest.fixture
def folder(tmp_path):
    images = tmp_path / "project" / "img"
    images.mkdir(parents=True)
    good_png(images / "a.png")
    good_png(tmp_path / "secret.png")
    return images.parent


def test_a_path_inside_the_folder_resolves(folder):
    assert resolve_image(folder, "img/a.png") == (folder / "img" / "a.png").resolve()
    assert resolve_image(folder, "img/../img/a.png") == (folder / "img" / "a.png").resolve()


@pytest.mark.parametrize("name", ["../secret.png", "img/../../secret.png"])
def test_dot_dot_out_of_the_folder_is_refused(folder, name):
    with pytest.raises(ImagePathError, match=r"leads outside .* --allow-outside-images"):
        resolve_image(folder, name)
    assert resolve_image(folder, name, allow_outside=True).name == "secret.png"


def test_absolute_path_is_refused_unless_allowed(folder):
    absolute = str(folder.parent / "secret.png")
    with pytest.raises(ImagePathError, match="is absolute"):
        resolve_image(folder, absolute)
    assert resolve_image(folder, absolute, allow_outside=True).name == "secret.png"


def test_symlink_leading_out_is_refused(folder):
    os.symlink(folder.parent / "secret.png", folder / "img" / "link.png")
    with pytest.raises(ImagePathError, match="leads outside"):
        resolve_image(folder, "img/link.png")


@pytest.mark.parametrize(("name", "message"), [
    ("img/" + "x" * 5000 + ".png", "cannot be used"),
    ("img/a\0.png", "NUL"),
    ("img/missing.png", "image file not found: img/missing.png"),
])
def test_unusable_paths_are_problems_not_crashes(folder, name, message):
    with pytest.raises(ImagePathError, match=message):
        resolve_image(folder, name)


def test_broken_files_are_named_with_a_reason(tmp_path):
    files = broken_files(tmp_path)
    reasons = {name: image_problem(path) for name, path in files.items()}
    assert reasons["empty"] == "empty file (0 bytes)"
    assert reasons["noise"] == reasons["text"] == \
        "not an image (Pillow cannot identify the format)"
    assert reasons["truncated"].startswith("cannot be decoded")
    assert reasons["bomb"].startswith("a decompression bomb? Image size (400000000 pixels)")
    assert image_problem(good_png(tmp_path / "ok.png")) is None
    assert image_problem(tmp_path / "gone.png") == "image file not found"


def test_a_bomb_just_over_the_limit_is_refused_before_decoding(tmp_path):
    assert "over the limit" in image_problem(bomb_png(tmp_path / "b.png", side=9_500))


def test_an_unaccepted_format_is_named(tmp_path):
    from PIL import Image

    Image.new("RGB", (4, 4)).save(tmp_path / "a.pcx")
    assert image_problem(tmp_path / "a.pcx") == (
        "PCX is not an accepted format (PNG, JPEG, GIF, WEBP, BMP, TIFF)")


def test_the_check_sees_a_file_that_changed(tmp_path):
    path = good_png(tmp_path / "a.png")
    assert image_problem(path) is None
    path.write_bytes(b"broken now, and longer than before")
    assert image_problem(path) == "not an image (Pillow cannot identify the format)"
