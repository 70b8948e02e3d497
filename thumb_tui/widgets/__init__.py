"""Reusable widgets of the annotation screens."""
