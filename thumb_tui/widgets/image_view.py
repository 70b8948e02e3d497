"""The image panel: terminal graphics via textual-image, or a clear note when it cannot."""

from __future__ import annotations

import os
import webbrowser
from functools import cache
from pathlib import Path
from types import ModuleType

from rich.text import Text
from textual.containers import Container
from textual.widgets import Static

from rubrics import printable
from storage.imports.images import image_problem

IMAGE_MODES = ("auto", "tgp", "sixel", "halfcell", "unicode", "none")


@cache
def image_backend() -> ModuleType | None:
    """textual-image's widgets, or None if this terminal cannot be probed. The first import
    probes the terminal (graphics protocols, cell size), so call this before the app starts
    and Textual takes over the terminal."""
    try:
        from textual_image import widget
    except Exception:  # the probe fails on odd terminals (e.g. a 0x0 pty): show no image
        return None
    return widget


def _image_class(mode: str) -> type | None:
    widget = image_backend()
    if widget is None:
        return None
    return {
        "auto": widget.Image,
        "tgp": widget.TGPImage,
        "sixel": widget.SixelImage,
        "halfcell": widget.HalfcellImage,
        "unicode": widget.UnicodeImage,
    }[mode]


class ImageView(Container):
    """Shows one image file. A missing or broken file (even one that broke after import)
    or `--image-mode none` is reported in words, as literal text: the screen never crashes
    on an image."""

    def __init__(self, mode: str = "auto", **kwargs: object) -> None:
        if mode not in IMAGE_MODES:
            raise ValueError(f"image mode must be one of {', '.join(IMAGE_MODES)}")
        super().__init__(**kwargs)
        self.mode = mode

    def show(self, path: str | None, label: str) -> None:
        """Show the file at `path` (`label` names the image when there is no path)."""
        self.remove_children()
        name = printable(Path(path).name if path else label, newlines=False)
        problem = "no image file" if path is None else image_problem(path)
        if problem is not None:
            self.note(f"image cannot be shown:\n{name}\n{problem}")
        elif self.mode == "none" or _image_class(self.mode) is None:
            self.note(f"image display off\n{name}\n(o opens it)")
        else:
            try:
                self.mount(_image_class(self.mode)(path, classes="image"))
            except Exception as exc:  # whatever the renderer fails on is shown as the reason
                self.note(f"image cannot be shown:\n{name}\n{printable(str(exc))[:200]}")

    def note(self, text: str) -> None:
        self.mount(Static(Text(text), classes="image-missing"))


def open_in_viewer(path: str | None, label: str) -> str:
    """Open an image in the system viewer; returns what happened, for the message line."""
    if not path or not Path(path).is_file():
        return f"image file not found: {printable(path or label, newlines=False)}"
    if webbrowser.open(Path(path).resolve().as_uri()):
        return f"opened {printable(Path(path).name, newlines=False)} in the system viewer"
    return f"no viewer found; open {printable(os.path.relpath(path), newlines=False)}"
