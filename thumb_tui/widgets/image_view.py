"""The image panel: terminal graphics via textual-image, or a clear note when it cannot."""

from __future__ import annotations

from pathlib import Path

from textual.containers import Container
from textual.widgets import Static

# textual-image probes the terminal (graphics support, cell size) when first imported, which
# must happen before Textual takes over the terminal: so at import time, not lazily.
from textual_image import widget

IMAGE_MODES = ("auto", "tgp", "sixel", "halfcell", "unicode", "none")


def _image_class(mode: str) -> type:
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
        elif self.mode == "none":
            self.mount(Static(f"image display off\n{Path(path).name}\n(o opens it)",
                              classes="image-missing"))
        else:
            self.mount(_image_class(self.mode)(path, classes="image"))
