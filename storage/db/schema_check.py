"""Is a database's schema the one this thumb-tui's models describe? A database at the head
revision can still be damaged (a table dropped by hand, a trigger lost in a manual repair)
or added to (a trigger that deletes ratings on the next write): the revision number alone
does not say so.

- `schema_damage` is the full comparison `thumb db upgrade` runs (a few hundred ms):
  Alembic's autogenerate comparison of the models with the database (tables, columns and
  their types and NULLs, indexes, unique constraints, foreign keys), the named CHECK
  constraints, the triggers the revisions create (the append-only event log, the rubric
  checks, PostgreSQL's role stamp), and everything else in the schema that runs code or
  opens rows: any trigger or view (SQLite and PostgreSQL), rule, function, row-level
  security policy or event trigger (PostgreSQL) that neither the revisions nor `thumb
  team init` make, each named with the SQL that drops it. Each difference is one sentence
  ("table judgment_score is missing"). Not compared: tables (and their indexes) that are
  not thumb-tui's, which run nothing on ours; the bodies of our own functions and
  policies, compared by name only (`thumb team init` rewrites a team's); grants, role
  memberships and whether row-level security is on (`thumb team init` sets them).
- `quick_damage` is what every command checks when it opens the database (well under a
  millisecond on SQLite): one catalog query for the names of the tables, columns, named
  indexes and triggers that must be there, and of any trigger (and, on SQLite, view) that
  must not. Only when it finds something wrong does the full comparison run, to say
  precisely what.

`tests/test_migrations.py` holds both to a new database (nothing differs) and to damaged
copies."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from sqlalchemy import CheckConstraint, Connection, MetaData, inspect

# The triggers the revisions create, as (table, trigger) per dialect: SQLite's event log
# refuses UPDATE and DELETE with one trigger each (0001), PostgreSQL's with one function
# (0001) and stamps each row with the session's role (0009); rating values are checked
# against their rubric (0006: an INSERT and an UPDATE trigger per column on SQLite), and
# so are gold captions' ranges and gold answers (0012).
_RUBRIC_CHECKED = {"rating": ("precision", "recall", "fluency", "conciseness", "inclusive"),
                   "fluency_check": ("fluency",),
                   # 0012: gold captions' ranges and gold answers' values
                   "gold_caption": ("precision_min", "precision_max", "recall_min",
                                    "recall_max"),
                   "gold_answer": ("precision", "recall", "fluency", "conciseness",
                                   "inclusive")}
TRIGGERS: dict[str, frozenset[tuple[str, str]]] = {
    "sqlite": frozenset({
        ("event_log", "event_log_no_update"), ("event_log", "event_log_no_delete"),
        *((table, f"{table}_{column}_on_rubric_{when}")
          for table, columns in _RUBRIC_CHECKED.items() for column in columns
          for when in ("insert", "update"))}),
    "postgresql": frozenset({
        ("event_log", "event_log_append_only"), ("event_log", "event_log_db_role"),
        *((table, f"{table}_{column}_on_rubric")
          for table, columns in _RUBRIC_CHECKED.items() for column in columns)}),
}
_EXTRA = "is not in this thumb-tui's schema"
# What each kind of object that nobody should have added could do, for its sentence; in
# the order their DROPs run (a function last: a trigger or policy may call it).
_ADDED_DOES = {"trigger": "it runs on writes to {table}",
               "rule": "it rewrites statements on {table}",
               "policy": "it opens rows of {table} to a role",
               "view": "a view runs queries with its owner's rights",
               "materialized view": "a view runs queries with its owner's rights",
               "event trigger": "it runs on every schema change",
               "function": "a trigger or policy could call it"}

_SQLITE_NAMES = (
    "SELECT 'column', m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
    "WHERE m.type = 'table' "
    "UNION ALL SELECT type, tbl_name, name FROM sqlite_master "
    "WHERE type IN ('index', 'trigger', 'view')")
_POSTGRESQL_NAMES = (
    "WITH ours AS (SELECT c.oid, c.relname FROM pg_catalog.pg_class AS c "
    "  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
    "  WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')) "
    "SELECT 'column', ours.relname, a.attname FROM ours "
    "  JOIN pg_catalog.pg_attribute AS a ON a.attrelid = ours.oid "
    "  WHERE a.attnum > 0 AND NOT a.attisdropped "
    "UNION ALL SELECT 'index', ours.relname, ix.relname FROM ours "
    "  JOIN pg_catalog.pg_index AS i ON i.indrelid = ours.oid "
    "  JOIN pg_catalog.pg_class AS ix ON ix.oid = i.indexrelid "
    "UNION ALL SELECT 'trigger', ours.relname, t.tgname FROM ours "
    "  JOIN pg_catalog.pg_trigger AS t ON t.tgrelid = ours.oid WHERE NOT t.tgisinternal")


def _metadata() -> MetaData:
    from sqlmodel import SQLModel

    import storage.models  # noqa: F401  (registers every table)

    return SQLModel.metadata


@cache
def _expected_names(dialect: str) -> frozenset[tuple[str, str, str]]:
    """(kind, table, name) of every column, named index and trigger the schema has."""
    names = {("table", table.name, "") for table in _metadata().tables.values()}
    for table in _metadata().tables.values():
        names |= {("column", table.name, column.name) for column in table.columns}
        names |= {("index", table.name, str(index.name)) for index in table.indexes}
    names |= {("trigger", table, name) for table, name in TRIGGERS.get(dialect, ())}
    return frozenset(names)


# Every trigger, view, rule, policy, function and event trigger of the database's schema,
# as (kind, table, name): what may run on a write or show rows. A function's "table" is
# its signature (what DROP FUNCTION takes); one of an extension (pgcrypto…) is left out.
_SQLITE_ADDED = "SELECT type, tbl_name, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
_POSTGRESQL_ADDED = (
    "WITH here AS (SELECT c.oid, c.relname, c.relkind FROM pg_catalog.pg_class AS c "
    "  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
    "  WHERE n.nspname = current_schema()) "
    "SELECT 'trigger', here.relname, t.tgname FROM here "
    "  JOIN pg_catalog.pg_trigger AS t ON t.tgrelid = here.oid WHERE NOT t.tgisinternal "
    "UNION ALL SELECT CASE relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, "
    "  relname, relname FROM here WHERE relkind IN ('v', 'm') "
    "UNION ALL SELECT 'rule', here.relname, r.rulename FROM here "
    "  JOIN pg_catalog.pg_rewrite AS r ON r.ev_class = here.oid WHERE r.rulename <> '_RETURN' "
    "UNION ALL SELECT 'policy', here.relname, p.polname FROM here "
    "  JOIN pg_catalog.pg_policy AS p ON p.polrelid = here.oid "
    "UNION ALL SELECT 'function', p.oid::regprocedure::text, p.proname "
    "  FROM pg_catalog.pg_proc AS p JOIN pg_catalog.pg_namespace AS n "
    "  ON n.oid = p.pronamespace WHERE n.nspname = current_schema() AND NOT EXISTS ("
    "    SELECT FROM pg_catalog.pg_depend AS d WHERE d.classid = 'pg_catalog.pg_proc'::regclass "
    "    AND d.objid = p.oid AND d.deptype = 'e') "
    "UNION ALL SELECT 'event trigger', '', evtname FROM pg_catalog.pg_event_trigger")


def _expected_code(connection: Connection) -> frozenset[tuple[str, str, str]]:
    """(kind, table, name) of the triggers, policies and functions the revisions and `thumb
    team init` make (a function by name alone: its "table" is left ""); no view, rule or
    event trigger is ours."""
    dialect = connection.dialect.name
    made = {("trigger", table, name) for table, name in TRIGGERS.get(dialect, ())}
    if dialect == "postgresql":
        from storage.team import made_by_init

        # PostgreSQL's trigger functions are named after their triggers (0001, 0006, 0009,
        # 0012)
        made |= {("function", "", name) for _, name in TRIGGERS[dialect]}
        made |= made_by_init(connection)
    return frozenset(made)


def _added(connection: Connection, found: Iterable[tuple[str, str, str]],
           expected: frozenset[tuple[str, str, str]]) -> list[str]:
    """A sentence for each of `found` that is not `expected`, naming it with the SQL that
    drops it: refused, since a trigger or policy someone added can delete ratings or show
    blind scores unseen."""
    quote = connection.dialect.identifier_preparer.quote
    sentences = []
    order = list(_ADDED_DOES)
    for kind, table, name in sorted(found, key=lambda row: (order.index(row[0]), row)):
        if (kind, "" if kind == "function" else table, name) in expected:
            continue
        on = f" ON {quote(table)}" if kind in ("trigger", "rule", "policy") \
            and connection.dialect.name == "postgresql" else ""
        target = table if kind == "function" else f"{quote(name)}{on}"
        where = f" on {table}" if kind in ("trigger", "rule", "policy") else ""
        does = _ADDED_DOES[kind].format(table=table)
        sentences.append(f"{kind} {name}{where} {_EXTRA} ({does}): drop it with "
                         f"DROP {kind.upper()} {target};")
    return sentences


def quick_damage(connection: Connection) -> list[str]:
    """What is missing among the names the schema must have (tables, columns, named
    indexes, triggers), and any trigger (or, on SQLite, view) it must not have, read from
    the catalog in one query; [] on a sound database (and on a dialect this check does
    not know)."""
    dialect = connection.dialect.name
    query = {"sqlite": _SQLITE_NAMES, "postgresql": _POSTGRESQL_NAMES}.get(dialect)
    if query is None:
        return []
    found = {(kind, table, name) for kind, table, name in connection.exec_driver_sql(query)}
    found |= {("table", table, "") for kind, table, _ in found if kind == "column"}
    missing = _expected_names(dialect) - found
    tables = {table for kind, table, _ in missing if kind == "table"}
    problems = sorted(_missing_sentence(kind, table, name) for kind, table, name in missing
                      if kind == "table" or table not in tables)
    added = {(kind, table, name) for kind, table, name in found if kind == "view"} | {
        ("trigger", table, name) for kind, table, name in found if kind == "trigger"
        and (table, name) not in TRIGGERS[dialect]}
    if added:  # a team's own (PostgreSQL) are looked up only then
        problems += _added(connection, added, _expected_code(connection))
    return problems


def _missing_sentence(kind: str, table: str, name: str) -> str:
    if kind == "table":
        return f"table {table} is missing"
    if kind == "column":
        return f"column {table}.{name} is missing"
    return f"{kind} {name} on {table} is missing"


def schema_differences(connection: Connection) -> list:
    """Alembic's autogenerate comparison of the database with the models: the operations
    a revision would need (tables, columns, types, NULLs, indexes, unique constraints,
    foreign keys); [] when they agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return compare_metadata(context, _metadata())


