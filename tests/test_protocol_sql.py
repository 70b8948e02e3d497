"""Issue #45: a team's server checks every rating and claim an annotator's role writes with
`storage.rating.protocol.may_rate_clause`, the protocol's rule in SQL. It must say what
`check_may_rate` says, image state by image state: here both judge every write (each
annotator, each stage) on many random states of a SQLite project, refusals and passes
alike."""

from __future__ import annotations

import random

from sqlalchemy import Connection, Engine, delete, insert, literal, select, update

from storage import import_captions
from storage.models import Annotator, Assignment, Caption, Image, Rating, Stage, utcnow
from storage.rating.protocol import ProtocolError, check_may_rate, may_rate_clause
from tests.conftest import SAMPLE_CSV

NAMES = ("ann", "ben", "cid", "dee")  # dee is retired: the protocol gives her nothing


def _random_states(connection: Connection, chance: random.Random, ids: dict[str, int]) -> None:
    """Every image a new random state: double or not, and for each annotator at each stage
    nothing, a claim (held or given up), or a rating of some or all of its captions."""
    rating, assignment, image = Rating.__table__, Assignment.__table__, Image.__table__
    connection.execute(delete(rating))
    connection.execute(delete(assignment))
    captions: dict[int, list[int]] = {}
    for image_id, caption_id in connection.execute(select(Caption.__table__.c.image_id,
                                                          Caption.__table__.c.id)):
        captions.setdefault(image_id, []).append(caption_id)
    rubric = "thumb-1.0"
    now = utcnow()
    for image_id, caption_ids in captions.items():
        connection.execute(update(image).where(image.c.id == image_id)
                           .values(double_rating=chance.random() < 0.4))
        for name in NAMES:
            for stage in Stage:
                weights = (6, 1, 1, 1, 3) if stage == Stage.FIRST else (10, 1, 1, 1, 1)
                what = chance.choices(("none", "claim", "released", "some", "all"), weights)[0]
                if what in ("claim", "released"):
                    connection.execute(insert(assignment).values(
                        image_id=image_id, annotator_id=ids[name], stage=int(stage),
                        shuffle_seed=1, seconds=0.0, focus=0, last_viewed_at=now,
                        released_at=now if what == "released" else None))
                elif what in ("some", "all"):
                    for position, caption_id in enumerate(caption_ids):
                        scored = what == "all" or position == 0
                        connection.execute(insert(rating).values(
                            caption_id=caption_id, annotator_id=ids[name], stage=int(stage),
                            precision=3 if scored else None, recall=3 if scored else None,
                            rubric=rubric, created_at=now, updated_at=now))


def _application_allows(connection: Connection, name: str, stage: Stage, image_id: int) -> bool:
    try:
        check_may_rate(connection, name, stage, image_id, lock=False)
    except ProtocolError:
        return False
    return True


def _server_allows(connection: Connection, name: str, stage: Stage, image_id: int) -> bool:
    return connection.execute(select(may_rate_clause(
        literal(name), literal(image_id), literal(int(stage))))).scalar_one()


def test_the_servers_write_rule_is_the_applications(engine: Engine) -> None:
    import_captions(engine, SAMPLE_CSV, actor="lead")
    annotator = Annotator.__table__
    chance = random.Random(45)
    with engine.begin() as connection:
        ids = {name: connection.execute(insert(annotator).values(
            name=name, created_at=utcnow(), retired_at=utcnow() if name == "dee" else None)
        ).inserted_primary_key[0] for name in NAMES}
        image_ids = list(connection.execute(select(Image.__table__.c.id)).scalars())
        verdicts = {True: 0, False: 0}
        for _ in range(12):
            _random_states(connection, chance, ids)
            for image_id in image_ids:
                for name in NAMES:
                    for stage in Stage:
                        allowed = _application_allows(connection, name, stage, image_id)
                        assert _server_allows(connection, name, stage, image_id) == allowed, (
                            name, stage, image_id)
                        verdicts[allowed] += 1
        assert not _server_allows(connection, "ann", Stage.FIRST, max(image_ids) + 1)
    assert min(verdicts.values()) > 200, verdicts  # both verdicts, many times
