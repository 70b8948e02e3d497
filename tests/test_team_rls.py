"""Issue #28: on PostgreSQL the server itself keeps each annotator's view blind. A team
made by `thumb team` (`storage/team.py`) on THUMB_TEST_POSTGRES; every forbidden read or
write is tried through a raw connection with the annotator's own credentials and must
return no rows or be refused by the server. Each such test also runs `unguarded` (row-level
security off, the README's old grants) and there asserts that the access succeeds: the
test can fail. Then the whole THUMB workflow runs as those roles."""

from __future__ import annotations

import csv
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, literal, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from storage import import_captions
from storage.models import Image, Stage
from storage.rating.annotators import register_annotator
from storage.rating.project_queues import assign_double, disagreements, release_claims
from storage.rating.protocol import PROGRESS_FUNCTION
from storage.rating.rating_sessions import AnnotationSession
from tests.conftest import SAMPLE_CSV
from tests.team_helpers import PASSWORD, Team, team_on
from tests.test_import import system_orders

URL = os.environ.get("THUMB_TEST_POSTGRES")
pytestmark = pytest.mark.postgres
PEOPLE = {"alice": False, "bob": False, "carol": False, "dave": False, "lead": True}


@pytest.fixture
def team() -> Iterator[Team]:
    if not URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    with team_on(URL, PEOPLE) as made:
        import_captions(made.engine("lead"), SAMPLE_CSV, actor="lead")
        yield made


@pytest.fixture(params=["guarded", "unguarded"])
def guarded(request: pytest.FixtureRequest, team: Team) -> bool:
    """Each rule's test runs twice: on the team as `thumb team init` makes it, and with
    row-level security off, where what the rule forbids must become possible."""
    return request.param == "guarded"


def rate_image(session: AnnotationSession, index: int, precision: int = 4) -> None:
    for group in session.open_image(index):
        session.set_values(group, {"precision": precision, "recall": 4}, image_index=index,
                           focus=0)


def reach(connection: Connection, sql: str, **values: object) -> int | None:
    """How many rows the statement reads or changes; None when the server refuses it."""
    try:
        with connection.begin_nested():
            result = connection.execute(text(sql), values)
            return len(result.all()) if result.returns_rows else result.rowcount
    except DBAPIError:
        return None


def forbidden(team: Team, guarded: bool, who: str, *attempts: str, **values: object) -> None:
    """Guarded, every attempt by `who` reads or changes nothing or is refused; unguarded,
    at least one reaches a row (so the guarded assertion could have failed)."""
    if not guarded:
        team.unguard()
    with team.engine(who).connect() as connection:  # closed: everything rolled back
        reached = {sql: reach(connection, sql, **values) for sql in attempts}
    if guarded:
        assert all(count in (None, 0) for count in reached.values()), reached
    else:
        assert any(count for count in reached.values()), reached


def annotator_id(team: Team, who: str) -> int:
    with team.admin.connect() as connection:
        return connection.execute(text("SELECT id FROM annotator WHERE name = :name"),
                                  {"name": team.names[who]}).scalar_one()


# -- one test per rule -----------------------------------------------------------------------

@pytest.mark.slow
def test_an_annotator_reads_captions_without_the_system_names(team, guarded):
    with team.engine("alice").connect() as connection:
        assert reach(connection, "SELECT id, image_id, text FROM caption") == 60
    forbidden(team, guarded, "alice", "SELECT system FROM caption",
              "SELECT external_id FROM caption")


def test_the_caption_ids_an_annotator_reads_do_not_give_away_the_systems(team):
    """Issue #45 item 3, replayed: an annotator ranks the captions their role reads, image
    by image, by id and by the order the server returns them in (as written). The sample
    file lists every image's systems in one order (Human, Show-Tell, Up-Down, VinVL-base);
    each ranking shows more than one. (The 2 images where two systems wrote the same text
    are left out: their text names neither.)"""
    with SAMPLE_CSV.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    texts = Counter((row["image_id"], row["caption"]) for row in rows)
    twice = {image for (image, _), times in texts.items() if times > 1}
    system_of = {(row["image_id"], row["caption"]): row["system"] for row in rows}
    with team.engine("alice").connect() as connection:
        key_of = dict(connection.execute(text("SELECT id, key FROM image")).all())
        read = [(row.id, row.image_id, system_of[key_of[row.image_id], row.text])
                for row in connection.execute(text("SELECT id, image_id, text FROM caption"))
                if key_of[row.image_id] not in twice]
    assert len(read) == 52
    assert len(system_orders(read)) > 1  # by id
    assert len(system_orders([(place, image, system) for place, (_, image, system)
                              in enumerate(read)])) > 1  # as the server returns them


@pytest.mark.slow
def test_an_annotator_reads_and_writes_only_their_own_stage_one_ratings(team, guarded):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    rate_image(alice, 0)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"])
    rate_image(bob, 0)  # another image: alice holds hers
    forbidden(team, guarded, "bob",
              "SELECT * FROM rating WHERE annotator_id = :alice",
              "UPDATE rating SET precision = 1 WHERE annotator_id = :alice",
              "DELETE FROM rating WHERE annotator_id = :alice",
              "INSERT INTO rating (caption_id, annotator_id, stage, fluency, conciseness, "
              "inclusive, note, seconds, rubric, created_at, updated_at) SELECT id, :alice, "
              "3, 0, 0, 0, '', 0, 'thumb-1.0', now(), now() FROM caption LIMIT 1",
              alice=annotator_id(team, "alice"))


