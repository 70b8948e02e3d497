"""thumb-tui: transparent human evaluation of image captions in the terminal."""


def __getattr__(name: str) -> str:
    """`__version__`, read from the package metadata when asked for, not at every
    command's start: finding and parsing the metadata takes tens of milliseconds."""
    if name == "__version__":
        from metrics.signature import tool_version

        return tool_version()
    raise AttributeError(f"module 'thumb_tui' has no attribute {name!r}")
