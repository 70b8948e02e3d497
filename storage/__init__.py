"""Storage: SQLModel tables, engine/session, import/export, migrations."""

from storage.db import database_url, make_engine, open_database, session
from storage.errors import InputError, Problem
from storage.exporter import EXPORT_FORMATS, export_ratings
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
from storage.queries import final_scores, project_status, ratings_frame
from storage.thumb_release import THUMB_ANNOTATOR, export_thumb, import_thumb

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
    "session",
]