@pytest.mark.slow
def test_blind_double_rating_hides_the_other_raters_stage_one_scores(team, guarded):
    assign_double(team.engine("lead"), 0.2, seed=3, actor="lead")
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    double = next(i for i, image in enumerate(alice.images) if is_double(team, image.id))
    rate_image(alice, double)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"])
    image_id = alice.images[double].id
    rate_image(bob, bob.index_of(image_id), precision=2)  # the blind second rating
    forbidden(team, guarded, "bob",
              "SELECT r.precision FROM rating r JOIN caption c ON c.id = r.caption_id "
              "WHERE c.image_id = :image AND r.annotator_id <> :bob",
              image=image_id, bob=annotator_id(team, "bob"))


def is_double(team: Team, image_id: int) -> bool:
    image = Image.__table__
    with team.admin.connect() as connection:
        return connection.execute(select(image.c.double_rating)
                                  .where(image.c.id == image_id)).scalar_one()


@pytest.mark.slow
def test_a_reviewer_reads_stage_one_of_exactly_the_images_held_at_review(team, guarded):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    rate_image(alice, 0)
    rate_image(alice, 1)
    held, other = alice.images[0].id, alice.images[1].id
    bob = AnnotationSession(team.engine("bob"), team.names["bob"], stage=Stage.SECOND)
    groups = bob.open_image(bob.index_of(held))
    assert all(group.reference is not None for group in groups)  # the policy lets him
    forbidden(team, guarded, "bob",
              "SELECT r.id FROM rating r JOIN caption c ON c.id = r.caption_id "
              "WHERE c.image_id = :other", other=other)


@pytest.mark.slow
def test_a_resolver_reads_both_stages_only_of_the_images_they_resolve(team, guarded):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    for index in range(3):
        rate_image(alice, index)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"], stage=Stage.SECOND)
    reviewed = alice.images[0].id
    rate_image(bob, bob.index_of(reviewed), precision=1)  # a disagreement
    with team.engine("carol").connect() as connection:
        stages = connection.execute(text(
            "SELECT DISTINCT r.stage FROM rating r JOIN caption c ON c.id = r.caption_id "
            "WHERE c.image_id = :image"), {"image": reviewed}).scalars().all()
    assert sorted(stages) == [1, 2]  # carol may resolve it: she sees both stages
    assert [d.image_id for d in disagreements(team.engine("carol"),
                                              resolver=team.names["carol"])] != []
    forbidden(team, guarded, "carol",
              "SELECT r.id FROM rating r JOIN caption c ON c.id = r.caption_id "
              "WHERE c.image_id <> :image", image=reviewed)


@pytest.mark.slow
def test_gold_answer_keys_are_never_read_by_an_annotator(team, guarded):
    with team.engine("lead").begin() as connection:
        connection.execute(text(
            "INSERT INTO gold_image (key, created_at) VALUES ('g1', now());"
            "INSERT INTO gold_caption (gold_image_id, text, precision_min, precision_max, "
            "recall_min, recall_max, fluency_max, conciseness_max, inclusive_max, reason, "
            "rubric, created_at) SELECT id, 'A dog.', 4, 5, 4, 5, 0, 0, 0, 'there is a dog', "
            "'thumb-1.0', now() FROM gold_image"))
    forbidden(team, guarded, "alice", "SELECT precision_min, recall_max FROM gold_caption",
              "SELECT reason FROM gold_caption")


def test_the_event_log_is_insert_only_and_read_by_leads_only(team, guarded):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    rate_image(alice, 0)
    with team.engine("lead").connect() as connection:
        assert reach(connection, "SELECT * FROM event_log WHERE db_role = :role",
                     role=team.names["alice"])
    forbidden(team, guarded, "bob",
              "SELECT * FROM event_log WHERE db_role <> :role",
              "UPDATE event_log SET actor = 'mallory'", "DELETE FROM event_log",
              role=team.names["bob"])


def test_ratings_a_forced_release_set_aside_are_read_by_leads_only(team, guarded):
    """`thumb release --force` moves an annotator's ratings of the image into
    `released_rating`: blind scores, which no annotator reads, their own included."""
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    group = alice.open_image(0)[0]
    alice.set_values(group, {"precision": 4}, image_index=0, focus=0)
    freed = release_claims(team.engine("lead"), team.names["alice"], actor="lead",
                           image_key=alice.images[0].key, force=True)
    assert freed.set_aside == len(group.caption_ids)
    with team.engine("lead").connect() as connection:
        assert reach(connection, "SELECT * FROM released_rating") == freed.set_aside
    for who in ("alice", "bob"):
        forbidden(team, guarded, who, "SELECT * FROM released_rating")


