"""The database itself: the engine, write transactions and retries (`engine`), opening a
database (`opening`), its schema migrations (`migrations/`), the check of its schema
(`schema_check`) and a copy of a SQLite file in use (`backup`)."""
