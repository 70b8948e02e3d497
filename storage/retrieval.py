"""Evaluated retrieval models and their results. A model is stored by name with the digest
of its files; results are stored per positive set under the signature of their settings,
so evaluating the same files with the same settings again reads them back instead."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, delete, select

from rubrics.files import regular_file
from storage.db.engine import write_transaction
from storage.events import log_change
from storage.models import RetrievalModel, RetrievalResult, utcnow

if TYPE_CHECKING:
    import pandas as pd

RESULT_COLUMNS = ("positives", "metric", "direction", "k", "m", "value", "ci_low", "ci_high",
                  "n")


class RetrievalStoreError(ValueError):
    """A request the stored models refuse (e.g. a name already used for other files)."""


def file_digest(paths: Sequence[tuple[str, Path]]) -> str:
    """`label:sha256|…` of the files' bytes, in the order given. Each must be a regular
    file (a FIFO would block the hashing for ever): ValueError naming it otherwise."""
    parts = []
    for label, path in paths:
        regular_file(path)
        with open(path, "rb") as handle:
            parts.append(f"{label}:{hashlib.file_digest(handle, 'sha256').hexdigest()}")
    return "|".join(parts)


def find_model(engine: Engine, name: str) -> tuple[int, str] | None:
    """(id, digest) of the stored model `name`, or None."""
    model = RetrievalModel.__table__
    with engine.connect() as connection:
        row = connection.execute(select(model.c.id, model.c.digest).where(
            model.c.name == name)).first()
    return None if row is None else (row.id, row.digest)


def check_model_files(engine: Engine, name: str, digest: str, replace: bool) -> set[str]:
    """The signatures already stored for `name` from these files (empty for a new model or
    a replaced one). The same name with other files is refused unless `replace`."""
    found = find_model(engine, name)
    if found is None:
        return set()
    if found[1] != digest:
        if not replace:
            raise RetrievalStoreError(
                f"model {name!r} was evaluated from other files; pass --replace to "
                "replace it (its stored results are dropped) or choose another --name")
        return set()
    result = RetrievalResult.__table__
    with engine.connect() as connection:
        return set(connection.execute(select(result.c.signature).distinct().where(
            result.c.model_id == found[0])).scalars())


def save_evaluation(engine: Engine, name: str, *, source: str, digest: str, files: str,
                    results: dict[str, list[dict[str, object]]], actor: str) -> int:
    """Store model `name` (created, or replaced when its files changed: its old results
    go) and each signature's records, in one transaction. Returns the model id."""
    model, result = RetrievalModel.__table__, RetrievalResult.__table__
    now = utcnow()
    with write_transaction(engine) as connection:
        row = connection.execute(select(model.c.id, model.c.digest).where(
            model.c.name == name).with_for_update()).first()
        events = []
        if row is None:
            model_id = connection.execute(model.insert().values(
                name=name, source=source, digest=digest, files=files, created_at=now)
            ).inserted_primary_key[0]
            events.append(("create", "retrieval_model", "digest", None, digest))
        else:
            model_id = row.id
            if row.digest != digest:
                connection.execute(delete(result).where(result.c.model_id == model_id))
                connection.execute(model.update().where(model.c.id == model_id).values(
                    source=source, digest=digest, files=files, created_at=now))
                events.append(("update", "retrieval_model", "digest", row.digest, digest))
        for signature, records in results.items():
            connection.execute(delete(result).where((result.c.model_id == model_id)
                                                    & (result.c.signature == signature)))
            rows = [{**{c: record[c] for c in RESULT_COLUMNS}, "model_id": model_id,
                     "signature": signature, "computed_at": now} for record in records]
            if rows:
                connection.execute(result.insert(), rows)
            events.append(("create", "retrieval_result", "signature", None, signature))
        change_id = None
        for action, table, field, old, new in events:
            change_id = log_change(connection, actor=actor, action=action, table=table,
                                   row_id=model_id, old=None if old is None else {field: old},
                                   new={field: new}, change_id=change_id)
    return model_id


def has_results(engine: Engine) -> bool:
    """Whether any retrieval model was evaluated (the report skips the section otherwise)."""
    with engine.connect() as connection:
        return connection.execute(
            select(RetrievalResult.__table__.c.id).limit(1)).first() is not None


def stored_results(engine: Engine, models: Sequence[str] | None = None,
                   signatures: Sequence[str] | None = None) -> list[dict[str, object]]:
    """Stored results as records: model, signature and RESULT_COLUMNS, by model and then
    in the order stored."""
    model, result = RetrievalModel.__table__, RetrievalResult.__table__
    query = select(model.c.name.label("model"), result.c.signature,
                   *(result.c[c] for c in RESULT_COLUMNS)).join(
        model, model.c.id == result.c.model_id).order_by(model.c.name, result.c.id)
    if models is not None:
        query = query.where(model.c.name.in_(list(models)))
    if signatures is not None:
        query = query.where(result.c.signature.in_(list(signatures)))
    with engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def results_frame(engine: Engine, models: Sequence[str] | None = None,
                  signatures: Sequence[str] | None = None) -> pd.DataFrame:
    """`stored_results` as a frame (k and m nullable integers)."""
    import pandas as pd

    frame = pd.DataFrame(stored_results(engine, models, signatures),
                         columns=["model", "signature", *RESULT_COLUMNS])
    for column in ("k", "m"):
        frame[column] = frame[column].astype("Int64")
    return frame


def project_captions(engine: Engine) -> pd.DataFrame:
    """Every caption of the project with its retrieval key (as `thumb match` keys it: the
    imported caption_id, else `<image key>/<system>`), its image's key and its text."""
    import pandas as pd

    from storage.match import caption_texts, collection

    items = collection(engine)
    image_key = dict(zip(items.image_ids.tolist(), items.image_keys, strict=True))
    return pd.DataFrame({"caption_key": items.caption_keys,
                         "image_key": [image_key[i] for i in items.caption_image.tolist()],
                         "text": caption_texts(engine)[1]})


def project_references(engine: Engine) -> dict[str, list[str]]:
    """Each image key's reference texts, in order (images without references included)."""
    from storage.models import Image, ImageReference

    image, ref = Image.__table__, ImageReference.__table__
    with engine.connect() as connection:
        references: dict[str, list[str]] = {key: [] for key in connection.execute(
            select(image.c.key).order_by(image.c.id)).scalars()}
        for key, text in connection.execute(
                select(image.c.key, ref.c.text).join(image, ref.c.image_id == image.c.id)
                .order_by(ref.c.image_id, ref.c.position)):
            references[key].append(text)
    return references