@pytest.mark.slow
def test_an_annotator_changes_no_other_persons_rows(team, guarded):
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    alice.open_image(0)
    alice.flag_broken(1, "cannot be seen")
    forbidden(team, guarded, "bob",
              "UPDATE annotator SET native_english = true WHERE name = :alice",
              "INSERT INTO annotator (name, created_at) VALUES ('mallory', now())",
              "UPDATE assignment SET released_at = now() WHERE annotator_id = :alice_id",
              "DELETE FROM image_flag WHERE annotator_id = :alice_id",
              "UPDATE image SET double_rating = true",
              alice=team.names["alice"], alice_id=annotator_id(team, "alice"))


JUNK_STAGE_ONE = (
    "INSERT INTO rating (caption_id, annotator_id, stage, precision, recall, fluency, "
    "conciseness, inclusive, note, seconds, rubric, created_at, updated_at) SELECT id, "
    "thumb_me(), 1, 1, 1, 0, 0, 0, '', 0, 'thumb-1.0', now(), now() FROM caption "
    "WHERE image_id = :image")
OTHER_RATERS_SCORES = ("SELECT r.precision FROM rating r JOIN caption c ON c.id = r.caption_id "
                       "WHERE c.image_id = :image AND r.stage = 1 AND r.annotator_id <> thumb_me()")


def server_logged(team: Team, who: str, table: str) -> list[tuple[str, int, str]]:
    """(action, row id, fields) of the event-log rows the server wrote for `who`'s
    changes to `table`."""
    with team.admin.connect() as connection:
        return [tuple(row) for row in connection.execute(text(
            "SELECT action, row_id, field_name FROM event_log WHERE db_role = :role AND "
            "table_name = :table AND action LIKE 'server %' ORDER BY id"),
            {"role": team.names[who], "table": table})]


@pytest.mark.slow
def test_a_blind_rater_with_psql_cannot_read_or_forge_the_other_raters_scores(team):
    """Issue #45's trial, step by step through bob's own login: the second blind rater of
    a double image writes junk stage-1 ratings, a stage-2 row of his own, marks himself a
    native speaker to read alice's scores, copies them and moves the forged row away.
    Each step that matters is refused, his scores stay unread, and what the server allows
    is logged. Then the lead records him a native speaker and carol reviews the image:
    the fluency round's reads still show him none of alice's scores, and his stage 1 is
    closed."""
    assign_double(team.engine("lead"), 0.2, seed=3, actor="lead")
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    double = next(i for i, image in enumerate(alice.images) if is_double(team, image.id))
    rate_image(alice, double)
    image_id = alice.images[double].id
    other_image = alice.images[double + 1].id
    with team.engine("bob").begin() as bob:
        captions = reach(bob, JUNK_STAGE_ONE, image=image_id)
        assert captions  # the second blind rating: the protocol allows it
        assert reach(bob, "UPDATE rating SET precision = 2 WHERE annotator_id = thumb_me() "
                     "AND stage = 1") == captions  # his own stage 1, still open
        for attempt in (
                "INSERT INTO rating (caption_id, annotator_id, stage, fluency, conciseness, "
                "inclusive, note, seconds, rubric, created_at, updated_at) SELECT min(id), "
                "thumb_me(), 2, 0, 0, 0, '', 0, 'thumb-1.0', now(), now() FROM caption "
                "WHERE image_id = :image",  # a review of his own image, no P/R
                "INSERT INTO assignment (image_id, annotator_id, stage, shuffle_seed, "
                "seconds, focus, last_viewed_at) VALUES (:image, thumb_me(), 2, 1, 0, 0, now())",
                "UPDATE rating SET stage = 2 WHERE annotator_id = thumb_me()",
                "UPDATE annotator SET native_english = true WHERE name = session_user",
                OTHER_RATERS_SCORES,
                "UPDATE rating SET caption_id = (SELECT min(id) FROM caption WHERE image_id = "
                ":other) WHERE annotator_id = thumb_me()",
                "UPDATE rating SET annotator_id = (SELECT min(id) FROM annotator) "
                "WHERE annotator_id = thumb_me()",
                "UPDATE annotator SET native_english = NULL WHERE name = session_user"):
            assert not reach(bob, attempt, image=image_id, other=other_image), attempt
    assert [action for action, *_ in server_logged(team, "bob", "rating")] == (
        ["server insert"] * captions + ["server update"] * captions)
    register_annotator(team.engine("lead"), team.names["bob"], True)  # the lead's act
    carol = AnnotationSession(team.engine("carol"), team.names["carol"], stage=Stage.SECOND)
    rate_image(carol, carol.index_of(image_id))
    with team.engine("bob").begin() as bob:
        assert reach(bob, OTHER_RATERS_SCORES, image=image_id) == 0
        assert not reach(bob, "UPDATE rating SET precision = 4 WHERE annotator_id = "
                         "thumb_me() AND stage = 1")  # closed: the image was reviewed
        assert not reach(bob, "INSERT INTO fluency_check (caption_id, checker_id, fluency, "
                         "rubric, created_at) SELECT min(id), thumb_me(), 0, 'thumb-1.0', "
                         "now() FROM caption WHERE image_id = :other", other=other_image)


