"""A team on PostgreSQL whose server keeps each annotator's view blind: roles, grants,
row-level security policies and the protocol predicates the policies ask.

`init_team` (run by the administrator, once and again after every `thumb db upgrade`)
makes an owner role that owns the schema, a lead group that reads and writes everything,
and an annotator group whose members reach the THUMB tables only through policies:
the images the protocol lets them hold (`storage.protocol.HOLDABLE_FUNCTION`) with
their captions (without the system), references, claims and flags; their own ratings,
the stage-1 ratings of an image they hold at review, the ratings of a reviewed image
they may resolve or check in the fluency round; gold captions without their answer key,
their own event-log rows (for undo); never the ratings that the lead's `thumb release
--force` set aside (`released_rating`: blind scores, their own or another's). An
annotator's name in the tool is their login role
(`session_user`). The predicates are SQL functions owned by the owner role (SECURITY
DEFINER, fixed search_path), so a policy can ask who holds an image without granting the
rows it reads; each is the application's own query compiled where one exists: which
images one may hold (`holdable_images`), who holds an image at each stage
(`rating_progress`: names and counts only), the feedback on a gold image
(`storage.gold.feedback_query`: one's own answers only)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    and_,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
)

from storage.annotators import register
from storage.gold import FEEDBACK_FUNCTION, feedback_query
from storage.models import Caption, Image, Rating, Stage
from storage.protocol import (
    HOLDABLE_FUNCTION,
    PROGRESS_FUNCTION,
    holdable_images,
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
# The images an annotator's role may hold (`storage.protocol.holdable_images`), and the
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
# Tables only the lead reads: no grant to annotators, and row-level security with the
# lead's policy alone, so that even a grant made by hand shows an annotator no row.
LEADS_ONLY = ("released_rating",)
REACHED = sorted({*READABLE, *OWN_ROWS, "event_log", *LEADS_ONLY})  # row-level security on each
# The functions the policies call, which only the team may run; with TEAM_FUNCTION, every
# function `init_team` makes.
PREDICATES = (f"{PROGRESS_FUNCTION}(integer[])", f"{FEEDBACK_FUNCTION}(integer)",
              f"{HOLDABLE_FUNCTION}()", "thumb_me()", "thumb_reviews(integer)",
              "thumb_settles(integer)")
FUNCTIONS = (*PREDICATES, f"{TEAM_FUNCTION}()")


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
    (`storage.protocol.ImageState.stage_one_over`, counted by the protocol's own
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
    column has, since a column of the same name would win). An annotator's role writes
    its own claims and ratings unchecked by the server (the protocol's order is the
    application's), so the predicates do not trust them alone: a stage-2 claim or rating
    opens stage-1 scores only of an image whose stage 1 is over and that they did not
    rate at stage 1 (never the other blind rater's scores of their own image)."""
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
        # at resolution (an image reviewed, which they neither rated nor reviewed) and in
        # the fluency round (a native English speaker, an image reviewed)
        "CREATE OR REPLACE FUNCTION thumb_settles(rated_caption integer) RETURNS boolean "
        f"{definer} AS $$ SELECT EXISTS ({on_image} AND r.stage = 2) AND {over} AND (NOT "
        f"EXISTS ({on_image} AND r.stage IN (1, 2) AND r.annotator_id = thumb_me()) OR "
        "coalesce((SELECT native_english FROM annotator WHERE id = thumb_me()), false)) $$",
    ]


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
    annotator may hold, and the gold feedback of one gold image (the session's own complete
    answers with the key), for the protocol, the policies and the gold feedback on a team."""
    ids, gold_image = literal_column("ids"), literal_column("gold_image")
    me, image_id = literal_column("session_user"), Caption.__table__.c.image_id
    progress = rating_progress(and_(
        or_(ids.is_(None), image_id == func.any(ids)),
        or_(func.pg_has_role(me, literal(roles.lead), literal("member")),
            image_id.in_(holdable_images(me)))))
    return [_served_function(connection, PROGRESS_FUNCTION, "ids integer[]", progress),
            _served_function(connection, FEEDBACK_FUNCTION, "gold_image integer",
                             feedback_query(gold_image, func.thumb_me())),
            _served_function(connection, HOLDABLE_FUNCTION, "", holdable_images(me))]


def _owner_of_everything(connection: Connection, roles: TeamRoles) -> list[str]:
    """The owner role, made if new, and every table and sequence of the schema handed to
    it. The administrator joins it (to hand them over, and to upgrade the schema later)
    and the lead group (a member of the owner is not the owner: without a policy it
    would read no row)."""
    owner, me = _quote(connection, roles.owner), connection.execute(
        text("SELECT quote_ident(current_user)")).scalar_one()
    statements = [] if _role_exists(connection, roles.owner) else [f"CREATE ROLE {owner} NOLOGIN"]
    statements += [f"GRANT {owner} TO {me}", f"GRANT {_quote(connection, roles.lead)} TO {me}",
                   f"GRANT CREATE, USAGE ON SCHEMA {TEAM_SCHEMA} TO {owner}"]
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
        statements.append(f"GRANT SELECT, INSERT, UPDATE ON {table} TO {annotator}")
    # `u` takes back one's own flag or fluency verdict; a resolver's reasons go when their
    # final values change
    statements.append(f"GRANT DELETE ON image_flag, resolution, fluency_check TO {annotator}")
    for function in PREDICATES:
        statements += [f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC",
                       f"GRANT EXECUTE ON FUNCTION {function} TO {lead}, {annotator}"]
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
        policy(table, "thumb_annotator_adds", "INSERT", annotator, None, own)
        policy(table, "thumb_annotator_changes", "UPDATE", annotator, own, own)
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


def init_team(engine: Engine, roles: TeamRoles) -> None:
    """Make (or bring up to date) the team's roles, grants, functions and policies on this
    database, in one transaction. The caller owns the database and the schema's tables (it
    ran `thumb db upgrade`; on a later run, as a member of the owner role) and may create
    roles (CREATEROLE)."""
    _postgresql(engine)
    with engine.begin() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        if schema != TEAM_SCHEMA:
            raise TeamError(
                f"a team database keeps its project in the schema {TEAM_SCHEMA!r} (its roles' "
                f"grants and the functions that serve each annotator name it), but this "
                f"connection's tables are in {schema!r}: use a database of its own for the "
                f"project, in its schema {TEAM_SCHEMA!r}")
        for name in (roles.lead, roles.annotator):
            if not _role_exists(connection, name):
                _run_all(connection, [f"CREATE ROLE {_quote(connection, name)} NOLOGIN"])
        _run_all(connection, _owner_of_everything(connection, roles))
        _run_all(connection, _entry(connection, roles))
        owner = _quote(connection, roles.owner)
        # created as the owner, so that the SECURITY DEFINER functions run as the owner
        _run_all(connection, [f"SET LOCAL ROLE {owner}", *_functions(connection, roles),
                              *_served_functions(connection, roles)])
        _run_all(connection, _policies(connection, roles))
        _run_all(connection, _grants(connection, roles))


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
    if "'" in verifier:  # libpq's verifier is base64 and `$:`; never quote-breaking
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
        login = "" if password is None else (
            f" PASSWORD '{_password_verifier(connection, name, password)}'")
        group = _quote(connection, roles.lead if lead else roles.annotator)
        _run_all(connection, [f"CREATE ROLE {role} LOGIN{login} IN ROLE {group}"])
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
