"""Storage: SQLModel tables, engine/session, import/export, migrations.

Every name here loads its module on first use, so that importing a storage module (the
command line's modules do, to name their options) imports neither SQLAlchemy nor the
tables nor pandas until a command opens a database."""

from importlib import import_module

from storage.errors import InputError, Problem

EXPORT_FORMATS = ("csv", "jsonl", "parquet", "thumb-jsonl")

_LAZY = {
    "database_url": "storage.db.engine",
    "make_engine": "storage.db.engine",
    "open_database": "storage.db.opening",
    "ImportSummary": "storage.imports.importer",
    "import_captions": "storage.imports.importer",
    "Annotator": "storage.models",
    "Caption": "storage.models",
    "Event": "storage.models",
    "Image": "storage.models",
    "ImageReference": "storage.models",
    "Rating": "storage.models",
    "Stage": "storage.models",
    "export_ratings": "storage.exporter",
    "final_scores": "storage.rating.rating_frames",
    "project_status": "storage.rating.rating_frames",
    "ratings_frame": "storage.rating.rating_frames",
    "THUMB_ANNOTATOR": "storage.imports.thumb_release",
    "export_thumb": "storage.imports.thumb_release",
    "import_thumb": "storage.imports.thumb_release",
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
