-- A turn's words enter the full-text index when a search first reaches the turn, not in the
-- transaction that appends it: FTS5 writes a new segment at every commit that touched it, more
-- than half an append's work, while a search only ever reads a thread's older turns (recall
-- reads those before the window). A new turn is listed in `unindexed_turns`; a search whose
-- range holds a listed turn first indexes the thread's listed turns, in one transaction, and
-- empties its list (`SQLiteDialect.index_turns`). Every turn stored before this migration is
-- in the index already. A turn leaves the index, or changes in it, only if it is there.
CREATE TABLE unindexed_turns (
    thread_pk INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (thread_pk, seq)
) WITHOUT ROWID;
DROP TRIGGER turn_search_insert;
DROP TRIGGER turn_search_delete;
DROP TRIGGER turn_search_update;
DROP TRIGGER turn_search_updated;
CREATE TRIGGER turn_search_insert AFTER INSERT ON turns BEGIN INSERT INTO unindexed_turns (thread_pk, seq) VALUES (new.thread_pk, new.seq); END;
CREATE TRIGGER turn_search_delete BEFORE DELETE ON turns WHEN NOT EXISTS (SELECT 1 FROM unindexed_turns WHERE thread_pk = old.thread_pk AND seq = old.seq) BEGIN INSERT INTO turn_search (turn_search, rowid, words) SELECT 'delete', doc, words FROM turn_words WHERE thread_pk = old.thread_pk AND seq = old.seq; END;
CREATE TRIGGER turn_search_deleted AFTER DELETE ON turns BEGIN DELETE FROM unindexed_turns WHERE thread_pk = old.thread_pk AND seq = old.seq; END;
CREATE TRIGGER turn_search_update BEFORE UPDATE OF message ON turns WHEN NOT EXISTS (SELECT 1 FROM unindexed_turns WHERE thread_pk = old.thread_pk AND seq = old.seq) BEGIN INSERT INTO turn_search (turn_search, rowid, words) SELECT 'delete', doc, words FROM turn_words WHERE thread_pk = old.thread_pk AND seq = old.seq; END;
CREATE TRIGGER turn_search_updated AFTER UPDATE OF message ON turns WHEN NOT EXISTS (SELECT 1 FROM unindexed_turns WHERE thread_pk = new.thread_pk AND seq = new.seq) BEGIN INSERT INTO turn_search (rowid, words) SELECT doc, words FROM turn_words WHERE thread_pk = new.thread_pk AND seq = new.seq; END;
