"""The image panel: terminal graphics via textual-image, or a clear note when it cannot."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

from textual.containers import Container
from textual.widgets import Static

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
    """Shows one image file; a missing file or `--image-mode none` is reported in words."""

    def __init__(self, mode: str = "auto", **kwargs: object) -> None:
        if mode not in IMAGE_MODES:
            raise ValueError(f"image mode must be one of {', '.join(IMAGE_MODES)}")
        super().__init__(**kwargs)
        self.mode = mode

    def show(self, path: str | None, label: str) -> None:
        self.remove_children()
        if path is None or not Path(path).is_file():
            name = Path(path).name if path else label
            self.mount(Static(f"image file not found:\n{name}", classes="image-missing"))
        elif self.mode == "none" or _image_class(self.mode) is None:
            self.mount(Static(f"image display off\n{Path(path).name}\n(o opens it)",
                              classes="image-missing"))
        else:
            self.mount(_image_class(self.mode)(path, classes="image"))
