"""`python -m thumb_tui` runs the `thumb` command line."""

from thumb_tui.cli import app

app()
