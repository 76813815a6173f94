"""Schema step 8: the exact statistics keyword search scores with (``search``), kept by the
database itself in every transaction that changes a record.

* ``memories.words``: a record's length for BM25, its number of words *stop words included*,
  as FTS5 and the in-process store count a record's length; every write computes it with the
  shared tokenizer (``sql.item_values``). Records stored before this step are counted here by
  ``[[:alnum:]]+`` runs, the same words for any text without combining marks. (A generated
  column would be PostgreSQL's own count, ``to_tsvector('simple', ...)``'s positions, but
  computing it doubled the cost of a write: measured, +100 µs a record.)
* ``memory_keyword_totals``: ``N`` (records) and the sum of their lengths.
* ``memory_keyword_terms``: for each lexeme of ``tsv``, the records holding it.

Statement-level triggers with transition tables keep both tables exact: one aggregated upsert
per statement (a batch ``COPY`` of a thousand records is one), whatever changes ``memories``
(writes, updates, reviews, deletes, imports, a ``TRUNCATE``). Counts are *sharded*: each
counter is a sum of rows, one per shard, and a transaction writes only to shards it owns for
its lifetime (``pg_try_advisory_xact_lock`` on the shard, the next one when taken). Two
concurrent writers therefore never wait for each other on a frequent term's counter, nor
deadlock on two of them; a reader sums the shards of the few terms it needs. A search reads
the statistics and the postings in one ``REPEATABLE READ`` snapshot, so they agree exactly.
"""

from __future__ import annotations

import hashlib

__all__ = ("SHARDS", "keyword_statistics_step")

SHARDS = 64
"""Shards per counter: more concurrent writing transactions than this wait for a shard."""


def _lock_space(schema: str) -> int:
    """The first key of the schema's shard locks (32 bits of a hash: the two-key advisory lock
    space, apart from the one-key locks writers take per record key)."""
    digest = hashlib.blake2b(f"{schema}\0keyword-shards".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def _counting(s: str, name: str, changes: str, documents: str, words: str) -> str:
    """A trigger function applying one statement's changes to the shard the transaction owns.

    ``changes`` is SQL yielding ``(tsv, sign)`` rows, ``documents`` and ``words`` SQL for the
    change of ``N`` and of the length sum."""
    return f"""
        CREATE FUNCTION {s}.{name}() RETURNS trigger LANGUAGE plpgsql AS $body$
        DECLARE
            owned integer := {s}.keyword_shard();
        BEGIN
            INSERT INTO {s}.memory_keyword_totals AS t (shard, documents, words)
            SELECT owned, d.documents, d.words
            FROM (SELECT ({documents})::bigint AS documents, ({words})::bigint AS words) d
            WHERE d.documents <> 0 OR d.words <> 0
            ON CONFLICT (shard) DO UPDATE SET documents = t.documents + excluded.documents,
                words = t.words + excluded.words;
            INSERT INTO {s}.memory_keyword_terms AS t (term, shard, documents)
            SELECT l.term, owned, sum(c.sign)
            FROM ({changes}) c, unnest(tsvector_to_array(c.tsv)) AS l(term)
            GROUP BY l.term HAVING sum(c.sign) <> 0
            ON CONFLICT (term, shard) DO UPDATE SET documents = t.documents + excluded.documents;
            RETURN NULL;
        END
        $body$
    """


def keyword_statistics_step(s: str) -> tuple[str, ...]:
    """The statements of schema step 8 for schema ``s`` (quoted): the length column, the
    statistics tables filled from the records already stored, and the triggers that keep
    them."""
    schema = s.strip('"')
    # Rows whose indexed text changed: an update of anything else changes no statistic.
    changed = (
        "FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE n.tsv <> o.tsv OR n.words <> o.words"
    )
    return (
        f"ALTER TABLE {s}.memories ADD COLUMN words integer NOT NULL DEFAULT 0",
        f"UPDATE {s}.memories SET words = (SELECT count(*) FROM "
        "regexp_matches(search_text, '[[:alnum:]]+', 'g'))",
        f"CREATE TABLE {s}.memory_keyword_totals (shard integer PRIMARY KEY, "
        "documents bigint NOT NULL, words bigint NOT NULL)",
        f'CREATE TABLE {s}.memory_keyword_terms (term text COLLATE "C" NOT NULL, '
        "shard integer NOT NULL, documents bigint NOT NULL, PRIMARY KEY (term, shard)) "
        # Room on each page: a count's update stays on its page and skips the index (HOT).
        "WITH (fillfactor = 50)",
        f"INSERT INTO {s}.memory_keyword_totals (shard, documents, words) "
        f"SELECT 0, count(*), coalesce(sum(words), 0) FROM {s}.memories",
        f"INSERT INTO {s}.memory_keyword_terms (term, shard, documents) "
        f"SELECT l.term, 0, count(*) FROM {s}.memories m, "
        "unnest(tsvector_to_array(m.tsv)) AS l(term) GROUP BY l.term",
        f"""
        CREATE FUNCTION {s}.keyword_shard() RETURNS integer LANGUAGE plpgsql AS $body$
        DECLARE
            first integer := pg_backend_pid() % {SHARDS:d};
        BEGIN
            -- A shard this transaction holds is taken again at once (the lock is reentrant).
            FOR n IN 0..{SHARDS - 1:d} LOOP
                IF pg_try_advisory_xact_lock({_lock_space(schema):d}, (first + n) % {SHARDS:d})
                THEN
                    RETURN (first + n) % {SHARDS:d};
                END IF;
            END LOOP;
            -- Every shard is taken: this transaction holds none, so waiting cannot deadlock.
            PERFORM pg_advisory_xact_lock({_lock_space(schema):d}, first);
            RETURN first;
        END
        $body$
        """,
        _counting(
            s,
            "keyword_inserted",
            "SELECT tsv, 1 AS sign FROM new_rows",
            "SELECT count(*) FROM new_rows",
            "SELECT coalesce(sum(words), 0) FROM new_rows",
        ),
        _counting(
            s,
            "keyword_deleted",
            "SELECT tsv, -1 AS sign FROM old_rows",
            "SELECT -count(*) FROM old_rows",
            "SELECT -coalesce(sum(words), 0) FROM old_rows",
        ),
        _counting(
            s,
            "keyword_updated",
            f"SELECT n.tsv, 1 AS sign {changed} UNION ALL SELECT o.tsv, -1 {changed}",
            "SELECT 0",
            f"SELECT coalesce(sum(n.words - o.words), 0) {changed}",
        ),
        f"CREATE TRIGGER memories_keyword_inserted AFTER INSERT ON {s}.memories "
        "REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.keyword_inserted()",
        f"CREATE TRIGGER memories_keyword_deleted AFTER DELETE ON {s}.memories "
        "REFERENCING OLD TABLE AS old_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.keyword_deleted()",
        f"CREATE TRIGGER memories_keyword_updated AFTER UPDATE ON {s}.memories "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.keyword_updated()",
        f"""
        CREATE FUNCTION {s}.keyword_truncated() RETURNS trigger LANGUAGE plpgsql AS $body$
        BEGIN
            DELETE FROM {s}.memory_keyword_totals;
            DELETE FROM {s}.memory_keyword_terms;
            RETURN NULL;
        END
        $body$
        """,
        f"CREATE TRIGGER memories_keyword_truncated AFTER TRUNCATE ON {s}.memories "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.keyword_truncated()",
    )
