"""Schema step 9: per-term impact bounds, kept by the statement triggers that keep the document
frequencies (``search_schema``), so that keyword search (``search``) prunes with bounds close
to what a term really adds instead of the loosest one, ``idf (k1 + 1)``.

**What is kept.** Each ``memory_keyword_terms`` row (a term's counter in one shard) also holds
``impact``, the maximum over the postings that shard's statements added of the term's BM25
factor at a *reference* average length ``reference`` stored beside it::

    F(tf, dl, A) = tf (k1 + 1) / (tf + k1 (1 - b + b dl / A))

(``tf`` the term's positions in the record, ``dl`` the record's length, ``memories.words``).
A record's BM25 contribution for the term is ``idf · F(tf, dl, A)`` at the current average
``A``. A row keeps the reference it was created with (the average of the moment); later
statements compute their postings' factors at that same reference (they own the shard: no
other transaction changes the row meanwhile). An insert or an update can only raise
``impact``; a delete leaves it, still an upper bound of what the remaining postings add.

**The bound at query time.** For a term, ``max over its rows of impact · max(1, A / reference)``
bounds ``F`` of every posting at the current average ``A``.

*Proof.* Write ``c = tf + k1 (1 - b) > 0`` and ``x = k1 b dl >= 0``, so that
``F(A) = tf (k1 + 1) / (c + x / A)``. ``F`` grows with ``A`` (the denominator shrinks).

* ``A <= R`` (``R`` the reference): ``F(A) <= F(R) <= impact``.
* ``A > R``: ``F(A) / F(R) = (c + x / R) / (c + x / A)``. With ``c > 0`` and ``x / R >= x / A``,
  ``(c + x / R) / (c + x / A) <= (x / R) / (x / A) = A / R`` when ``x > 0`` (adding the same
  positive ``c`` to the numerator and the denominator of a fraction ``>= 1`` brings it closer
  to 1), and ``= 1 <= A / R`` when ``x = 0``. So ``F(A) <= F(R) · A / R <= impact · A / R``.

Both cases: ``F(A) <= impact · max(1, A / R)``. The factor is also always below ``k1 + 1``, so a
term's bound is ``idf · min(k1 + 1, impact · max(1, A / R))`` (``KeywordPlan.bound``, with a
relative margin for rounding: the database and the search compute ``F`` in a different order).

*Folding a bound into another reference* (an upsert racing with a row another transaction
created with another reference): ``M`` at reference ``R0`` is a valid impact at any reference
``R1`` as ``M · max(1, R1 / R0)``: for every ``A``, ``M · max(1, A / R0) <= M · max(1, R1 / R0)
· max(1, A / R1)`` (if ``R1 >= R0`` the right side is ``M · max(R1, A) / R0``; otherwise it is at
least ``M · max(1, A / R1) >= M · max(1, A / R0)``).

The bound loosens by ``A / R`` as the average grows past the reference a row was created with,
and does not tighten when it shrinks; the migration's backfill computes every row exactly at
the average of the moment.
"""

from __future__ import annotations

from workers.memory.stores.postgres.search_plan import K1, B

__all__ = ("keyword_impacts_step",)

_AVERAGE = (
    "CASE WHEN sum(documents) > 0 AND sum(words) > 0 "
    "THEN sum(words)::float8 / sum(documents)::float8 ELSE 1.0 END"
)
"""The average record length over the counters' shards, as ``search_stats`` reads it."""


def factor(tf: str, words: str, reference: str) -> str:
    """SQL for ``F(tf, dl, A)`` (the module's docstring) of SQL expressions."""
    return f"{K1 + 1!r} * {tf} / ({tf} + {K1!r} * (1 - {B!r} + {B!r} * {words} / {reference}))"


