"""PostgreSQL's own statements, beside the shared ones (`_sql_reads`, `_sql_threads`): the
tail read that takes the thread's lock in the same statement, an append of known turns in one
statement, inserts of many rows as one JSON parameter, and the full-text search.

    sql, params = native("INSERT INTO turns (a, b) VALUES (?, ?)", rows)

`PostgresDialect` sends them; nothing here talks to the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..types import CHAT_ORIGINAL_KEY
from . import _rows
from ._dialect import UNCOUNTED_PAGE, KnownAppend, Row, TailRead
from ._sql_reads import STATE_COLUMNS_OF_S, THREAD_COLUMNS_OF_TH, tail_columns

__all__ = [
    "APPENDS",
    "INDEX",
    "OPEN",
    "SEARCH",
    "TAIL",
    "Params",
    "batched",
    "json_rows",
    "known_params",
    "native",
    "placeholders",
    "tail_params",
    "tail_rows",
]

SEARCH = """
WITH terms AS (
    SELECT DISTINCT lexeme FROM unnest(to_tsvector('english'::regconfig, ?))
), matched AS (
    SELECT t.seq, w.lexeme, length(t.search)::float8 AS words,
           coalesce(array_length(w.positions, 1), 1)::float8 AS tf
    FROM turns AS t CROSS JOIN LATERAL unnest(t.search) AS w
    WHERE t.thread_pk = ? AND t.seq < ?
      AND t.search @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM terms)
      AND w.lexeme IN (SELECT lexeme FROM terms)
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM matched GROUP BY lexeme
), mean AS (
    SELECT greatest(avg(words), 1.0) AS words FROM matched
)
SELECT m.seq FROM matched AS m JOIN df USING (lexeme) CROSS JOIN mean
GROUP BY m.seq
ORDER BY sum(
    ln(1.0 + (? - df.n + 0.5) / (df.n + 0.5))
    * m.tf * 2.2 / (m.tf + 1.2 * (0.25 + 0.75 * m.words / mean.words))
) DESC, m.seq DESC
LIMIT ?
"""
"""A thread's turns by BM25 (k1 1.2, b 0.75) over the tsvector's lexemes (migration 0010):
one scan of the GIN index finds the turns that hold any of the words, and each found turn's
lexemes are read once, for the words' counts in it (a scan and a lexeme lookup per word cost
1.5-7x as much, the most on a table without statistics yet). A word's rarity is counted among
the thread's turns searched, a turn's length in lexemes against the matched turns' mean."""
INDEX = (
    "UPDATE turns SET search = to_tsvector('english'::regconfig, workingmem_turn_words(message)) "
    "WHERE thread_pk = ? AND seq < ? AND search IS NULL"
)
"""The vectors of the turns a search reaches that have none yet (migration 0012)."""
_STATE_COLUMNS = [column.removeprefix("s.") for column in STATE_COLUMNS_OF_S.split(", ")]
_TAIL_COLUMNS = [
    *(column.removeprefix("th.") for column in THREAD_COLUMNS_OF_TH.split(", ")),
    *(f"state_{column}" for column in _STATE_COLUMNS),
]
"""The thread's columns as `TAIL` reads them (`th`: the thread row and its memory state), in
the order of the row `Dialect.read_tail` returns."""
_STATE_AS_TH = ", ".join(f"s.{column} AS state_{column}" for column in _STATE_COLUMNS)
_TAIL_THREAD = ", ".join(f"th.{column}" for column in _TAIL_COLUMNS)
_TAIL_MOMENTS = tuple(i for i, column in enumerate(_TAIL_COLUMNS) if column.endswith("_at"))
"""The timestamps among them, which travel in JSON as ISO 8601 text."""
_TAIL_TURN = tail_columns(
    "t.",
    """CASE WHEN (SELECT own FROM top) THEN t.tokens
         ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = t.thread_pk
               AND k.tokenizer = %(tokenizer)s AND k.seq = t.seq) END""",
    f"(t.item::json -> '{CHAT_ORIGINAL_KEY}')::text",
)
"""A tail row's columns after its seqs (`tail_columns`)."""
TAIL = f"""
WITH th AS (SELECT {THREAD_COLUMNS_OF_TH}, {_STATE_AS_TH}
            FROM threads AS th LEFT JOIN memory_states AS s ON s.thread_pk = th.id
            WHERE th.tenant_id = %(tenant_id)s AND th.thread_id = %(thread_id)s),
top AS (SELECT id AS pk, least(turn_count, coalesce(%(before_seq)s::bigint - 1, turn_count)) AS seq,
               coalesce(tokenizers::json ->> 0 = %(tokenizer)s, false) AS own
        FROM th),
reach AS (SELECT (SELECT u.tokens_through FROM turns AS u WHERE u.thread_pk = top.pk
                   AND u.seq = top.seq) - %(tokens)s::bigint AS goal
          FROM top WHERE top.own),
passed AS (
  SELECT u.unit_seq FROM turns AS u
  WHERE u.thread_pk = (SELECT pk FROM top) AND u.tokens_through >= (SELECT goal FROM reach)
    AND u.seq <= (SELECT seq FROM top)
  ORDER BY u.tokens_through, u.seq LIMIT 1),
scan AS (
  SELECT u.seq, u.unit_seq, CASE WHEN (SELECT own FROM top) THEN u.tokens
    ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = u.thread_pk
          AND k.tokenizer = %(tokenizer)s AND k.seq = u.seq) END AS tokens
  FROM turns AS u
  WHERE %(tokens)s::bigint IS NOT NULL AND (SELECT goal FROM reach) IS NULL
    AND u.thread_pk = (SELECT pk FROM top)
    AND u.seq <= (SELECT seq FROM top) AND u.seq > (SELECT seq FROM top) - %(scan)s
  ORDER BY u.seq DESC LIMIT %(scan)s),
walk AS (
  SELECT seq, unit_seq, tokens,
         coalesce(sum(tokens) OVER newest, 0) - coalesce(tokens, 0) AS newer,
         count(*) FILTER (WHERE tokens IS NULL) OVER newest AS uncounted
  FROM scan WINDOW newest AS (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING)),
stop AS (
  SELECT min(unit_seq) FILTER (WHERE uncounted = 0 AND newer <= %(tokens)s::bigint
                               AND newer + tokens > %(tokens)s::bigint) AS passed,
         min(seq) FILTER (WHERE uncounted BETWEEN 1 AND {UNCOUNTED_PAGE}) AS uncounted,
         min(seq) AS scanned
  FROM walk),
span AS (SELECT CASE WHEN %(tokens)s::bigint IS NULL THEN top.seq - %(limit)s + 1
                     WHEN (SELECT goal FROM reach) IS NOT NULL
                     THEN coalesce((SELECT unit_seq FROM passed), top.seq + 1)
                     ELSE coalesce(stop.passed, stop.uncounted, stop.scanned, top.seq + 1) END
                AS first
         FROM top, stop)
SELECT NULL::integer AS seq, NULL::integer, json_build_array({_TAIL_THREAD})::text, NULL::integer,
       NULL::text, NULL::integer
FROM th
UNION ALL
SELECT t.seq, t.unit_seq, {_TAIL_TURN}
FROM (SELECT u.thread_pk, u.seq, u.unit_seq, u.message, u.tokens, u.format, u.item, u.shed,
             u.shed_bytes FROM turns AS u
      WHERE u.thread_pk = (SELECT pk FROM top) AND u.seq <= (SELECT seq FROM top)
        AND u.seq >= (SELECT first FROM span)
      ORDER BY u.seq DESC LIMIT %(limit)s) AS t
ORDER BY seq DESC NULLS FIRST
"""
"""The thread row with its memory state, then its newest turns, in one statement: the thread's
columns once, as a JSON array in the message column of the first row, so that a turn's row holds
its own columns and none of the thread's (14 empty ones a row cost the server and the driver
about a third more than the turns' own); a turn's last column is its item when it was stored in
chat's own format, or the one its item carries (`_CHAT_ORIGINAL`). With a token goal the turns
are read from the head of the unit of the first turn that passes the goal (a window takes units
whole). With the thread's own tokenizer, and every turn counted, that turn is found in one probe
of the running counts' index (migration 13: the oldest whose running count is at least the
newest's less the goal); else the newest counts (another tokenizer's, or some not made yet) are
summed newest first over a bounded scan (bounded by seq, not only by LIMIT, so that no plan
reads the whole thread when the statistics are stale), where a turn not counted yet leaves the
goal undecided and `UNCOUNTED_PAGE` turns from it are read for the caller to count."""
_MOVE_ON = """
  UPDATE threads SET turn_count = turn_count + %(count)s,
                     last_unit_seq = turn_count + %(last_unit)s, updated_at = %(now)s,
                     tokens_through = tokens_through + %(total)s::bigint
  WHERE tenant_id = %(tenant_id)s AND thread_id = %(thread_id)s
    AND turn_count = %(turn_count)s AND tokenizers = %(tokenizers)s"""
