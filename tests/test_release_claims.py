"""`thumb release`: a session killed with an image open keeps its claim, and nobody else
is offered the image until its annotator returns; the lead gives such untouched claims
up, a rated image staying its annotator's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from typer.testing import CliRunner

from storage.models import Assignment, Event, Rating, ReleasedRating
from storage.rating.rating_sessions import AnnotationSession
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
    kept, *freed = released.output.splitlines()  # the rated claim is kept, and said so
    assert kept.startswith(f"kept ann's claim on {first.key} at stage 1")
    assert " ".join(freed).split() == ["released", "1", "claim(s)", "of", "ann;", "open",
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
    assert nothing.output.splitlines() == [kept]  # only the explained skip is left


def test_a_partly_rated_claim_is_kept_with_the_reason_and_freed_with_force(tmp_path):
    """The trial: a dead terminal's partly rated image stayed claimed for good, and `thumb
    release` skipped it without a word. Freed with --force, its ratings move to
    `released_rating` with every value (never lost, counted nowhere), logged."""
    engine = sample_engine(tmp_path)
    db = str(tmp_path / "app.db")
    dead = AnnotationSession(engine, "ann", seed_source=lambda: 1)
    image = dead.images[0]
    groups = dead.open_image(0)
    dead.set_values(groups[0], {"precision": 4, "recall": 3}, image_index=0, focus=0)
    assert image.id not in {i.id for i in AnnotationSession(engine, "bea").images}

    skipped = runner.invoke(app, ["--db", db, "release", "--annotator", "ann"])
    assert skipped.exit_code == 0, skipped.output
    rated = len(groups[0].caption_ids)  # identical captions are rated as one
    assert f"kept ann's claim on {image.key} at stage 1: they rated {rated} caption(s)" in (
        " ".join(skipped.output.split()))
    assert "--force` frees it" in skipped.output
    everywhere = runner.invoke(app, ["--db", db, "release", "--annotator", "ann", "--force"])
    assert everywhere.exit_code == 2 and "name its image with --image" in everywhere.output

    status = runner.invoke(app, ["--db", db, "status"])
    claims = status.output[status.output.index("Claims held"):].splitlines()
    row = next(line.split() for line in claims if image.key in line)
    assert row[:4] == ["ann", image.key, "1", str(rated)] and row[-1] in ("s", "min")
    from rich.console import Console

    from storage.rating.monitor import read_monitor
    from thumb_tui.screens.monitor import pipeline_view

    def monitor_says() -> str:
        shown = Console(width=80, record=True)
        shown.print(pipeline_view([], read_monitor(engine).claims))
        return shown.export_text()

    assert "claims idle" not in monitor_says()  # a claim in use is no news
    claim = Assignment.__table__
    with engine.begin() as connection:  # the terminal died an hour ago
        connection.execute(claim.update().values(
            last_viewed_at=datetime.now(UTC) - timedelta(hours=1, minutes=2)))
    assert f"ann on {image.key} (stage 1, {rated} rated) for 1h 02m" in monitor_says()

    rating, events, archive = Rating.__table__, Event.__table__, ReleasedRating.__table__
    with engine.connect() as connection:
        before = {row.id: row._asdict() for row in connection.execute(select(rating))}
        ann_claim = connection.execute(select(claim.c.id).where(
            claim.c.image_id == image.id, claim.c.stage == 1)).scalar_one()
    assert len(before) == rated
    forced = runner.invoke(app, ["--db", db, "release", "--annotator", "ann", "--image",
                                 image.key, "--force", "--by", "lead"])
    assert forced.exit_code == 0, forced.output
    freed, moved = forced.output.rstrip("\n").rsplit("\n", 1)
    assert freed.split()[-1] == image.key
    assert moved.startswith(f"{rated} rating(s) of theirs moved to table released_rating")
    with engine.connect() as connection:
        left = connection.execute(select(rating.c.id)).all()
        kept_aside = connection.execute(select(archive)).all()
        logged = connection.execute(
            select(events.c.table_name, events.c.row_id, events.c.field_name,
                   events.c.old_value, events.c.new_value, events.c.actor)
            .where(events.c.action == "release")).all()
    assert left == []  # no analysis or protocol rule counts them any more
    assert sorted(row.rating_id for row in kept_aside) == sorted(before)
    for row in kept_aside:  # every value as it was, with the claim and who released it
        original = before[row.rating_id]
        assert {name: getattr(row, name) for name in original if name != "id"} == {
            name: value for name, value in original.items() if name != "id"}
        assert (row.assignment_id, row.released_by) == (ann_claim, "lead")
        assert row.released_at is not None
    removed = {field: json.loads(old) for table, _, field, old, _, _ in logged
               if table == "rating"}
    assert (removed["precision"], removed["recall"], removed["stage"]) == (4, 3, 1)
    assert sorted((row_id, json.loads(new)) for table, row_id, field, _, new, _ in logged
                  if table == "released_rating" and field == "rating_id") == sorted(
        (row.id, row.rating_id) for row in kept_aside)
    assert {actor for *_, actor in logged} == {"lead"}
    taker = AnnotationSession(engine, "bea", seed_source=lambda: 2)
    assert image.id in {i.id for i in taker.images}
    index = next(n for n, i in enumerate(taker.images) if i.id == image.id)
    assert all(group.values["precision"] is None for group in taker.open_image(index))