@pytest.mark.slow
def test_a_write_an_annotator_makes_with_psql_is_logged_by_the_server(team):
    """What the server lets an annotator's role write outside the tool (a flag, a claim's
    time, its taking back) is in the event log all the same, old and new values with
    it; the tool's own writes keep their own rows too."""
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    alice.open_image(0)
    image_id = alice.images[0].id
    with team.engine("alice").begin() as connection:
        assert reach(connection, "UPDATE assignment SET seconds = 99 WHERE annotator_id = "
                     "thumb_me()") == 1
        assert reach(connection, "INSERT INTO image_flag (image_id, annotator_id, reason, "
                     "created_at) VALUES (:image, thumb_me(), 'gone', now())", image=image_id)
        assert reach(connection, "DELETE FROM image_flag WHERE annotator_id = thumb_me()")
    claims = server_logged(team, "alice", "assignment")
    assert [(action, fields) for action, _, fields in claims][-1] == ("server update",
                                                                      "seconds")
    flag = server_logged(team, "alice", "image_flag")
    assert [action for action, *_ in flag] == ["server insert", "server delete"]
    with team.admin.connect() as connection:
        assert connection.execute(text(
            "SELECT old_value::jsonb ->> 'reason' FROM event_log WHERE action = "
            "'server delete' AND table_name = 'image_flag'")).scalar_one() == "gone"
    with team.engine("lead").begin() as connection:  # the lead's, through the tool: the
        connection.execute(text("UPDATE assignment SET seconds = 1"))  # tool logs its own
    assert server_logged(team, "lead", "assignment") == []
    psql = create_engine(team.login("lead"))  # the lead's own edit in psql: logged
    try:
        with psql.begin() as connection:
            connection.execute(text("UPDATE caption SET text = 'Edited by hand.' WHERE id = "
                                    "(SELECT min(id) FROM caption)"))
            connection.execute(text("UPDATE assignment SET seconds = 2"))
    finally:
        psql.dispose()
    [(action, _, fields)] = server_logged(team, "lead", "caption")
    assert (action, fields) == ("server update", "text")
    assert {action for action, *_ in server_logged(team, "lead", "assignment")} == {
        "server update"}


def test_only_a_lead_records_that_an_annotator_is_a_native_speaker(team):
    """The fluency round is open to native speakers: on a team an annotator's `--native`
    is refused in one sentence naming the lead's command, and the lead's is recorded."""
    from storage.rating.protocol import ProtocolError

    alice = team.names["alice"]
    with pytest.raises(ProtocolError, match=f"thumb annotator add {alice} --native"):
        register_annotator(team.engine("alice"), alice, True)
    assert register_annotator(team.engine("lead"), alice, True) is True
    assert register_annotator(team.engine("alice"), alice, True) is True  # nothing to record


def image_ids(session: AnnotationSession) -> list[int]:
    return [image.id for image in session.images]


def test_an_image_held_at_stage_one_is_hidden_from_everyone_else(team, guarded):
    """Alice holds an image at stage 1 and has not finished it (it takes one rater): no
    one else may hold it at any stage yet, so Bob's role reads no row of it (the image,
    its captions and references, her claim and her flag, who rated it) and locks none."""
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    held = alice.images[0].id
    group = alice.open_image(0)[0]
    alice.set_values(group, {"precision": 4}, image_index=0, focus=0)
    alice.flag_broken(0, "half of it is black")
    bob = AnnotationSession(team.engine("bob"), team.names["bob"])
    assert held not in image_ids(bob) and len(image_ids(bob)) == len(image_ids(alice)) - 1
    with team.engine("bob").connect() as connection:  # the others, open to him
        assert reach(connection, "SELECT id FROM image") == len(image_ids(bob))
    forbidden(team, guarded, "bob",
              "SELECT id FROM image WHERE id = :image",
              "SELECT id FROM image WHERE id = :image FOR UPDATE",
              "SELECT id, text FROM caption WHERE image_id = :image",
              "SELECT id FROM image_reference WHERE image_id = :image",
              "SELECT id FROM assignment WHERE image_id = :image",
              "SELECT id FROM image_flag WHERE image_id = :image",
              f"SELECT * FROM {PROGRESS_FUNCTION}(ARRAY[:image])", image=held)


def test_an_image_held_at_review_is_hidden_until_it_is_reviewed(team, guarded):
    """Carol opened an image for review: no one else may review it, nor rate it at stage
    1 (closed), nor resolve it yet, so Bob's role reads no row of it; once Carol has
    reviewed it, it is open to resolvers and his role reads it."""
    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    rate_image(alice, 0)
    image = alice.images[0].id
    carol = AnnotationSession(team.engine("carol"), team.names["carol"], stage=Stage.SECOND)
    carol.open_image(carol.index_of(image))
    bob = AnnotationSession(team.engine("bob"), team.names["bob"], stage=Stage.SECOND)
    assert image not in image_ids(bob)
    forbidden(team, guarded, "bob", "SELECT id FROM image WHERE id = :image",
              "SELECT id FROM caption WHERE image_id = :image",
              "SELECT id FROM assignment WHERE image_id = :image", image=image)
    rate_image(carol, carol.index_of(image), precision=1)
    with team.engine("bob").connect() as connection:
        assert reach(connection, "SELECT id FROM image WHERE id = :image", image=image) == 1