_WRITE_TURNS = """
own AS (
  INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, created_at, format, item,
                     tokens, tokens_through, shed, shed_bytes)
  SELECT th.id, th.base + (v->>0)::integer, th.base + (v->>1)::integer, v->>2, %(user_id)s::text,
         v->>3, %(now)s, v->>4, v->>5, (v->>6)::integer, th.before + (v->>9)::bigint, v->>7,
         (v->>8)::integer
  FROM th, jsonb_array_elements(%(turns)s::jsonb) AS v),
others AS (
  INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens)
  SELECT th.id, o->>0, th.base + (o->>1)::integer, (o->>2)::integer
  FROM th, jsonb_array_elements(%(others)s::jsonb) AS o)"""
"""The turns, and the other tokenizers' counts, each a JSON array of rows (`json_rows`)."""
_RELEASE = """,
released AS (
  DELETE FROM thread_locks WHERE tenant_id = %(tenant_id)s AND thread_id = %(thread_id)s
    AND owner = %(release)s AND EXISTS (SELECT FROM th))"""
"""`KnownAppend.release`: the ask lock given back when the turns are written."""
_APPEND_KNOWN = f"""
WITH th AS ({_MOVE_ON}
  RETURNING id, turn_count - %(count)s AS base, tokens_through - %(total)s::bigint AS before),
{_WRITE_TURNS}"""
"""`PostgresDialect.append_known`: the thread's row locked and moved on by its UPDATE (a
concurrent writer waits, then this one finds the row it left, and writes nothing when the turn
count it expects is gone), the turns numbered after it, in one statement: atomic on its own,
one round trip."""


