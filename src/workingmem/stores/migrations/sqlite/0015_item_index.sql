-- Where each item a turn was stored with is, by the item's own id: a Responses request that
-- names no thread (a client that resends its history, the AI SDK's item references of its
-- stored answers) or names one and refers to another thread's item finds it in one indexed
-- read. The turn's `item` holds its items (`{"items": [...]}`); a trigger keeps the index as
-- turns are written, and the key's cascade as they are deleted (a stored turn is never
-- rewritten). The turns stored before this migration are indexed by it.
CREATE TABLE turn_items (
    thread_pk INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    PRIMARY KEY (thread_pk, seq, item_id),
    FOREIGN KEY (thread_pk, seq) REFERENCES turns (thread_pk, seq) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX turn_items_by_id ON turn_items (item_id);
CREATE TRIGGER turn_items_insert AFTER INSERT ON turns WHEN new.format = 'openai.responses' AND json_type(new.item, '$.items') = 'array' BEGIN INSERT OR IGNORE INTO turn_items (thread_pk, seq, item_id) SELECT new.thread_pk, new.seq, json_extract(new.item, '$.items[' || key || '].id') FROM json_each(new.item, '$.items') WHERE json_type(new.item, '$.items[' || key || '].id') = 'text'; END;
INSERT OR IGNORE INTO turn_items (thread_pk, seq, item_id)
SELECT t.thread_pk, t.seq, json_extract(t.item, '$.items[' || i.key || '].id')
FROM turns AS t, json_each(t.item, '$.items') AS i
WHERE t.format = 'openai.responses' AND json_type(t.item, '$.items') = 'array'
    AND json_type(t.item, '$.items[' || i.key || '].id') = 'text';
