-- A turn's words enter recall's index when a search first reaches the turn, not in the append,
-- as on SQLite (its migration 11): the vector and its GIN entries cost an append more than all
-- the rest of it (a batch of 100 LoCoMo turns: 7.7-10.2 ms with the generated column, 4.0-4.7
-- without), while a search only ever reads a thread's older turns (recall reads those before
-- the window). The column stops being generated and keeps every vector computed so far; a new
-- turn's is NULL until a search whose range holds it computes it, in the same trip and the same
-- implicit transaction as the search, before it (`PostgresDialect.search_hits`).
ALTER TABLE turns ALTER COLUMN search DROP EXPRESSION;
-- The turns a search must index first, found without reading the indexed ones.
CREATE INDEX turns_unindexed ON turns (thread_pk, seq) WHERE search IS NULL;
-- A turn whose message changes leaves the index until a search reaches it again (no statement
-- changes a stored message today: this keeps the vector true to the message by construction).
CREATE FUNCTION workingmem_turn_unindexed() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    NEW.search := NULL;
    RETURN NEW;
END
$$;
CREATE TRIGGER turns_message_changed BEFORE UPDATE OF message ON turns FOR EACH ROW
    WHEN (OLD.message IS DISTINCT FROM NEW.message) EXECUTE FUNCTION workingmem_turn_unindexed();
