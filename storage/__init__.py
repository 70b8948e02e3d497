"""Storage: SQLModel tables, engine/session, import/export, migrations.

The pandas-backed parts (export, queries, the THUMB release) load on first use, so the
annotation app starts without importing pandas."""

from importlib import import_module

from storage.db import database_url, make_engine, open_database
from storage.errors import InputError, Problem
from storage.importer import ImportSummary, import_captions
from storage.models import (
    Annotator,
    Caption,
    Event,
    Image,
    ImageReference,
    Rating,
    Stage,
)

EXPORT_FORMATS = ("csv", "jsonl", "parquet", "thumb-jsonl")

_LAZY = {
    "export_ratings": "storage.exporter",
    "final_scores": "storage.rating_frames",
    "project_status": "storage.rating_frames",
    "ratings_frame": "storage.rating_frames",
    "THUMB_ANNOTATOR": "storage.thumb_release",
    "export_thumb": "storage.thumb_release",
    "import_thumb": "storage.thumb_release",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")


__all__ = [
    "EXPORT_FORMATS",
    "THUMB_ANNOTATOR",
    "Annotator",
    "Caption",
    "Event",
    "Image",
    "ImageReference",
    "ImportSummary",
    "InputError",
    "Problem",
    "Rating",
    "Stage",
    "database_url",
    "export_ratings",
    "export_thumb",
    "final_scores",
    "import_captions",
    "import_thumb",
    "make_engine",
    "open_database",
    "project_status",
    "ratings_frame",
]
