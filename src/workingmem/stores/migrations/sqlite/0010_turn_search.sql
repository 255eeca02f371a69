-- Full-text search over each turn's words (recall, `search_turns`): an FTS5 index that keeps no
-- copy of the text (contentless), English stemming, BM25 ranking. A turn's document id is
-- thread_pk * 2^32 + seq, so one thread's turns are one range of ids: a search is scoped to its
-- thread by that range, and a turn's entry is found again to be removed. The words are the
-- chat view's text parts, and each tool call's name and arguments. Triggers keep the index in
-- step with every insert and delete of a turn (an append, a pop, a replace, a fork, a thread's
-- deletion by cascade), in the same transaction; a removal gives the words it indexed, which
-- the same expression of the stored message gives again.
CREATE VIRTUAL TABLE turn_search USING fts5 (
    words, content = '', tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIEW turn_words (doc, thread_pk, seq, words) AS
SELECT thread_pk * 4294967296 + seq, thread_pk, seq,
    coalesce(CASE json_type(m, '$.content')
        WHEN 'text' THEN json_extract(m, '$.content')
        WHEN 'array' THEN (
            SELECT group_concat(json_extract(p.value, '$.text'), ' ')
            FROM json_each(m, '$.content') AS p WHERE json_extract(p.value, '$.type') = 'text'
        )
    END, '') || coalesce((
        SELECT group_concat(' ' || coalesce(json_extract(c.value, '$.function.name'), '') || ' '
            || coalesce(json_extract(c.value, '$.function.arguments'), ''), '')
        FROM json_each(m, '$.tool_calls') AS c
    ), '')
FROM (
    -- SQLite's JSON functions end a string at a NUL character: its escapes go first, when the
    -- JSON stays valid without them (else the turn has no words; it is stored all the same)
    SELECT thread_pk, seq, CASE
        WHEN instr(message, '\u0000') = 0 THEN message
        WHEN json_valid(replace(message, '\u0000', ' ')) THEN replace(message, '\u0000', ' ')
        ELSE '{}'
    END AS m FROM turns
);
CREATE TRIGGER turn_search_insert AFTER INSERT ON turns BEGIN INSERT INTO turn_search (rowid, words) SELECT doc, words FROM turn_words WHERE thread_pk = new.thread_pk AND seq = new.seq; END;
CREATE TRIGGER turn_search_delete BEFORE DELETE ON turns BEGIN INSERT INTO turn_search (turn_search, rowid, words) SELECT 'delete', doc, words FROM turn_words WHERE thread_pk = old.thread_pk AND seq = old.seq; END;
CREATE TRIGGER turn_search_update BEFORE UPDATE OF message ON turns BEGIN INSERT INTO turn_search (turn_search, rowid, words) SELECT 'delete', doc, words FROM turn_words WHERE thread_pk = old.thread_pk AND seq = old.seq; END;
CREATE TRIGGER turn_search_updated AFTER UPDATE OF message ON turns BEGIN INSERT INTO turn_search (rowid, words) SELECT doc, words FROM turn_words WHERE thread_pk = new.thread_pk AND seq = new.seq; END;
INSERT INTO turn_search (rowid, words) SELECT doc, words FROM turn_words;
-- A unit's turns by its first turn's seq: recall gives a hit's whole unit (a call, its results).
CREATE INDEX turns_by_unit ON turns (thread_pk, unit_seq)