def _columns(columns: Iterable) -> str:
    return ", ".join(getattr(column, "name", str(column)) for column in columns)


def _describe(difference: tuple | list, missing_tables: set[str]) -> list[str]:
    """One autogenerate difference as sentences ([] for what is not thumb-tui's business:
    a table of someone else's in the database, or a part of a table already missing)."""
    if isinstance(difference, list):  # modify_* operations of one column
        return [sentence for item in difference for sentence in _describe(item,
                                                                           missing_tables)]
    operation = difference[0]
    if operation == "add_table":
        return [f"table {difference[1].name} is missing"]
    if operation == "remove_table":
        return []
    if operation in ("add_column", "remove_column"):
        _, _, table, column = difference
        state = "is missing" if operation == "add_column" else _EXTRA
        return [f"column {table}.{column.name} {state}"]
    if operation in ("add_index", "remove_index"):
        index = difference[1]
        if index.table.name in missing_tables:
            return []
        state = "is missing" if operation == "add_index" else _EXTRA
        return [f"index {index.name} on {index.table.name} ({_columns(index.columns)}) "
                f"{state}"]
    if operation in ("add_constraint", "remove_constraint", "add_fk", "remove_fk"):
        constraint = difference[1]
        table = constraint.table.name
        if table in missing_tables:
            return []
        state = "is missing" if operation.startswith("add") else _EXTRA
        if operation.endswith("fk"):
            target = constraint.elements[0].column.table.name if constraint.elements else "?"
            referred = _columns(element.column for element in constraint.elements)
            return [f"foreign key {table} ({_columns(constraint.columns)}) -> {target} "
                    f"({referred}) {state}"]
        name = f" {constraint.name}" if constraint.name else ""
        return [f"unique constraint{name} on {table} ({_columns(constraint.columns)}) "
                f"{state}"]
    if operation == "modify_type":
        _, _, table, column, _, found, wanted = difference
        return [f"column {table}.{column} has type {found}, not {wanted}"]
    if operation == "modify_nullable":
        _, _, table, column, _, found, wanted = difference

        def nulls(nullable: bool) -> str:
            return "allows NULL" if nullable else "is NOT NULL"

        return [f"column {table}.{column} {nulls(found)}; the schema says it "
                f"{nulls(wanted)}"]
    if operation.startswith("modify_") and len(difference) >= 4:
        return [f"column {difference[2]}.{difference[3]}: {operation[7:]} differs"]
    return [f"{operation.replace('_', ' ')}: {difference[1:]}"]


