"""A team on PostgreSQL whose server keeps each annotator's view blind: roles, grants,
row-level security policies and the protocol predicates the policies ask.

`init_team` (run by the administrator, once and again after every `thumb db upgrade`)
makes an owner role that owns the schema, a lead group that reads and writes everything,
and an annotator group whose members reach the THUMB tables only through policies:
the images the protocol lets them hold (`storage.rating.protocol.HOLDABLE_FUNCTION`) with
their captions (without the system), references, claims and flags; their own ratings,
the stage-1 ratings of an image they hold at review, the ratings of a reviewed image
they may resolve or check in the fluency round; gold captions without their answer key,
their own event-log rows (for undo); never the ratings that the lead's `thumb release
--force` set aside (`released_rating`: blind scores, their own or another's). An
annotator's name in the tool is their login role
(`session_user`). What an annotator writes the server checks too: each rating and claim
only where the protocol allows it now, never whose row it is, of which caption, image or
stage once written, nor their own native-speaker flag; and a trigger logs their every
change, whatever client made it. The predicates are SQL functions owned by the owner role
(SECURITY DEFINER, fixed search_path), so a policy can ask who holds an image without
granting the rows it reads; each is the application's own query compiled where one exists: which
images one may hold (`holdable_images`), who holds an image at each stage
(`rating_progress`: names and counts only), the feedback on a gold image
(`storage.rating.gold.feedback_query`: the reasons of one's own first answers that were wrong,
never a key) and the record of a gold answer's first answer, whose columns the annotator
group may not write (`storage.rating.gold.first_answer_update`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    and_,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
)
from sqlmodel import SQLModel

from storage.db.engine import APPLICATION_SETTING
from storage.models import Annotator, Assignment, Caption, Event, Image, Rating, Stage
from storage.rating.annotators import register
from storage.rating.gold import (
    FEEDBACK_FUNCTION,
    FIRST_ANSWER_FUNCTION,
    SCORED,
    feedback_query,
    first_answer_update,
)
from storage.rating.protocol import (
    HOLDABLE_FUNCTION,
    PROGRESS_FUNCTION,
    complete_clause,
    holdable_images,
    may_check_fluency_clause,
    may_rate_clause,
    rating_progress,
    takes_clause,
)

ROLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
DEFAULT_PREFIX = "thumb"  # thumb_owner, thumb_lead, thumb_annotator
TEAM_FUNCTION = "thumb_team_roles"  # returns the group roles `init_team` made
TEAM_SCHEMA = "public"  # where a team database's tables are (grants and functions name it)
_SEARCH_PATH = f"SET search_path = {TEAM_SCHEMA}, pg_temp"

# What an annotator may read: these columns where not all (the system that wrote a
# caption; a gold caption's key), of the rows that READ_ROWS chooses where it names the
# table, else of every row.
READABLE = {"image": None, "image_reference": None, "annotator": None, "assignment": None,
            "image_flag": None, "resolution": None, "fluency_check": None, "rubric": None,
            "rubric_range": None, "gold_setting": None, "gold_image": None,
            "caption": ("id", "image_id", "text"),
            "gold_caption": ("id", "gold_image_id", "text", "rubric")}
# The images an annotator's role may hold (`storage.rating.protocol.holdable_images`), and the
# rows of them: an image, its captions and references, and the claims, flags,
# resolutions and fluency checks of it (others' too: the protocol counts the holders).
IN_HOLDABLE = f"IN (SELECT image_id FROM {HOLDABLE_FUNCTION}())"
READ_ROWS = {"image": f"id {IN_HOLDABLE}", "caption": f"image_id {IN_HOLDABLE}",
             "image_reference": f"image_id {IN_HOLDABLE}", "assignment": f"image_id {IN_HOLDABLE}",
             "image_flag": f"image_id {IN_HOLDABLE}",
             # the caption's own policy chooses the captions of the held images
             "resolution": "caption_id IN (SELECT id FROM caption)",
             "fluency_check": "caption_id IN (SELECT id FROM caption)"}
# Tables whose rows an annotator writes, with the column naming the annotator a row is of.
OWN_ROWS = {"annotator": None, "assignment": "annotator_id", "rating": "annotator_id",
            "image_flag": "annotator_id", "resolution": "resolver_id",
            "fluency_check": "checker_id", "gold_answer": "annotator_id"}
# Columns of an annotator's own rows that only the server writes: a gold answer's first
# (scored) answer, recorded by the owner's `storage.rating.gold.FIRST_ANSWER_FUNCTION`, so that no
# INSERT or UPDATE typed in psql changes what the gold accuracy scores.
SERVER_WRITTEN = {"gold_answer": ("first_answered_at", *(f"first_{key}" for key in SCORED))}
# Columns of an annotator's own rows that their role writes once, with the row, and never
# changes (None: no column): whose row it is, of which image or caption, at which stage,
# so that no UPDATE moves a rating, claim or gold answer past the check of its INSERT (a
# first gold answer moved to another gold caption would be scored there, and the feedback
# would say whether it is right there); an annotator row not at all (whether they are a
# native English speaker or retired is the lead's to record, and the name is their login
# role), a flag only taken back.
FIXED = {"annotator": None, "image_flag": None,
         "assignment": ("image_id", "annotator_id", "stage", "shuffle_seed"),
         "rating": ("caption_id", "annotator_id", "stage", "created_at"),
         "resolution": ("caption_id",), "fluency_check": ("caption_id",),
         "gold_answer": ("gold_caption_id", "annotator_id")}
# What the server asks of each row an annotator's role inserts or changes, besides being
# their own: that the protocol lets them make this write now, the check the sessions make
# under the image's lock (`storage.rating.protocol.may_rate_clause`, as `thumb_may_rate` of a
# caption and `thumb_may_claim` of a claim that their role does not already hold), and
# that a new annotator row records nothing the lead records.
WRITE_CHECKS = {"annotator": "native_english IS NULL AND retired_at IS NULL",
                "assignment": "released_at IS NOT NULL OR thumb_may_claim(id, image_id, stage)",
                "rating": "thumb_may_rate(caption_id, stage)",
                "image_flag": f"image_id {IN_HOLDABLE}",
                "resolution": f"thumb_may_rate(caption_id, {int(Stage.FINAL)})",
                "fluency_check": "thumb_may_check_fluency(caption_id)"}
# Where a new row asks more than a changed one: a claim is made held (a released one is
# only ever a held one given up, which `thumb_holdable_images` still counts as theirs)
NEW_ROW_CHECKS = {"assignment": "released_at IS NULL AND thumb_may_claim(id, image_id, stage)"}
# Every change an annotator's role makes to its own rows is logged by the server, in the
# statement that makes it: this trigger on each of those tables, whatever client wrote.
CHANGE_LOG_TRIGGER = "thumb_logs_change"
# Every table whose changes the server logs (`CHANGE_LOG_TRIGGER`): all but the log itself
LOGGED_TABLES = tuple(table.name for table in SQLModel.metadata.sorted_tables
                      if table.name != Event.__tablename__)
# Tables only the lead reads: no grant to annotators, and row-level security with the
# lead's policy alone, so that even a grant made by hand shows an annotator no row.
LEADS_ONLY = ("released_rating",)
REACHED = sorted({*READABLE, *OWN_ROWS, "event_log", *LEADS_ONLY})  # row-level security on each
# The functions the policies call, which only the team may run; with TEAM_FUNCTION, every
# function `init_team` makes.
PREDICATES = (f"{PROGRESS_FUNCTION}(integer[])", f"{FEEDBACK_FUNCTION}(integer)",
              f"{FIRST_ANSWER_FUNCTION}(integer)",
              f"{HOLDABLE_FUNCTION}()", "thumb_me()", "thumb_reviews(integer)",
              "thumb_settles(integer)", "thumb_may_rate(integer, integer)",
              "thumb_may_claim(integer, integer, integer)",
              "thumb_may_check_fluency(integer)")
# The registrar's functions (`setup_statements`): the administrator adds and removes members
# through them, so that it needs no CREATEROLE.
ADD_MEMBER, REMOVE_MEMBER = "thumb_add_member", "thumb_remove_member"
REGISTRAR_FUNCTIONS = (f"{ADD_MEMBER}(text, text, boolean)", f"{REMOVE_MEMBER}(text)")
FUNCTIONS = (*PREDICATES, f"{TEAM_FUNCTION}()", "thumb_log_change()", *REGISTRAR_FUNCTIONS)
# Set on each annotator's own role (a group's settings do not reach its members), so they
# hold in every session of theirs, psql included: a lock not had in 5 s, a statement
# running a minute, a transaction left open and idle for a minute (with the row locks it
# holds) end there, and no one keeps the others from their images for long.
ANNOTATOR_SETTINGS = {"lock_timeout": "5s", "statement_timeout": "1min",
                      "idle_in_transaction_session_timeout": "1min"}
# A SCRAM-SHA-256 password verifier as libpq writes it: base64 and `$:`, never a quote.
SCRAM_VERIFIER = re.compile(
    r"SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+")


class TeamError(ValueError):
    """A team command that cannot run here: not PostgreSQL, no team yet, a bad name."""


@dataclass(frozen=True)
class TeamRoles:
    """The three group roles of a team, named from one prefix (role names are global to
    the server, so two databases on one server take two prefixes)."""

    owner: str
    lead: str
    annotator: str

    @classmethod
    def named(cls, prefix: str = DEFAULT_PREFIX) -> TeamRoles:
        checked_role_name(prefix)
        return cls(f"{prefix}_owner", f"{prefix}_lead", f"{prefix}_annotator")


@dataclass(frozen=True)
class Member:
    """A login role of the team, as `thumb team status` lists it."""

    name: str
    group: str

    @property
    def can(self) -> str:
        if self.group == "lead":
            return "reads everything; imports, reports, agreement, monitor, exports"
        return "rates under its own name; reads what the THUMB protocol shows it"


def checked_role_name(name: str) -> str:
    """A role name we create: lower-case letters, digits and `_`, starting with a letter
    (so it is the same name unquoted, in `session_user` and as an annotator name)."""
    if not ROLE_NAME.fullmatch(name):
        raise TeamError(f"{name!r} is not a role name we create: use 1-48 lower-case "
                        "letters, digits and _, starting with a letter")
    return name


def _quote(connection: Connection, name: str) -> str:
    return connection.dialect.identifier_preparer.quote_identifier(checked_role_name(name))


def _postgresql(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        raise TeamError("teams need PostgreSQL: a SQLite file's owner reads everything")


def _run_all(connection: Connection, statements: Iterable[str]) -> None:
    """DDL as written (no bind parameters: a verifier or a body may hold `:`)."""
    for statement in statements:
        connection.exec_driver_sql(statement)


def _role_exists(connection: Connection, name: str) -> bool:
    return connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :name"),
                              {"name": name}).first() is not None


# -- init ------------------------------------------------------------------------------------

def _stage_one_over(connection: Connection) -> str:
    """SQL that holds when the stage 1 of the image of `rated_caption` is over: as many
    annotators as it takes (two for a double-rated image) scored every caption of it
    (`storage.rating.protocol.ImageState.stage_one_over`, counted by the protocol's own
    `rating_progress`). Until then no one reads its stage-1 scores at review or
    resolution, whatever claims or ratings their role writes."""
    caption, image = Caption.__table__, Image.__table__
    the_image = literal_column("(SELECT image_id FROM caption WHERE id = rated_caption)")
    progress = rating_progress(and_(caption.c.image_id == the_image,
                                    Rating.__table__.c.stage == int(Stage.FIRST))).subquery()
    captions = select(func.count()).where(caption.c.image_id == the_image).scalar_subquery()
    complete = select(func.count()).where(progress.c.complete == captions).scalar_subquery()
    takes = select(takes_clause()).where(image.c.id == the_image).scalar_subquery()
    return str((complete >= takes).compile(dialect=connection.dialect,
                                           compile_kwargs={"literal_binds": True}))


def _functions(connection: Connection, roles: TeamRoles) -> list[str]:
    """The predicates the policies ask, as DDL. `thumb_me()` is the session's annotator
    row; the others answer for the caption of one rating row (a parameter name that no
    column has, since a column of the same name would win). The server checks each claim
    and rating an annotator's role writes against the protocol (`_write_checks`), and the
    read predicates still do not trust them alone: a stage-2 claim or rating opens
    stage-1 scores only of an image whose stage 1 is over and that they did not rate at
    stage 1 (never the other blind rater's scores of their own image); then the trigger
    function that logs their every change (`_change_log`)."""
    definer = f"LANGUAGE sql STABLE SECURITY DEFINER {_SEARCH_PATH}"
    on_image = ("SELECT 1 FROM rating r JOIN caption c ON c.id = r.caption_id "
                "WHERE c.image_id = (SELECT image_id FROM caption WHERE id = rated_caption)")
    over = _stage_one_over(connection)
    return [
        f"CREATE OR REPLACE FUNCTION {TEAM_FUNCTION}(OUT owner text, OUT lead text, "
        f"OUT annotator text) LANGUAGE sql IMMUTABLE {_SEARCH_PATH} AS $$ SELECT "
        f"'{roles.owner}'::text, '{roles.lead}'::text, '{roles.annotator}'::text $$",
        f"CREATE OR REPLACE FUNCTION thumb_me() RETURNS integer {definer} AS "
        "$$ SELECT id FROM annotator WHERE name = session_user $$",
        # at review: the stage-1 ratings of an image this annotator holds at stage 2
        "CREATE OR REPLACE FUNCTION thumb_reviews(rated_caption integer) RETURNS boolean "
        f"{definer} AS $$ SELECT (EXISTS (SELECT 1 FROM assignment a JOIN caption c ON "
        "c.image_id = a.image_id WHERE c.id = rated_caption AND a.stage = 2 AND "
        "a.annotator_id = thumb_me() AND a.released_at IS NULL) OR EXISTS "
        f"({on_image} AND r.stage = 2 AND r.annotator_id = thumb_me())) AND NOT EXISTS "
        f"({on_image} AND r.stage = 1 AND r.annotator_id = thumb_me()) AND {over} $$",
        # at resolution and in the fluency round: an image reviewed, which they neither
        # rated nor reviewed (a native speaker's fluency round opens no more: never the
        # other blind rater's scores of an image of their own)
        "CREATE OR REPLACE FUNCTION thumb_settles(rated_caption integer) RETURNS boolean "
        f"{definer} AS $$ SELECT EXISTS ({on_image} AND r.stage = 2) AND {over} AND NOT "
        f"EXISTS ({on_image} AND r.stage IN (1, 2) AND r.annotator_id = thumb_me()) $$",
        *_write_checks(connection, definer),
        _change_log(roles),
    ]


def _write_checks(connection: Connection, definer: str) -> list[str]:
    """The functions the write policies ask (`WRITE_CHECKS`), each the protocol's own rule
    compiled: whether the session's annotator may rate the caption at the stage now
    (`storage.rating.protocol.may_rate_clause`), may hold the claim (one their role holds
    already, or one the protocol lets them take now), may give the caption its fluency
    verdict (`may_check_fluency_clause`, after a complete review)."""
    assignment, annotator, rating = Assignment.__table__, Annotator.__table__, Rating.__table__
    me = literal_column("session_user")
    the_image = literal_column("(SELECT image_id FROM caption WHERE id = rated_caption)")
    may_rate = select(may_rate_clause(me, the_image, literal_column("rated_stage")))
    may_claim = select(or_(
        exists().where(assignment.c.id == literal_column("claim"),
                       assignment.c.annotator_id == func.thumb_me(),
                       assignment.c.released_at.is_(None)),
        may_rate_clause(me, literal_column("claimed_image"), literal_column("claimed_stage"))))
    may_check = select(and_(may_check_fluency_clause(), exists().where(
        rating.c.caption_id == literal_column("checked_caption"),
        rating.c.stage == int(Stage.SECOND), complete_clause()))
    ).where(annotator.c.name == me)

    def body(query: Select) -> str:
        return str(query.compile(dialect=connection.dialect,
                                 compile_kwargs={"literal_binds": True}))

    return [f"CREATE OR REPLACE FUNCTION thumb_may_rate(rated_caption integer, rated_stage "
            f"integer) RETURNS boolean {definer} AS $$ {body(may_rate)} $$",
            f"CREATE OR REPLACE FUNCTION thumb_may_claim(claim integer, claimed_image "
            f"integer, claimed_stage integer) RETURNS boolean {definer} AS "
            f"$$ {body(may_claim)} $$",
            f"CREATE OR REPLACE FUNCTION thumb_may_check_fluency(checked_caption integer) "
            f"RETURNS boolean {definer} AS $$ {body(may_check)} $$"]


def _change_log(roles: TeamRoles) -> str:
    """The trigger function behind `CHANGE_LOG_TRIGGER`: one event-log row per row that a
    member of the annotator group inserts, changes or deletes, with the columns it changed
    (old and new values as JSON objects) and the server's own record of who (`actor`, and
    `db_role` from the log's trigger), written as the owner in the statement that made the
    change, so that no client skips it. It does not replace the application's own rows
    (one per field, which undo reads back by their change id). Any other role's change is
    logged the same way unless it comes through thumb-tui (`APPLICATION_SETTING`, set on
    each of its connections, `storage.db.engine.make_engine`), which logs its own (an import would
    otherwise log every row twice): a lead's edit in psql is in the log too. An annotator
    who sets the setting by hand is logged all the same; a lead who does is trusted, as
    with every row they may write (the event log's included)."""
    return (
        "CREATE OR REPLACE FUNCTION thumb_log_change() RETURNS trigger LANGUAGE plpgsql "
        f"SECURITY DEFINER {_SEARCH_PATH} AS $$ DECLARE "
        "before jsonb := CASE WHEN TG_OP = 'INSERT' THEN '{}' ELSE to_jsonb(OLD) END; "
        "after jsonb := CASE WHEN TG_OP = 'DELETE' THEN '{}' ELSE to_jsonb(NEW) END; "
        "changed text[]; BEGIN "
        f"IF current_setting('{APPLICATION_SETTING}', true) IS NOT DISTINCT FROM 'on' AND NOT "
        f"pg_has_role(session_user, '{roles.annotator}', 'member') THEN RETURN NULL; END IF; "
        "SELECT array_agg(key) INTO changed FROM jsonb_object_keys(before || after) AS key "
        "WHERE before -> key IS DISTINCT FROM after -> key; "
        "IF changed IS NULL THEN RETURN NULL; END IF; "
        "INSERT INTO event_log (at, actor, action, table_name, row_id, field_name, "
        "old_value, new_value, change_id) VALUES (now(), session_user, "
        "'server ' || lower(TG_OP), TG_TABLE_NAME, "
        "coalesce(after ->> 'id', before ->> 'id')::integer, "
        "array_to_string(changed, ','), "
        "CASE WHEN TG_OP <> 'INSERT' THEN (SELECT jsonb_object_agg(key, before -> key) "
        "FROM unnest(changed) AS key)::text END, "
        "CASE WHEN TG_OP <> 'DELETE' THEN (SELECT jsonb_object_agg(key, after -> key) "
        "FROM unnest(changed) AS key)::text END, replace(gen_random_uuid()::text, '-', '')); "
        "RETURN NULL; END $$")


def _served_function(connection: Connection, name: str, parameter: str, query: Select) -> str:
    """`query` as the SECURITY DEFINER function `name(parameter)`: the application's own
    query compiled for this database, so that what the function returns and what the
    application reads where no policy applies cannot differ."""
    preparer, dialect = connection.dialect.identifier_preparer, connection.dialect
    columns = ", ".join(f"{preparer.quote_identifier(column.name)} "
                        f"{column.type.compile(dialect=dialect)}"
                        for column in query.selected_columns)
    body = query.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    return (f"CREATE OR REPLACE FUNCTION {name}({parameter}) RETURNS TABLE ({columns}) "
            f"LANGUAGE sql STABLE SECURITY DEFINER {_SEARCH_PATH} AS $$ {body} $$")


def _served_functions(connection: Connection, roles: TeamRoles) -> list[str]:
    """Who holds which image (names and counts of complete ratings, for the images in the
    array, NULL: all; for an annotator only of the images they may hold), the images an
    annotator may hold, the gold feedback of one gold image (the reasons of the session's
    own first answers that were wrong, while feedback is on; never a key), and the record
    of a gold answer's first answer (the `first_*` columns that the annotator's role may
    not write), for the protocol, the policies and the gold front on a team."""
    ids, gold_image = literal_column("ids"), literal_column("gold_image")
    me, image_id = literal_column("session_user"), Caption.__table__.c.image_id
    progress = rating_progress(and_(
        or_(ids.is_(None), image_id == func.any(ids)),
        or_(func.pg_has_role(me, literal(roles.lead), literal("member")),
            image_id.in_(holdable_images(me)))))
    first_answer = first_answer_update(literal_column("answer_row"), func.thumb_me(),
                                       func.now()).compile(
        dialect=connection.dialect, compile_kwargs={"literal_binds": True})
    return [_served_function(connection, PROGRESS_FUNCTION, "ids integer[]", progress),
            # (its columns changed in #45: CREATE OR REPLACE cannot change them)
            f"DROP FUNCTION IF EXISTS {FEEDBACK_FUNCTION}(integer)",
            _served_function(connection, FEEDBACK_FUNCTION, "gold_image integer",
                             feedback_query(gold_image, func.thumb_me())),
            _served_function(connection, HOLDABLE_FUNCTION, "", holdable_images(me)),
            f"CREATE OR REPLACE FUNCTION {FIRST_ANSWER_FUNCTION}(answer_row integer) "
            f"RETURNS void LANGUAGE sql VOLATILE SECURITY DEFINER {_SEARCH_PATH} "
            f"AS $$ {first_answer} $$"]


def _owner_of_everything(connection: Connection, roles: TeamRoles) -> list[str]:
    """Every table and sequence of the schema handed to the owner role. The administrator
    joins it (to hand them over, and to upgrade the schema later) and the lead group (a
    member of the owner is not the owner: without a policy it would read no row), unless
    it is in them already (the superuser's `setup_statements` put it there: without
    CREATEROLE it may not grant them)."""
    owner, me = _quote(connection, roles.owner), connection.execute(
        text("SELECT quote_ident(current_user)")).scalar_one()
    statements = [f"GRANT {_quote(connection, group)} TO {me}"
                  for group in (roles.owner, roles.lead) if not connection.execute(text(
                      "SELECT pg_has_role(current_user, :group, 'MEMBER')"),
                      {"group": group}).scalar_one()]
    statements.append(f"GRANT CREATE, USAGE ON SCHEMA {TEAM_SCHEMA} TO {owner}")
    tables = connection.execute(text(
        "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = :schema"),
        {"schema": TEAM_SCHEMA}).scalars()
    sequences = connection.execute(text(
        "SELECT quote_ident(sequencename) FROM pg_sequences WHERE schemaname = :schema"),
        {"schema": TEAM_SCHEMA})
    statements += [f"ALTER TABLE {name} OWNER TO {owner}" for name in tables]
    statements += [f"ALTER SEQUENCE {name} OWNER TO {owner}" for name in sequences.scalars()]
    return statements


def _entry(connection: Connection, roles: TeamRoles) -> list[str]:
    """Both groups may connect to the database and use its schema (granted by the
    administrator, who owns them)."""
    groups = f"{_quote(connection, roles.lead)}, {_quote(connection, roles.annotator)}"
    database = connection.execute(text("SELECT quote_ident(current_database())")).scalar_one()
    return [f"GRANT CONNECT ON DATABASE {database} TO {groups}",
            f"GRANT USAGE ON SCHEMA {TEAM_SCHEMA} TO {groups}"]


def _writable_columns(table: str, fixed: Iterable[str] = ()) -> str:
    """The column list of an annotator's INSERT and UPDATE grant on one of their own
    tables: every column but those the server writes (`SERVER_WRITTEN`) and those given
    (`fixed`: for an UPDATE, `FIXED`); "" for all."""
    kept = (*SERVER_WRITTEN.get(table, ()), *fixed)
    if not kept:
        return ""
    columns = SQLModel.metadata.tables[table].columns
    return f" ({', '.join(column.name for column in columns if column.name not in kept)})"


def _grants(connection: Connection, roles: TeamRoles) -> list[str]:
    """What each group may do to the tables; the policies then choose the rows."""
    lead, annotator = _quote(connection, roles.lead), _quote(connection, roles.annotator)
    statements = [f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {TEAM_SCHEMA} "
                  f"TO {lead}",
                  f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {TEAM_SCHEMA} TO {lead}, {annotator}",
                  f"REVOKE ALL ON ALL TABLES IN SCHEMA {TEAM_SCHEMA} FROM {annotator}",
                  f"GRANT SELECT ON alembic_version TO {annotator}",
                  # image rows are locked FOR UPDATE; the policy refuses any real change
                  f"GRANT UPDATE (double_rating) ON image TO {annotator}",
                  f"GRANT SELECT, INSERT ON event_log TO {annotator}"]
    for table, columns in READABLE.items():
        listed = f" ({', '.join(columns)})" if columns else ""
        statements.append(f"GRANT SELECT{listed} ON {table} TO {annotator}")
    for table in OWN_ROWS:
        statements.append(f"GRANT SELECT, INSERT{_writable_columns(table)} ON {table} "
                          f"TO {annotator}")
        if FIXED.get(table, ()) is None:
            continue
        statements.append(f"GRANT UPDATE{_writable_columns(table, FIXED.get(table, ()))} "
                          f"ON {table} TO {annotator}")
    # `u` takes back one's own flag or fluency verdict; a resolver's reasons go when their
    # final values change
    statements.append(f"GRANT DELETE ON image_flag, resolution, fluency_check TO {annotator}")
    for function in PREDICATES:
        statements += [f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC",
                       f"GRANT EXECUTE ON FUNCTION {function} TO {lead}, {annotator}"]
    statements.append("REVOKE ALL ON FUNCTION thumb_log_change() FROM PUBLIC")
    return statements


def _policies(connection: Connection, roles: TeamRoles) -> list[str]:
    """Row-level security on every table an annotator reaches, and on the leads' own
    (`LEADS_ONLY`): the lead's policy passes every row, the annotator's pass their own
    rows and what the protocol shows them (none of a leads' table)."""
    lead, annotator = _quote(connection, roles.lead), _quote(connection, roles.annotator)
    statements: list[str] = []

    def policy(table: str, name: str, command: str, to: str, using: str | None,
               check: str | None = None) -> None:
        statements.append(f"DROP POLICY IF EXISTS {name} ON {table}")
        statements.append(f"CREATE POLICY {name} ON {table} FOR {command} TO {to}"
                          + (f" USING ({using})" if using else "")
                          + (f" WITH CHECK ({check})" if check else ""))

    for table in REACHED:
        statements.append(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        policy(table, "thumb_lead_all", "ALL", lead, "true", "true")
    for table in READABLE:
        rows = READ_ROWS.get(table, "true")
        column = OWN_ROWS.get(table)
        policy(table, "thumb_annotator_reads", "SELECT", annotator,
               rows if column is None else f"{column} = thumb_me() OR {rows}")
    for table, column in OWN_ROWS.items():
        own = "name = session_user" if column is None else f"{column} = thumb_me()"
        if table not in READABLE:
            policy(table, "thumb_annotator_reads", "SELECT", annotator,
                   own if table != "rating" else
                   f"{own} OR (stage = 1 AND thumb_reviews(caption_id)) "
                   "OR thumb_settles(caption_id)")
        check = f"{own} AND ({WRITE_CHECKS[table]})" if table in WRITE_CHECKS else own
        new_row = (f"{own} AND ({NEW_ROW_CHECKS[table]})" if table in NEW_ROW_CHECKS
                   else check)
        policy(table, "thumb_annotator_adds", "INSERT", annotator, None, new_row)
        if FIXED.get(table, ()) is None:  # not changed: no policy (one made before goes)
            statements.append(f"DROP POLICY IF EXISTS thumb_annotator_changes ON {table}")
        else:
            policy(table, "thumb_annotator_changes", "UPDATE", annotator, own, check)
    policy("image_flag", "thumb_annotator_takes_back", "DELETE", annotator,
           "annotator_id = thumb_me()")
    policy("resolution", "thumb_annotator_withdraws", "DELETE", annotator,
           "resolver_id = thumb_me()")
    policy("fluency_check", "thumb_annotator_takes_back", "DELETE", annotator,
           "checker_id = thumb_me()")
    policy("image", "thumb_annotator_locks", "UPDATE", annotator, READ_ROWS["image"], "false")
    policy("event_log", "thumb_annotator_adds", "INSERT", annotator, None, "true")
    policy("event_log", "thumb_annotator_reads", "SELECT", annotator,
           "db_role = session_user")  # their own changes, which undo reads back
    return statements


def _change_log_triggers() -> list[str]:
    """`CHANGE_LOG_TRIGGER` on every table of the project but the event log itself."""
    return [statement for table in LOGGED_TABLES for statement in (
        f"DROP TRIGGER IF EXISTS {CHANGE_LOG_TRIGGER} ON {table}",
        f"CREATE TRIGGER {CHANGE_LOG_TRIGGER} AFTER INSERT OR UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION thumb_log_change()")]


def made_by_init(connection: Connection) -> frozenset[tuple[str, str, str]]:
    """(kind, table, name) of every policy and trigger `init_team` makes, whatever the
    prefix, and ("function", "", name) of each of its functions: the schema check
    (`storage.db.schema_check`) refuses any other that someone added."""
    made = {("function", "", signature.split("(")[0]) for signature in FUNCTIONS}
    for statement in (*_policies(connection, TeamRoles.named()), *_change_log_triggers()):
        if created := re.match(r"CREATE (POLICY|TRIGGER) (\w+) .*?\bON (\w+)", statement):
            made.add((created.group(1).lower(), created.group(3), created.group(2)))
    return frozenset(made)


def init_team(engine: Engine, roles: TeamRoles) -> None:
    """Make (or bring up to date) the team's roles, grants, functions and policies on this
    database, in one transaction. The caller owns the database and the schema's tables (it
    ran `thumb db upgrade`; on a later run, as a member of the owner role); the group roles
    are the superuser's `setup_statements`, else the caller makes them (CREATEROLE). Where
    PUBLIC may still create objects in the schema (a database made before PostgreSQL 15,
    or granted by hand), that is revoked: an annotator's function or table there could
    otherwise stand in for one of ours."""
    _postgresql(engine)
    with engine.begin() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        if schema != TEAM_SCHEMA:
            raise TeamError(
                f"a team database keeps its project in the schema {TEAM_SCHEMA!r} (its roles' "
                f"grants and the functions that serve each annotator name it), but this "
                f"connection's tables are in {schema!r}: use a database of its own for the "
                f"project, in its schema {TEAM_SCHEMA!r}")
        missing = [name for name in (roles.owner, roles.lead, roles.annotator)
                   if not _role_exists(connection, name)]
        if missing and not connection.execute(text(
                "SELECT rolcreaterole FROM pg_roles WHERE rolname = current_user")).scalar_one():
            raise TeamError(
                f"the roles {', '.join(missing)} do not exist and you may not create them: "
                "the server's superuser makes them once, with the SQL that `thumb team "
                "setup-sql --admin YOUR_ROLE` prints (README: a team on PostgreSQL)")
        _run_all(connection, [f"CREATE ROLE {_quote(connection, name)} NOLOGIN"
                              for name in missing])
        _run_all(connection, _owner_of_everything(connection, roles))
        _run_all(connection, _entry(connection, roles))
        if connection.execute(text(f"SELECT has_schema_privilege('public', '{TEAM_SCHEMA}', "
                                   "'CREATE')")).scalar_one():
            _run_all(connection, [f"REVOKE CREATE ON SCHEMA {TEAM_SCHEMA} FROM PUBLIC"])
        _run_all(connection, _pinned_search_paths(connection))
        owner = _quote(connection, roles.owner)
        # created as the owner, so that the SECURITY DEFINER functions run as the owner
        _run_all(connection, [f"SET LOCAL ROLE {owner}", *_functions(connection, roles),
                              *_served_functions(connection, roles)])
        _run_all(connection, _policies(connection, roles))
        _run_all(connection, _change_log_triggers())
        _run_all(connection, _grants(connection, roles))


def _pinned_search_paths(connection: Connection) -> list[str]:
    """`ALTER FUNCTION … SET search_path` for each function of the schema that runs with
    its caller's (the migrations' triggers that check a value against `rubric_range`): an
    annotator's temporary table of that name would otherwise stand in for ours, pg_temp
    being searched first unless the path names it, and let scores off the scale through."""
    rows = connection.execute(text(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON "
        "n.oid = p.pronamespace WHERE n.nspname = :schema AND p.prokind = 'f' AND NOT "
        "EXISTS (SELECT 1 FROM unnest(coalesce(p.proconfig, '{}')) AS setting WHERE "
        "setting LIKE 'search_path=%') AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE "
        "d.objid = p.oid AND d.deptype = 'e')"), {"schema": TEAM_SCHEMA}).scalars()
    return [f"ALTER FUNCTION {signature} {_SEARCH_PATH}" for signature in rows]


def _has_team(connection: Connection) -> bool:
    return connection.execute(text(
        f"SELECT to_regproc('{TEAM_FUNCTION}') IS NOT NULL")).scalar_one()


def may_read(connection: Connection, table: str) -> bool:
    """Whether this connection's role may read `table`: always on SQLite and without a
    team; on a team database not every table is granted to annotators (BISON and match
    verification are leads' work there)."""
    if connection.dialect.name != "postgresql":
        return True
    return connection.execute(text("SELECT has_table_privilege(:table, 'SELECT')"),
                              {"table": table}).scalar_one()


def team_roles(engine: Engine | Connection) -> TeamRoles:
    """The group roles that `init_team` made on this database; TeamError without a team."""
    def read(connection: Connection) -> TeamRoles:
        _postgresql(connection.engine)
        if not _has_team(connection):
            raise TeamError("this database has no team: run `thumb team init` first")
        return TeamRoles(*connection.execute(text(f"SELECT * FROM {TEAM_FUNCTION}()")).one())

    if isinstance(engine, Connection):
        return read(engine)
    with engine.connect() as connection:
        return read(connection)


# -- the superuser's set-up ------------------------------------------------------------------

def registrar_role(prefix: str) -> str:
    """The role that owns the member functions: CREATEROLE, never logs in."""
    return checked_role_name(f"{prefix}_registrar")


def _ident(name: str) -> str:
    """A role name we create, quoted for SQL written without a connection."""
    return f'"{checked_role_name(name)}"'


def _role_if_missing(name: str) -> str:
    return (f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
            f"'{checked_role_name(name)}') THEN CREATE ROLE {_ident(name)} NOLOGIN; "
            "END IF; END $$")


def _annotator_settings(role: str) -> str:
    """PL/pgSQL that sets ANNOTATOR_SETTINGS on the role named by the expression `role`."""
    return "".join(f"EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SET {name} TO "
                   f"' || quote_literal('{value}'); "
                   for name, value in ANNOTATOR_SETTINGS.items())


def _member_functions(roles: TeamRoles) -> list[str]:
    """The registrar's two functions, the only way the administrator makes or retires a
    login role: a new role, named as we name roles, with a SCRAM verifier or none, in the
    lead or annotator group (an annotator with ANNOTATOR_SETTINGS); or one of those
    groups' members that is not an administrator (a member of the owner role), a
    superuser or a CREATEROLE role, taken out of both and made NOLOGIN. Names and
    verifiers are checked here as well, since the administrator may call them from psql."""
    definer = ("LANGUAGE plpgsql VOLATILE SECURITY DEFINER "
               "SET search_path = pg_catalog, pg_temp")
    refuse = "RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE ="
    lead, annotator = _ident(roles.lead), _ident(roles.annotator)
    create = ("EXECUTE 'CREATE ROLE ' || quote_ident(person) || ' LOGIN PASSWORD ' || "
              "quote_nullable(verifier) || ' IN ROLE ' || ")
    return [
        f"CREATE OR REPLACE FUNCTION {ADD_MEMBER}(person text, verifier text, "
        f"as_lead boolean) RETURNS void {definer} AS $body$ BEGIN "
        f"IF person IS NULL OR person !~ '^{ROLE_NAME.pattern}$' THEN "
        f"{refuse} 'not a role name we create'; END IF; "
        f"IF verifier !~ '^{SCRAM_VERIFIER.pattern}$' THEN "
        f"{refuse} 'not a SCRAM-SHA-256 verifier'; END IF; "
        f"IF as_lead THEN {create}'{lead}'; "
        f"ELSE {create}'{annotator}'; {_annotator_settings('person')}END IF; END $body$",
        f"CREATE OR REPLACE FUNCTION {REMOVE_MEMBER}(person text) RETURNS void {definer} "
        "AS $body$ DECLARE team_group text; found_one boolean := false; BEGIN "
        f"IF person = session_user THEN {refuse} 'you cannot remove your own role'; END IF; "
        "FOR team_group IN SELECT g.rolname FROM pg_auth_members AS a "
        "JOIN pg_roles AS g ON g.oid = a.roleid JOIN pg_roles AS r ON r.oid = a.member "
        f"WHERE r.rolname = person AND g.rolname IN ('{roles.lead}', '{roles.annotator}') "
        "AND NOT r.rolsuper AND NOT r.rolcreaterole "
        f"AND NOT pg_has_role(r.oid, '{roles.owner}', 'MEMBER') LOOP "
        "EXECUTE 'REVOKE ' || quote_ident(team_group) || ' FROM ' || quote_ident(person); "
        "found_one := true; END LOOP; "
        f"IF NOT found_one THEN {refuse} 'not a member of this team'; END IF; "
        "EXECUTE 'ALTER ROLE ' || quote_ident(person) || ' NOLOGIN'; END $body$",
    ]


def setup_statements(prefix: str, admin: str) -> list[str]:
    """The SQL that the server's superuser runs once in the project's database (`thumb team
    setup-sql`), so that the administrator `admin` needs no CREATEROLE, with which on
    PostgreSQL 15 a role can grant itself pg_execute_server_program or change any other
    project's roles. It makes the registrar role (CREATEROLE, NOLOGIN) and, as the
    registrar, the lead and annotator groups (on PostgreSQL 16+ the registrar so holds
    ADMIN on them, which it needs there to add members), the owner role; puts `admin` in
    the owner and lead groups; makes the registrar's member functions, which only `admin`
    may run; sets ANNOTATOR_SETTINGS on the annotators already there; and takes CREATE on
    the schema from PUBLIC. Running it again changes nothing but the functions."""
    roles = TeamRoles.named(prefix)
    registrar, administrator = _ident(registrar_role(prefix)), _ident(admin)
    functions = ", ".join(REGISTRAR_FUNCTIONS)
    return [
        _role_if_missing(registrar_role(prefix)),
        f"ALTER ROLE {registrar} NOLOGIN CREATEROLE",
        _role_if_missing(roles.owner),
        f"GRANT CREATE ON SCHEMA {TEAM_SCHEMA} TO {registrar}",  # for its functions, below
        f"SET ROLE {registrar}",
        _role_if_missing(roles.lead),
        _role_if_missing(roles.annotator),
        *_member_functions(roles),
        "RESET ROLE",
        f"REVOKE CREATE ON SCHEMA {TEAM_SCHEMA} FROM {registrar}",
        f"GRANT {_ident(roles.owner)}, {_ident(roles.lead)} TO {administrator}",
        f"REVOKE ALL ON FUNCTION {functions} FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {functions} TO {administrator}",
        "DO $$ DECLARE person text; BEGIN FOR person IN SELECT r.rolname FROM pg_auth_members "
        "AS a JOIN pg_roles AS g ON g.oid = a.roleid JOIN pg_roles AS r ON r.oid = a.member "
        f"WHERE g.rolname = '{roles.annotator}' LOOP {_annotator_settings('person')}"
        "END LOOP; END $$",
        f"REVOKE CREATE ON SCHEMA {TEAM_SCHEMA} FROM PUBLIC",
    ]


def _through_registrar(connection: Connection) -> bool:
    """Whether the superuser's set-up made the registrar's member functions here."""
    return connection.execute(text(
        f"SELECT to_regproc('{ADD_MEMBER}') IS NOT NULL")).scalar_one()


# -- members ---------------------------------------------------------------------------------

def _password_verifier(connection: Connection, name: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier of the password, computed by libpq on this machine, so
    the password itself never reaches the server, its logs or pg_stat_activity."""
    pgconn = getattr(connection.connection.dbapi_connection, "pgconn", None)
    if pgconn is None:
        raise TeamError("passwords are set through the psycopg driver "
                        "(postgresql+psycopg://…)")
    verifier = pgconn.encrypt_password(password.encode(), name.encode(),
                                       b"scram-sha-256").decode()
    if not SCRAM_VERIFIER.fullmatch(verifier):  # so never quote-breaking
        raise TeamError("libpq returned an unexpected password verifier")
    return verifier


def add_member(engine: Engine, name: str, *, lead: bool, password: str | None) -> None:
    """A login role for one person in the lead or annotator group: with a password (only
    its verifier is sent), or none for certificate authentication (pg_hba `cert`)."""
    roles = team_roles(engine)
    with engine.begin() as connection:
        role = _quote(connection, name)
        if _role_exists(connection, name):
            raise TeamError(f"a role {name!r} exists already on this server")
        if password is not None and not password:
            raise TeamError("the password is empty")
        verifier = None if password is None else _password_verifier(connection, name, password)
        if _through_registrar(connection):
            connection.execute(text(f"SELECT {ADD_MEMBER}(:name, :verifier, :lead)"),
                               {"name": name, "verifier": verifier, "lead": lead})
        else:  # the administrator has CREATEROLE (no superuser's set-up)
            login = "" if verifier is None else f" PASSWORD '{verifier}'"
            group = _quote(connection, roles.lead if lead else roles.annotator)
            _run_all(connection, [f"CREATE ROLE {role} LOGIN{login} IN ROLE {group}"])
            if not lead:
                _run_all(connection, [f"ALTER ROLE {role} SET {setting} TO '{value}'"
                                      for setting, value in ANNOTATOR_SETTINGS.items()])
        register(connection, name, None)  # so `--annotator NAME` is known at once


def remove_member(engine: Engine, name: str) -> None:
    """The person can no longer log in and loses the team's rights. The role stays (as
    NOLOGIN), so no one added later under the same name inherits their rows."""
    roles = team_roles(engine)
    with engine.begin() as connection:
        role = _quote(connection, name)
        if name == connection.execute(text("SELECT session_user::text")).scalar_one():
            raise TeamError("you cannot remove your own role")
        groups = [group for group in (roles.lead, roles.annotator)
                  if name in _members_of(connection, group)]
        if not groups:
            raise TeamError(f"{name!r} is not a member of this team")
        if _through_registrar(connection):
            connection.execute(text(f"SELECT {REMOVE_MEMBER}(:name)"), {"name": name})
            return
        _run_all(connection, [*(f"REVOKE {_quote(connection, group)} FROM {role}"
                                for group in groups), f"ALTER ROLE {role} NOLOGIN"])


def _members_of(connection: Connection, group: str) -> list[str]:
    return list(connection.execute(text(
        "SELECT m.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid "
        "JOIN pg_roles m ON m.oid = a.member WHERE g.rolname = :group ORDER BY 1"),
        {"group": group}).scalars())


def members(engine: Engine) -> list[Member]:
    """Every login role of the team, leads first."""
    roles = team_roles(engine)
    with engine.connect() as connection:
        return [Member(name, kind)
                for kind, group in (("lead", roles.lead), ("annotator", roles.annotator))
                for name in _members_of(connection, group)]


def session_annotator(engine: Engine) -> str | None:
    """The login role of this connection where it is in the team's annotator group: the
    only name it may rate under (the server refuses its writes under another). None on
    SQLite, on a database without a team, and for a lead or the administrator."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        if not _has_team(connection):
            return None
        return connection.execute(text(
            "SELECT session_user::text WHERE pg_has_role(session_user, :group, 'member')"),
            {"group": team_roles(connection).annotator}).scalar_one_or_none()