def _create_and_append(held: str = "TRUE") -> str:
    """`_APPEND_KNOWN` for a thread last seen missing or empty: the thread made with its turns,
    or, when it exists, moved on as there (an empty one), in one statement; both only where
    `held` (a condition) is true. A thread another writer made after this statement's
    snapshot is neither made nor moved: nothing is written."""
    return f"""
WITH made AS (
  INSERT INTO threads (tenant_id, thread_id, user_id, created_at, updated_at, tokenizers,
                       turn_count, last_unit_seq, tokens_through)
  SELECT %(tenant_id)s, %(thread_id)s, %(user_id)s, %(now)s, %(now)s, %(tokenizers)s,
         %(count)s, %(last_unit)s, %(total)s::bigint
  WHERE {held}
  ON CONFLICT (tenant_id, thread_id) DO NOTHING
  RETURNING id, 0 AS base, 0::bigint AS before),
moved AS ({_MOVE_ON} AND NOT EXISTS (SELECT FROM made) AND {held}
  RETURNING id, turn_count - %(count)s AS base, tokens_through - %(total)s::bigint AS before),
th AS (SELECT id, base, before FROM made UNION ALL SELECT id, base, before FROM moved),
{_WRITE_TURNS}"""


_CREATE_AND_APPEND = _create_and_append()
APPENDS = {
    (create, release): (_CREATE_AND_APPEND if create else _APPEND_KNOWN)
    + (_RELEASE if release else "")
    + "\nSELECT base FROM th"
    for create in (False, True)
    for release in (False, True)
}
"""The statement of a `KnownAppend`, by whether it creates the thread and releases a lock."""
OPEN = (
    _create_and_append(
        "EXISTS (SELECT FROM thread_locks WHERE tenant_id = %(tenant_id)s"
        " AND thread_id = %(thread_id)s AND owner = %(held)s)"
    )
    + "\nSELECT base FROM th"
)
"""An ask lock's opening (`Dialect.claim_and_read_tail`): a thread's first turns, written by
the ask that holds its lock (`KnownAppend.held`), in the lock's own pipeline: when the claim
failed, the lock's row is another's and nothing is written."""
_SCAN_TOKENS_PER_TURN = 20
"""The token goal's count scan is bounded at goal / this + 32 turns (LoCoMo turns average 35;
a thread of shorter turns costs one more read, never a wrong window)."""


@lru_cache(maxsize=256)
def placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