def _check_damage(connection: Connection, missing_tables: set[str]) -> list[str]:
    inspector = inspect(connection)
    found_tables = set(inspector.get_table_names())
    problems = []
    for table in _metadata().tables.values():
        if table.name in missing_tables or table.name not in found_tables:
            continue
        wanted = {c.name for c in table.constraints
                  if isinstance(c, CheckConstraint) and isinstance(c.name, str)}
        found = {c["name"] for c in inspector.get_check_constraints(table.name) if c["name"]}
        problems += [f"CHECK constraint {name} on {table.name} is missing"
                     for name in sorted(wanted - found)]
        problems += [f"CHECK constraint {name} on {table.name} {_EXTRA}"
                     for name in sorted(found - wanted)]
    return problems


def _trigger_damage(connection: Connection, missing_tables: set[str]) -> list[str]:
    """The triggers the revisions make that are missing, and every trigger, view, rule,
    function, policy or event trigger that nobody should have added."""
    dialect = connection.dialect.name
    query = {"sqlite": _SQLITE_ADDED, "postgresql": _POSTGRESQL_ADDED}.get(dialect)
    if query is None:
        return []
    found = {(kind, table, name) for kind, table, name in connection.exec_driver_sql(query)}
    triggers = {(table, name) for kind, table, name in found if kind == "trigger"}
    return [f"trigger {name} on {table} is missing"
            for table, name in sorted(TRIGGERS[dialect] - triggers)
            if table not in missing_tables] + _added(connection, found,
                                                      _expected_code(connection))


def schema_damage(connection: Connection) -> list[str]:
    """Every way the database's schema differs from this thumb-tui's, one sentence each
    ("table judgment_score is missing", "column event_log.os_login is missing", "trigger
    event_log_no_update on event_log is missing", "trigger rating_wipe on rating is not in
    this thumb-tui's schema (…): drop it with DROP TRIGGER "rating_wipe";"); [] when it is
    sound. Tables that are not thumb-tui's are left alone (see the module's docstring)."""
    differences = schema_differences(connection)
    missing_tables = {d[1].name for d in differences
                      if isinstance(d, tuple) and d[0] == "add_table"}
    problems = [sentence for difference in differences
                for sentence in _describe(difference, missing_tables)]
    problems += _check_damage(connection, missing_tables)
    problems += _trigger_damage(connection, missing_tables)
    return list(dict.fromkeys(problems))