def test_a_write_the_server_refuses_is_an_error_not_a_success(team):
    """Two resolvers settle the same caption: the second one's change of the first one's
    resolution row is refused by the server (filtered by its policy, no error from the
    database), and the application reports it instead of logging a change never made."""
    from storage.rating.protocol import ProtocolError
    from storage.rating.rating_sessions import ResolutionSession

    alice = AnnotationSession(team.engine("alice"), team.names["alice"])
    rate_image(alice, 0)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"], stage=Stage.SECOND)
    rate_image(bob, bob.index_of(alice.images[0].id), precision=1)
    resolvers = [ResolutionSession(team.engine(who), team.names[who]) for who in ("carol",
                                                                                  "dave")]
    caption_id = resolvers[0].queue()[0].caption_id
    for resolver in resolvers:
        group = resolver.group_for_caption(caption_id)
        resolver.set_values(group, {"precision": 3, "recall": 4},
                            image_index=resolver.image_index_of_caption(caption_id), focus=0)
    first, second = resolvers
    first.record_reasons(first.group_for_caption(caption_id), ["both-wrong"])
    with pytest.raises(ProtocolError, match="someone else has just recorded this"):
        second.record_reasons(second.group_for_caption(caption_id), ["both-wrong"])
    with team.admin.connect() as connection:
        assert connection.execute(text(
            "SELECT count(*) FROM event_log WHERE table_name = 'resolution' "
            "AND action NOT LIKE 'server %'")).scalar_one() == 1  # the server's: #45


def test_every_image_the_protocol_opens_to_an_annotator_is_one_the_server_shows(engine):
    """The server's image rule (`holdable_images`) bounds the protocol's queues
    (`open_images`, from `refusals`): in a project part-way through every stage (on
    SQLite: the rule is plain SQL), every image open to an annotator at stage 1 or 2 is
    one their role reads, while an image someone else holds is hidden from the others."""
    from storage.rating.protocol import holdable_images, open_images

    import_captions(engine, SAMPLE_CSV, actor="lead")
    assign_double(engine, 0.3, seed=5, actor="lead")
    with engine.connect() as connection:
        double = set(connection.execute(select(Image.__table__.c.id)
                                        .where(Image.__table__.c.double_rating)).scalars())
    alice = AnnotationSession(engine, "alice")
    for index in range(8):
        rate_image(alice, index)
    single = next(i for i in range(8, len(alice.images)) if alice.images[i].id not in double)
    alice.set_values(alice.open_image(single)[0], {"precision": 4}, image_index=single,
                     focus=0)  # held at stage 1, unfinished
    rate_image(AnnotationSession(engine, "bob"), 0)
    carol = AnnotationSession(engine, "carol", stage=Stage.SECOND)
    rate_image(carol, 0, precision=2)
    carol.open_image(1)  # held at review, not reviewed yet
    dave = AnnotationSession(engine, "dave")
    dave.open_image(0)
    dave.flag_broken(0, "too dark")
    held = {"alice": alice.images[single].id, "carol": carol.images[1].id}
    with engine.connect() as connection:
        for name in ("alice", "bob", "carol", "dave", "erin"):
            shown = set(connection.execute(holdable_images(literal(name))).scalars())
            for stage in (Stage.FIRST, Stage.SECOND):
                assert open_images(connection, name, stage) <= shown, (name, stage)
            if name in held:
                assert held[name] in shown
            if name in ("dave", "erin"):  # neither rated nor holds either image
                assert not set(held.values()) & shown, name


# -- the workflow and the commands -----------------------------------------------------------

@pytest.mark.slow
def test_gold_feedback_reaches_an_annotator_who_cannot_read_the_key(team, tmp_path):
    """With feedback on, the reason of a gold caption answered wrongly is shown after the
    image (through the team's feedback function), though the role reads no key."""
    from storage.rating.gold import import_gold, is_gold

    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "g.png").write_bytes(
        (SAMPLE_CSV.parent / "images" / "01_red_balls.png").read_bytes())
    gold = tmp_path / "gold.csv"
    gold.write_text("image,path,caption,precision,recall,reason\n"
                    "gq,images/g.png,Three red balls.,4-5,3-5,Why this is right.\n",
                    encoding="utf-8")
    import_gold(team.engine("lead"), gold, actor="lead", rate=0.5, feedback=True)
    alice = AnnotationSession(team.engine("alice"), team.names["alice"],
                              seed_source=lambda: 1)
    index = next(i for i, image in enumerate(alice.images) if is_gold(image.id))
    for group in alice.open_image(index):  # recall 1: out of the key's range
        alice.set_values(group, {"precision": 5, "recall": 1}, image_index=index, focus=0)
    alice.open_image(0 if index else 1)
    assert alice.feedback() == "About the previous image: “Three red balls.”: Why this is right."
    with team.engine("alice").connect() as connection:
        assert reach(connection, "SELECT reason FROM gold_caption") is None



def import_gold_image(team: Team, folder: Path, *, feedback: bool) -> None:
    """Two gold captions of one gold image, imported by the lead at the rate 0.5."""
    from storage.rating.gold import import_gold

    (folder / "images").mkdir()
    (folder / "images" / "g.png").write_bytes(
        (SAMPLE_CSV.parent / "images" / "01_red_balls.png").read_bytes())
    gold = folder / "gold.csv"
    gold.write_text("image,path,caption,precision,recall,reason\n"
                    "gq,images/g.png,Three red balls.,4-5,3-5,Why this is right.\n"
                    "gq,images/g.png,Two red balls.,1-2,1-2,Why the other is wrong.\n",
                    encoding="utf-8")
    import_gold(team.engine("lead"), gold, actor="lead", rate=0.5, feedback=feedback)


