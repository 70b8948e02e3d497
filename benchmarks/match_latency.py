"""Verification screen with 50,000 pairs in the database (answers by other annotators on
most of them): answer key -> committed latency, median and p99 (target p99 <= 20 ms),
through the real screen headless (Textual's Pilot), batches rolling over included. The
reference, measured in the same run, is the same commit as a bare SQL insert of the answer
and its event-log row. Prints figures, asserts nothing."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import func, insert, select  # noqa: E402

from benchmarks.annotate_latency import percentile  # noqa: E402
from benchmarks.match_proposals import make_project  # noqa: E402
from metrics.retrieval.match import ScoreFile  # noqa: E402
from reports.match import make_batches, propose, top_lists_from_matrix  # noqa: E402
from storage import open_database  # noqa: E402
from storage.match import MatchSession, collection  # noqa: E402
from storage.models import (  # noqa: E402
    Annotator,
    Event,
    MatchBatch,
    MatchBatchItem,
    MatchClaim,
    MatchPair,
    MatchVerification,
    utcnow,
)
from thumb_tui.app import ThumbApp  # noqa: E402
from thumb_tui.screens.match import MatchScreen  # noqa: E402


def fill(db: Path, images: int, answered_share: float) -> int:
    """A project whose proposals and gold items make 50,000+ pairs; other annotators have
    answered `answered_share` of the batches. Returns the number of pairs."""
    make_project(db, images, 5)
    engine = open_database(db)
    items = collection(engine)
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((images, images * 5), dtype=np.float32)
    lists = top_lists_from_matrix(ScoreFile(scores, items.image_keys, items.caption_keys),
                                  items, Path("synthetic"), directions=("i2t", "t2i"),
                                  depth=25, sample=images, seed=0)
    propose(engine, lists, model="synthetic", signature="synthetic", direction="both",
            top_k=5, sample=images, seed=0, actor="bench")
    make_batches(engine, size=20, redundancy=1, seed=0, negatives_beyond=25, actor="bench",
                 gold_systems=("s0",))  # s0's captions are true here
    batch, item, claim = MatchBatch.__table__, MatchBatchItem.__table__, MatchClaim.__table__
    with engine.begin() as connection:
        batches = connection.execute(select(batch.c.id).order_by(batch.c.id)).scalars().all()
        done = batches[: int(len(batches) * answered_share)]
        now = utcnow()
        connection.execute(insert(Annotator.__table__), [
            {"name": f"other{n}", "created_at": now} for n in range(20)])
        others = connection.execute(select(Annotator.__table__.c.id).where(
            Annotator.__table__.c.name.like("other%"))).scalars().all()
        connection.execute(insert(claim), [
            {"batch_id": b, "annotator_id": others[n % len(others)], "shuffle_seed": n,
             "status": "active", "focus": 0, "claimed_at": now}
            for n, b in enumerate(done)])
        claim_of = dict(connection.execute(select(claim.c.batch_id, claim.c.id)).all())
        rows = connection.execute(select(item.c.id, item.c.batch_id).where(
            item.c.batch_id.in_(done))).all()
        connection.execute(insert(MatchVerification.__table__), [
            {"claim_id": claim_of[b], "item_id": i, "answer": 1 + i % 4, "seconds": 4.0,
             "created_at": now, "updated_at": now} for i, b in rows])
        connection.execute(insert(Event.__table__), [
            {"at": now, "actor": "other", "action": "update",
             "table_name": "match_verification", "row_id": n, "field_name": "answer",
             "old_value": "null", "new_value": json.dumps(1 + n % 4), "change_id": f"c{n}"}
            for n in range(len(rows))])
        pairs = connection.execute(select(func.count()).select_from(MatchPair.__table__)
                                   ).scalar_one()
    engine.dispose()
    return pairs


async def measure(db: Path, presses: int) -> tuple[list[float], float]:
    engine = open_database(db)
    start = time.perf_counter()
    seeds = itertools.count(1)
    session = MatchSession(engine, "latency", seed_source=lambda: next(seeds))
    app = ThumbApp(screen=MatchScreen(session, "none"))
    handled = []
    async with app.run_test(size=(80, 24)) as pilot:
        while not isinstance(app.screen, MatchScreen):
            await pilot.pause()
        startup = time.perf_counter() - start
        screen = app.screen
        for index in range(presses):
            t0 = time.perf_counter()
            await screen.run_action(f"answer({1 + index % 4})")  # commit + next pair shown
            handled.append(time.perf_counter() - t0)
            if index % 10 == 9:
                await pilot.pause()
    return handled, startup


def reference(db: Path, presses: int) -> list[float]:
    """The floor: one transaction inserting an answer row and its event-log row."""
    engine = open_database(db)
    table, event = MatchVerification.__table__, Event.__table__
    with engine.connect() as connection:
        claim_id = connection.execute(select(MatchClaim.__table__.c.id).limit(1)).scalar()
        items = connection.execute(select(MatchBatchItem.__table__.c.id).where(
            MatchBatchItem.__table__.c.id.not_in(select(table.c.item_id))).limit(presses)
        ).scalars().all()
    times = []
    for item_id in items:
        t0 = time.perf_counter()
        with engine.begin() as connection:
            connection.execute(insert(table).values(claim_id=claim_id, item_id=item_id,
                                                    answer=1, seconds=1.0, created_at=utcnow(),
                                                    updated_at=utcnow()))
            connection.execute(insert(event).values(at=utcnow(), actor="ref",
                                                    action="update",
                                                    table_name="match_verification",
                                                    field_name="answer", new_value="1"))
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--presses", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "latency.db"
        pairs = fill(db, args.images, answered_share=0.9)
        engine = open_database(db)
        with engine.connect() as connection:
            answers = connection.execute(select(func.count()).select_from(
                MatchVerification.__table__)).scalar_one()
        engine.dispose()
        print(f"database: {pairs:,} pairs in batches of 20, {answers:,} answers by others")
        handled, startup = asyncio.run(measure(db, args.presses))
        floor = reference(db, args.presses)
    print(f"session + screen start                 {startup * 1000:8.0f} ms")
    for label, values in (("answer key -> committed, next shown", handled),
                          ("reference: bare insert + event row", floor)):
        print(f"{label:<38} median {statistics.median(values) * 1000:6.1f} ms   "
              f"p99 {percentile(values, 0.99) * 1000:6.1f} ms")
    print("target: answer key -> committed p99 <= 20 ms")
    print(f"ratio: ours / reference, p99 = "
          f"{percentile(handled, 0.99) / percentile(floor, 0.99):.1f}x, median = "
          f"{statistics.median(handled) / statistics.median(floor):.1f}x")


if __name__ == "__main__":
    main()
