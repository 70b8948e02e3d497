"""thumb-tui: transparent human evaluation of image captions in the terminal."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("thumb-tui")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