@pytest.mark.slow
def test_the_gold_feedback_function_tells_an_annotator_no_key(team, tmp_path):
    """Issue #45 item 2, replayed in psql: an annotator inserts an answer of their own and
    asks the feedback function. It answers only while feedback is on, only of their own
    first answers (recorded by the server) that were wrong, and only the text and reason:
    never a range, never a caption they have not answered."""
    from storage.rating.gold import FEEDBACK_FUNCTION, FIRST_ANSWER_FUNCTION, set_gold_settings

    import_gold_image(team, tmp_path, feedback=False)
    feedback = f"SELECT * FROM {FEEDBACK_FUNCTION}(:image)"
    with team.engine("alice").begin() as connection:
        image = connection.execute(text("SELECT id FROM gold_image")).scalar_one()
        connection.execute(text(
            "INSERT INTO gold_answer (gold_caption_id, annotator_id, precision, recall, "
            "fluency, conciseness, inclusive, note, seconds, rubric, created_at, updated_at) "
            "SELECT id, thumb_me(), 1, 1, 0, 0, 0, '', 0, rubric, now(), now() "
            "FROM gold_caption WHERE text = 'Three red balls.'"))
        connection.execute(text(f"SELECT {FIRST_ANSWER_FUNCTION}(id) FROM gold_answer"))
        assert connection.execute(text(feedback), {"image": image}).all() == []  # off
    set_gold_settings(team.engine("lead"), actor="lead", feedback=True)
    with team.engine("alice").connect() as connection:
        answered = connection.execute(text(feedback), {"image": image})
        assert list(answered.keys()) == ["text", "reason"]
        assert answered.all() == [("Three red balls.", "Why this is right.")]
    with team.engine("bob").connect() as connection:  # alice's answers are hers alone
        assert connection.execute(text(feedback), {"image": image}).all() == []


@pytest.mark.slow
def test_an_annotator_cannot_change_their_gold_accuracy_in_psql(team, guarded, tmp_path):
    """Issue #45 item 2, replayed in psql: after answering two gold captions wrongly, an
    annotator forges their first answers, or clears them and answers again with what the
    feedback told them; the gold accuracy the lead reads stays what they first answered."""
    from storage.rating.gold import FIRST_ANSWER_FUNCTION, gold_accuracy, is_gold

    import_gold_image(team, tmp_path, feedback=True)
    alice = AnnotationSession(team.engine("alice"), team.names["alice"],
                              seed_source=lambda: 1)
    index = next(i for i, image in enumerate(alice.images) if is_gold(image.id))
    for group in alice.open_image(index):  # precision 3: out of both keys' ranges
        alice.set_values(group, {"precision": 3, "recall": 3}, image_index=index, focus=0)
    [before] = gold_accuracy(team.engine("lead"))
    assert (before.answered, before.correct) == (2, 0)
    if not guarded:
        team.unguard()
    with team.engine("alice").begin() as connection:
        for attack in ("UPDATE gold_answer SET first_precision = 4, first_recall = 4",
                       "UPDATE gold_answer SET first_answered_at = NULL, precision = 1, "
                       "recall = 1",
                       "UPDATE gold_answer SET precision = 1, recall = 1",
                       f"SELECT {FIRST_ANSWER_FUNCTION}(id) FROM gold_answer"):
            reach(connection, attack)
    [after] = gold_accuracy(team.engine("lead"))
    if guarded:
        assert (after.answered, after.correct) == (2, 0)
    else:
        assert after.correct > 0


@pytest.mark.slow
def test_the_thumb_workflow_runs_end_to_end_as_the_teams_roles(team, tmp_path):
    """Stage 1 with blind double rating, review, resolution and the fluency round, each as
    an annotator's own role; then the lead's final scores, agreement, monitor and export."""
    from reports.agreement import agreement_report
    from storage import export_ratings, final_scores
    from storage.rating.annotators import register_annotator
    from storage.rating.monitor import read_monitor
    from storage.rating.rating_sessions import FluencyRoundSession, ResolutionSession

    name = team.names
    assign_double(team.engine("lead"), 0.2, seed=3, actor="lead")
    alice = AnnotationSession(team.engine("alice"), name["alice"])
    for index in range(len(alice.images)):
        rate_image(alice, index)
    assert alice.undo() is not None  # undo reads back her own event-log rows
    rate_image(alice, len(alice.images) - 1)
    bob = AnnotationSession(team.engine("bob"), name["bob"])
    assert len(bob.images) == 3  # only the double images: the blind second ratings
    for index in range(len(bob.images)):
        rate_image(bob, index, precision=3)
    carol = AnnotationSession(team.engine("carol"), name["carol"], stage=Stage.SECOND)
    assert len(carol.images) == 15
    for index in range(len(carol.images)):
        groups = carol.open_image(index)
        for group in groups:
            values = dict(group.reference)
            values["precision"] = 2 if index % 3 == 0 else values["precision"]
            carol.set_values(group, values, image_index=index, focus=0)
    dave = ResolutionSession(team.engine("dave"), name["dave"])
    queue = dave.queue()
    assert queue
    for item in queue:
        index = dave.image_index_of_caption(item.caption_id)
        group = dave.group_for_caption(item.caption_id)
        dave.set_values(group, {"precision": 3, "recall": 4}, image_index=index, focus=0)
        dave.record_reasons(dave.group_for_caption(item.caption_id), ["both-wrong"])
    assert dave.queue() == []
    register_annotator(team.engine("lead"), name["dave"], True)  # the lead records it
    fluency = FluencyRoundSession(team.engine("dave"), name["dave"])
    waiting = fluency.queue()
    assert waiting
    fluency.record(waiting[0], 0.0, None)
    assert len(fluency.queue()) == len(waiting) - 1
    lead = team.engine("lead")
    scores = final_scores(lead)
    assert len(scores) == 60 and scores["precision"].notna().all()
    assert len(agreement_report(lead, bootstrap=20)) > 0
    monitor = read_monitor(lead)
    assert monitor.double_images == 3 and len(monitor.blind_pairs) > 0
    assert export_ratings(lead, tmp_path / "project.jsonl", "jsonl") > 60


