"""Full-text search over conversation messages, maintained by the database itself.

PostgreSQL: a stored generated `tsvector` column with a GIN index. Generated, so every
INSERT, the branch's INSERT … SELECT and every DELETE keep it current without the store
doing anything. Stored rather than an expression index on `to_tsvector(content)`: ranking
and the index recheck then read the stored vector, where an expression index made
PostgreSQL re-parse the text of every match (2.5 s for a word found in 75,000 messages,
40 ms with the stored column; docs/performance.md).

SQLite: an FTS5 table over the entry table, kept current by triggers, so the ORM, the
store's SQL and the branch's INSERT … SELECT all maintain it alike. The triggers and the
view belong to the entry table: a later migration that makes Django rebuild that table on
SQLite must drop them first and create them again (the search tests fail if it does not).

Neither column nor table is in the models: they are vendor-specific and the ORM never reads
or writes them.
"""

from django.db import migrations

# Written out rather than imported, so this migration stays what it was when it ran. The
# store's queries must agree with it (sessions_app/store/search.py).
ENTRY = "sessions_app_entry"
FTS = "sessions_app_entry_search"
SEARCHABLE = "sessions_app_entry_searchable"
ROLES = "'user', 'assistant'"

POSTGRES_FORWARD = [
    f"ALTER TABLE {ENTRY} ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    f"CASE WHEN kind = 'message' AND role IN ({ROLES}) "
    "THEN to_tsvector('english'::regconfig, content) END) STORED",
    # Partial: tool results and turn markers have no vector and take no index space.
    f"CREATE INDEX entry_search_vector ON {ENTRY} USING gin (search_vector) "
    "WHERE search_vector IS NOT NULL",
]
POSTGRES_REVERSE = [
    "DROP INDEX entry_search_vector",
    f"ALTER TABLE {ENTRY} DROP COLUMN search_vector",
]


def _sqlite_searched(row: str) -> str:
    return f"{row}.kind = 'message' AND {row}.role IN ({ROLES})"


SQLITE_FORWARD = [
    # External content: the text is stored once, in the entry table; FTS5 keeps only the
    # inverted index and reads the text back by rowid for snippets. Its content is a view
    # of the searchable rows, so FTS5's own 'rebuild' command rebuilds exactly this index.
    f"CREATE VIEW {SEARCHABLE} AS SELECT id, content FROM {ENTRY} "
    f"WHERE {_sqlite_searched(ENTRY)}",
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(content, content='{SEARCHABLE}', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    f"INSERT INTO {FTS} ({FTS}) VALUES ('rebuild')",
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {ENTRY} WHEN {_sqlite_searched('new')} "
    f"BEGIN INSERT INTO {FTS} (rowid, content) VALUES (new.id, new.content); END",
    # An external-content FTS5 row is removed by handing back exactly what was indexed.
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {ENTRY} WHEN {_sqlite_searched('old')} "
    f"BEGIN INSERT INTO {FTS} ({FTS}, rowid, content) VALUES ('delete', old.id, old.content); "
    "END",
    # Entries are immutable, but an edit must not leave the index pointing at old words.
    f"CREATE TRIGGER {FTS}_update_old AFTER UPDATE OF kind, role, content ON {ENTRY} "
    f"WHEN {_sqlite_searched('old')} "
    f"BEGIN INSERT INTO {FTS} ({FTS}, rowid, content) VALUES ('delete', old.id, old.content); "
    "END",
    f"CREATE TRIGGER {FTS}_update_new AFTER UPDATE OF kind, role, content ON {ENTRY} "
    f"WHEN {_sqlite_searched('new')} "
    f"BEGIN INSERT INTO {FTS} (rowid, content) VALUES (new.id, new.content); END",
]
SQLITE_REVERSE = [
    f"DROP TRIGGER {FTS}_update_new",
    f"DROP TRIGGER {FTS}_update_old",
    f"DROP TRIGGER {FTS}_delete",
    f"DROP TRIGGER {FTS}_insert",
    f"DROP TABLE {FTS}",
    f"DROP VIEW {SEARCHABLE}",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, ()):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0004_schedules_and_outbox")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_REVERSE, "sqlite": SQLITE_REVERSE}),
        ),
    ]