def _counting(s: str, name: str, changes: str, words: str) -> str:
    """Step 8's trigger function ``name`` (``search_schema._counting``), counting as before and
    raising the impacts of the terms of the rows that ``changes`` (SQL yielding ``(tsv, words,
    sign)``) adds with a positive sign. ``words`` is the change of the length sum (``N``
    changes by the signs' sum)."""
    impact = factor("p.tf", "p.words", "coalesce(e.reference, average)")
    return f"""
        CREATE OR REPLACE FUNCTION {s}.{name}() RETURNS trigger LANGUAGE plpgsql AS $body$
        DECLARE
            owned integer := {s}.keyword_shard();
            average float8;
        BEGIN
            INSERT INTO {s}.memory_keyword_totals AS t (shard, documents, words)
            SELECT owned, d.documents, d.words
            FROM (SELECT (SELECT coalesce(sum(sign), 0) FROM ({changes}) c)::bigint AS documents,
                ({words})::bigint AS words) d
            WHERE d.documents <> 0 OR d.words <> 0
            ON CONFLICT (shard) DO UPDATE SET documents = t.documents + excluded.documents,
                words = t.words + excluded.words;
            SELECT {_AVERAGE} INTO average FROM {s}.memory_keyword_totals;
            WITH p AS MATERIALIZED (
                SELECT u.lexeme AS term, c.sign, c.words, cardinality(u.positions) AS tf
                FROM ({changes}) c, unnest(c.tsv) u
            ), e AS (
                SELECT t.term, t.reference, t.impact
                FROM (SELECT DISTINCT term FROM p) k
                JOIN {s}.memory_keyword_terms t ON t.term = k.term AND t.shard = owned
            )
            INSERT INTO {s}.memory_keyword_terms AS t (term, shard, documents, impact, reference)
            SELECT p.term, owned, sum(p.sign),
                coalesce(max({impact}) FILTER (WHERE p.sign > 0), 0),
                coalesce(e.reference, average)
            FROM p LEFT JOIN e ON e.term = p.term
            GROUP BY p.term, e.reference, e.impact
            -- An update that keeps a term changes its count by 0 but may raise its impact.
            HAVING sum(p.sign) <> 0
                OR coalesce(max({impact}) FILTER (WHERE p.sign > 0), 0) > coalesce(e.impact, 0)
            ON CONFLICT (term, shard) DO UPDATE SET documents = t.documents + excluded.documents,
                impact = greatest(t.impact,
                    excluded.impact * greatest(1.0, t.reference / excluded.reference));
            RETURN NULL;
        END
        $body$
    """


def keyword_impacts_step(s: str) -> tuple[str, ...]:
    """The statements of schema step 9 for schema ``s`` (quoted): the impact columns, filled
    from the records already stored at the current average, and the insert and update
    triggers' functions replaced by ones that keep them (deletes and ``TRUNCATE`` keep
    theirs)."""
    changed = (
        "FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE n.tsv <> o.tsv OR n.words <> o.words"
    )
    backfill = factor("cardinality(u.positions)", "m.words", "a.average")
    return (
        f"ALTER TABLE {s}.memory_keyword_terms ADD COLUMN impact float8 NOT NULL DEFAULT 0, "
        "ADD COLUMN reference float8 NOT NULL DEFAULT 1",
        f"""
        WITH a AS (SELECT {_AVERAGE} AS average FROM {s}.memory_keyword_totals),
        i AS (
            SELECT u.lexeme AS term, max({backfill}) AS impact
            FROM {s}.memories m, unnest(m.tsv) u, a GROUP BY u.lexeme
        )
        UPDATE {s}.memory_keyword_terms t SET impact = i.impact, reference = a.average
        FROM i, a WHERE t.term = i.term
        """,
        _counting(
            s,
            "keyword_inserted",
            "SELECT tsv, words, 1 AS sign FROM new_rows",
            "SELECT coalesce(sum(words), 0) FROM new_rows",
        ),
        _counting(
            s,
            "keyword_updated",
            f"SELECT n.tsv, n.words, 1 AS sign {changed} "
            f"UNION ALL SELECT o.tsv, o.words, -1 {changed}",
            f"SELECT coalesce(sum(n.words - o.words), 0) {changed}",
        ),
    )