def test_thumb_team_commands_and_the_annotator_name(team):
    from thumb_tui.cli import app

    runner = CliRunner()
    newcomer = f"{team.names['alice']}_new"
    result = runner.invoke(app, ["--db", URL, "team", "add", newcomer, "--password-stdin"],
                           input=f"{PASSWORD}\n")
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    status = runner.invoke(app, ["--db", URL, "team", "status"])
    assert status.exit_code == 0 and newcomer in status.output
    assert runner.invoke(app, ["--db", URL, "team", "add", "Bad-Name"]).exit_code == 2
    as_alice = team.engine("alice").url.render_as_string(hide_password=False)
    refused = runner.invoke(app, ["--db", as_alice, "annotate", "--annotator",
                                  team.names["bob"]])
    assert refused.exit_code == 2 and "your annotator name is your role" in refused.output
    removed = runner.invoke(app, ["--db", URL, "team", "remove", newcomer])
    assert removed.exit_code == 0, removed.output
    assert newcomer not in runner.invoke(app, ["--db", URL, "team", "status"]).output
    locked_out = create_engine(make_url(URL).set(username=newcomer, password=PASSWORD))
    with pytest.raises(DBAPIError, match="not permitted to log in"):
        locked_out.connect()
    locked_out.dispose()
    by_certificate = f"{team.names['bob']}_cert"
    added = runner.invoke(app, ["--db", URL, "team", "add", by_certificate, "--cert"])
    assert added.exit_code == 0, added.output
    no_password = create_engine(make_url(URL).set(username=by_certificate, password=PASSWORD))
    with pytest.raises(DBAPIError, match="password authentication failed"):
        no_password.connect()
    no_password.dispose()
    myself = runner.invoke(app, ["--db", URL, "team", "remove", make_url(URL).username])
    assert myself.exit_code == 2 and "your own role" in myself.output
    with team.admin.begin() as connection:
        for role in (newcomer, by_certificate):
            connection.execute(text(f'DROP ROLE "{role}"'))


def test_the_annotator_name_is_the_login_role_when_none_is_given(team):
    """Without --annotator, an annotator's role names them (Alice is no native speaker,
    which the fluency round tells her by that name); a lead's role names no annotator."""
    from thumb_tui.cli import app

    runner = CliRunner()
    as_alice = team.engine("alice").url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--db", as_alice, "fluency-round"])
    assert result.exit_code == 2, result.output
    assert f"'{team.names['alice']}' is not recorded as a native" in result.output
    as_lead = team.engine("lead").url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--db", as_lead, "resolve"])
    assert result.exit_code == 2 and "--annotator is required" in result.output


@pytest.mark.slow
def test_a_sqlite_project_has_no_team_and_says_why(tmp_path):
    """SQLite is for one machine: whoever can read the file reads everything, so `thumb
    team` refuses it in one line, and rating there is as before."""
    from thumb_tui.cli import app

    db = str(tmp_path / "project.db")
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE_CSV)]).exit_code == 0
    for command in (["init"], ["add", "alice", "--cert"], ["remove", "alice"], ["status"]):
        result = runner.invoke(app, ["--db", db, "team", *command])
        assert result.exit_code == 2, (command, result.output)
        assert "teams need PostgreSQL" in result.output
    for command in ("annotate", "review", "resolve", "fluency-round"):  # no role names one
        result = runner.invoke(app, ["--db", db, command])
        assert result.exit_code == 2 and "--annotator is required" in result.output, command


def test_an_annotator_is_told_what_waits_and_which_commands_are_a_leads(team):
    """`thumb next` works for an annotator's role (BISON, which their role cannot read, is
    left out), and `thumb status`, which reads the systems, says it is a lead's command
    instead of a bare permission error."""
    from thumb_tui.cli import app

    runner = CliRunner()
    as_alice = team.engine("alice").url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--db", as_alice, "next"])
    assert result.exit_code == 0, result.output
    assert "images to rate (stage 1)" in result.output and "bison" not in result.output
    result = runner.invoke(app, ["--db", as_alice, "status"])
    assert result.exit_code == 2
    assert "permission denied" in result.output
    assert "on a team database this command is a lead's" in result.output
    as_lead = team.engine("lead").url.render_as_string(hide_password=False)
    assert runner.invoke(app, ["--db", as_lead, "status"]).exit_code == 0


