"""Screens of the thumb-tui app; each has its own .tcss file beside it."""
