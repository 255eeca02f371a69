-- Where each item a turn was stored with is, by the item's own id: a Responses request that
-- names no thread (a client that resends its history, the AI SDK's item references of its
-- stored answers) or names one and refers to another thread's item finds it in one indexed
-- read. The turn's `item` holds its items (`{"items": [...]}`); a trigger keeps the index as
-- turns are written, and the key's cascade as they are deleted (a stored turn is never
-- rewritten). The turns stored before this migration are indexed by it. An item whose text
-- holds U+0000 (the one escape a stored text may hold that PostgreSQL's JSON operators cannot
-- read) stays out of the index: a reference to it is found by reading its thread.
CREATE TABLE turn_items (
    thread_pk BIGINT NOT NULL,
    seq INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    PRIMARY KEY (thread_pk, seq, item_id),
    FOREIGN KEY (thread_pk, seq) REFERENCES turns (thread_pk, seq) ON DELETE CASCADE
);
CREATE INDEX turn_items_by_id ON turn_items (item_id);
CREATE FUNCTION workingmem_turn_items() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO turn_items (thread_pk, seq, item_id)
    SELECT DISTINCT NEW.thread_pk, NEW.seq, i ->> 'id'
    FROM json_array_elements(CASE WHEN json_typeof(NEW.item::json -> 'items') = 'array'
        THEN NEW.item::json -> 'items' END) AS i
    WHERE json_typeof(i -> 'id') = 'string'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER turns_items_indexed AFTER INSERT ON turns FOR EACH ROW
    WHEN (NEW.format = 'openai.responses' AND strpos(NEW.item, '\u0000') = 0)
    EXECUTE FUNCTION workingmem_turn_items();
INSERT INTO turn_items (thread_pk, seq, item_id)
SELECT DISTINCT t.thread_pk, t.seq, i ->> 'id'
FROM turns AS t, json_array_elements(CASE WHEN json_typeof(t.item::json -> 'items') = 'array'
    THEN t.item::json -> 'items' END) AS i
WHERE t.format = 'openai.responses' AND strpos(t.item, '\u0000') = 0
    AND json_typeof(i -> 'id') = 'string'
ON CONFLICT DO NOTHING;