def test_a_lead_s_report_refused_to_an_annotator_is_one_line_without_sql(team, tmp_path):
    """pandas wraps the server's refusal in an error of its own (an OSError), which printed
    the whole query and SQLAlchemy's background lines: now it is the one line `status`
    gives."""
    from thumb_tui.cli import app

    as_alice = team.engine("alice").url.render_as_string(hide_password=False)
    for command in (["report", "--format", "md", "--out", str(tmp_path / "r")],
                    ["agreement"], ["export", "--out", str(tmp_path / "e.csv")]):
        result = CliRunner().invoke(app, ["--db", as_alice, *command])
        assert result.exit_code == 2, (command, result.output)
        assert "on a team database this command is a lead's" in result.output, command
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "SELECT" not in result.output and "caption.system" not in result.output


def test_a_team_outside_the_public_schema_is_refused_in_one_clear_line() -> None:
    """The grants and the functions that serve each annotator name `public`: a project
    in another schema is refused before any role is made, saying what to do."""
    if not URL:
        pytest.skip("THUMB_TEST_POSTGRES is not set")
    import secrets

    from storage import open_database
    from storage.team import TeamError, TeamRoles, init_team

    schema = f"elsewhere_{secrets.token_hex(4)}"
    admin = create_engine(URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    url = make_url(URL).update_query_dict({"options": f"-csearch_path={schema}"})
    engine = open_database(url.render_as_string(hide_password=False))
    roles = TeamRoles.named(f"t{secrets.token_hex(4)}")
    try:
        with pytest.raises(TeamError, match=f"in the schema 'public'.*are in '{schema}'"):
            init_team(engine, roles)
        with admin.connect() as connection:
            made = connection.execute(text("SELECT count(*) FROM pg_roles WHERE rolname IN "
                                           "(:a, :b, :c)"), {"a": roles.owner,
                                           "b": roles.lead, "c": roles.annotator}).scalar()
        assert made == 0
    finally:
        engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_what_a_hostile_annotator_found_after_45_is_refused(team, tmp_path):
    """A reviewer's trial after #45, through bob's own login: a temporary `rubric_range`
    first on his search path let the value triggers pass scores off the scale; a first
    gold answer moved to another gold caption was scored there (and the feedback said
    whether it was right there); a claim inserted as already released opened an image
    another annotator holds at stage 1. Each is refused now."""
    from storage.rating.gold import gold_accuracy, is_gold

    import_gold_image(team, tmp_path, feedback=True)
    carol = AnnotationSession(team.engine("carol"), team.names["carol"],
                              seed_source=lambda: 1)
    held = next(image.id for image in carol.images if not is_gold(image.id))
    carol_index = next(i for i, image in enumerate(carol.images) if image.id == held)
    group = carol.open_image(carol_index)[0]
    carol.set_values(group, {"precision": 4}, image_index=carol_index, focus=0)
    bob = AnnotationSession(team.engine("bob"), team.names["bob"], seed_source=lambda: 1)
    assert held not in [image.id for image in bob.images]
    index = next(i for i, image in enumerate(bob.images) if not is_gold(image.id))
    rate_image(bob, index)
    gold = next(i for i, image in enumerate(bob.images) if is_gold(image.id))
    for group in bob.open_image(gold):
        bob.set_values(group, {"precision": 3, "recall": 3}, image_index=gold, focus=0)
    before = {row.annotator: (row.answered, row.correct)
              for row in gold_accuracy(team.engine("lead"))}
    with team.engine("bob").begin() as connection:
        connection.execute(text("CREATE TEMP TABLE rubric_range AS SELECT * FROM "
                                "public.rubric_range"))
        connection.execute(text("UPDATE pg_temp.rubric_range SET low = -1e9, high = 1e9"))
        connection.execute(text("SET LOCAL search_path = pg_temp, public"))
        assert reach(connection, "UPDATE rating SET precision = 99 WHERE annotator_id = "
                     "thumb_me()") is None
        assert reach(connection, "UPDATE gold_answer SET precision = 99 WHERE "
                     "annotator_id = thumb_me()") is None
        assert reach(connection, "UPDATE gold_answer SET gold_caption_id = gold_caption_id "
                     "WHERE annotator_id = thumb_me()") is None
        assert reach(connection, "INSERT INTO assignment (image_id, annotator_id, stage, "
                     "shuffle_seed, last_viewed_at, released_at) VALUES (:image, "
                     "thumb_me(), 1, 1, now(), now())", image=held) is None
        assert reach(connection, "SELECT id FROM caption WHERE image_id = :image",
                     image=held) == 0
    with team.engine("lead").connect() as connection:
        assert connection.execute(text(
            "SELECT max(precision) FROM rating")).scalar_one() <= 5
    assert {row.annotator: (row.answered, row.correct)
            for row in gold_accuracy(team.engine("lead"))} == before