_INSERT = re.compile(r"INSERT INTO (\w+) \(([\w, ]+)\) VALUES \(([?, ]+)\)(.*)", re.DOTALL)
"""An INSERT of one row of parameters: its rows can travel as one statement of JSON."""
_COLUMN_TYPES = {
    "thread_pk": "bigint",
    "completion_pk": "bigint",
    "created_at": "timestamptz",
    "tokens_through": "bigint",
} | dict.fromkeys(("seq", "unit_seq", "tokens", "version", "turn_count", "shed_bytes"), "integer")
"""The type of a batched column (any other is text)."""


@lru_cache(maxsize=64)
def batched(sql: str) -> str | None:
    """An INSERT of one row as the INSERT of many from a JSON array of rows (`json_rows`):
    one statement whose text does not grow with its rows, so the server parses it once and
    psycopg adapts one text instead of thousands of parameters; None for another statement."""
    found = _INSERT.fullmatch(sql)
    if found is None:
        return None
    table, columns, _, tail = found.groups()
    values = ", ".join(
        _element(index, _COLUMN_TYPES.get(column.strip()))
        for index, column in enumerate(columns.split(","))
    )
    return (
        f"INSERT INTO {table} ({columns}) SELECT {values} "
        f"FROM jsonb_array_elements(%s::jsonb) AS v{tail}"
    )


def _element(index: int, type_: str | None) -> str:
    """Column `index` of a row of `json_rows`, as `type_` (None: text)."""
    return f"(v->>{index})::{type_}" if type_ else f"v->>{index}"


def json_rows(rows: Iterable[Sequence[object]]) -> str:
    """Rows of parameters as one JSON array, a parameter whose adaptation costs psycopg one
    text: an array a column cost it 26 µs a statement of appended turns (6 µs for the whole
    statement now). Read as ``jsonb``, parsed once: a ``json`` value is parsed again by every
    ``->>`` (a batch of 100 turns took 4.1 ms, as against 3.4 with arrays and with ``jsonb``).
    Timestamps travel in ISO 8601, as PostgreSQL reads them."""
    return json.dumps(list(rows), ensure_ascii=False, default=_iso)


def _iso(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not a parameter of a batched row: {value!r}")  # pragma: no cover


Params = Sequence[object] | Mapping[str, object]
"""A statement's parameters: for ``?`` placeholders, or by name for psycopg's own
``%(name)s`` (this module's own statements)."""


def native(sql: str, params: Params) -> tuple[str, Params | None]:
    """The store's ``?`` placeholders as psycopg's ``%s`` (its statements with parameters
    have no other ``?`` or ``%``); a statement without parameters, or with named ones, is
    sent as it is."""
    if not params:
        return sql, None
    if isinstance(params, Mapping):
        return sql, params
    return placeholders(sql), params


def tail_params(read: TailRead) -> dict[str, object]:
    """`TAIL`'s parameters for `read`."""
    scan = read.limit
    if read.tokens is not None:
        scan = min(read.limit, read.tokens // _SCAN_TOKENS_PER_TURN + 32)
    return {
        "tenant_id": read.tenant_id,
        "thread_id": read.thread_id,
        "before_seq": read.before_seq,
        "tokenizer": read.tokenizer_key,
        "tokens": read.tokens,
        "limit": read.limit,
        "scan": scan,
    }


def tail_rows(rows: list[Row]) -> tuple[Row, list[Row]] | None:
    """`TAIL`'s rows as `Dialect.read_tail` returns them: the thread's row from its JSON
    array (its timestamps in ISO 8601, as PostgreSQL writes them in JSON), then the turns'."""
    if not rows:
        return None
    thread: list[Any] = json.loads(rows[0][2])
    for index in _TAIL_MOMENTS:
        if thread[index] is not None:
            thread[index] = datetime.fromisoformat(thread[index])
    return tuple(thread), rows[1:]


def known_params(write: KnownAppend) -> dict[str, Any]:
    """The parameters of `write`'s statement (`APPENDS`, `OPEN`): its turns, each with its
    running count, and the other tokenizers' counts, as JSON arrays of rows."""
    through, total = _rows.running_counts([turn[6] for turn in write.turns])
    return {
        "tenant_id": write.tenant_id,
        "thread_id": write.thread_id,
        "turn_count": write.turn_count,
        "tokenizers": write.tokenizers,
        "user_id": write.user_id,
        "now": write.stamp,
        "count": len(write.turns),
        "last_unit": write.turns[-1][1],
        "release": write.release,
        "held": write.held,
        "total": total,
        "turns": json_rows(
            (*turn, count) for turn, count in zip(write.turns, through, strict=True)
        ),
        "others": json_rows(write.others),
    }
