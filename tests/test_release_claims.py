"""`thumb release`: a session killed with an image open keeps its claim, and nobody else
is offered the image until its annotator returns; the lead gives such untouched claims
up, a rated image staying its annotator's."""

from __future__ import annotations

from sqlalchemy import select
from typer.testing import CliRunner

from storage.models import Assignment, Event
from storage.rating_sessions import AnnotationSession
from tests.app_helpers import sample_engine
from thumb_tui.cli import app

runner = CliRunner()


def test_the_lead_releases_a_killed_session_s_untouched_claim_only(tmp_path):
    engine = sample_engine(tmp_path)
    db = str(tmp_path / "app.db")
    killed = AnnotationSession(engine, "ann", seed_source=lambda: 1)
    first, second = killed.images[0], killed.images[1]
    group = killed.open_image(0)[0]  # rated: stays ann's
    killed.set_values(group, {"precision": 4}, image_index=0, focus=0)
    killed.open_image(1)  # open when the process was killed: never given up
    others = AnnotationSession(engine, "bea", seed_source=lambda: 2)
    assert {image.id for image in others.images}.isdisjoint({first.id, second.id})

    assert runner.invoke(app, ["--db", db, "release", "--annotator", "nobody"]).exit_code == 2
    unknown = runner.invoke(app, ["--db", db, "release", "--annotator", "ann", "--image",
                                  "no-such-image"])
    assert unknown.exit_code == 2 and "no image 'no-such-image'" in unknown.output
    released = runner.invoke(app, ["--db", db, "release", "--annotator", "ann",
                                   "--by", "lead"])
    assert released.exit_code == 0, released.output
    assert released.output.split() == ["released", "1", "claim(s)", "of", "ann;", "open",
                                       "to", "others", "again:", second.key]
    again = AnnotationSession(engine, "bea", seed_source=lambda: 2)
    offered = {image.id for image in again.images}
    assert second.id in offered and first.id not in offered
    table, events = Assignment.__table__, Event.__table__
    with engine.connect() as connection:
        held = dict(connection.execute(select(table.c.image_id, table.c.released_at).where(
            table.c.stage == 1)).all())
        logged = connection.execute(select(events.c.actor).where(
            events.c.action == "release")).scalars().all()
    assert held[first.id] is None and held[second.id] is not None and logged == ["lead"]
    nothing = runner.invoke(app, ["--db", db, "release", "--annotator", "ann"])
    assert nothing.exit_code == 0
    assert nothing.output.startswith("ann holds no claim on an image they have rated nothing")
