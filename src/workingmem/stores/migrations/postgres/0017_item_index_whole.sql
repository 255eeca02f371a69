-- The item index holds every Responses turn's items, those whose text holds U+0000 too
-- (migration 16 left them out: PostgreSQL's JSON operators refuse the escape `\u0000`, and a
-- reference to such an item had to read its thread back). The escape is read as a space
-- (`\u0020`, as long, as valid JSON wherever it stands): only an id holding U+0000 would read
-- differently, and no id may hold one (`check_id`).
CREATE OR REPLACE FUNCTION workingmem_turn_items() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    items json := replace(NEW.item, '\u0000', '\u0020')::json -> 'items';
BEGIN
    INSERT INTO turn_items (thread_pk, seq, item_id)
    SELECT NEW.thread_pk, NEW.seq, i ->> 'id'
    FROM json_array_elements(CASE WHEN json_typeof(items) = 'array' THEN items END) AS i
    WHERE json_typeof(i -> 'id') = 'string'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
DROP TRIGGER turns_items_indexed ON turns;
CREATE TRIGGER turns_items_indexed AFTER INSERT ON turns FOR EACH ROW
    WHEN (NEW.format = 'openai.responses') EXECUTE FUNCTION workingmem_turn_items();
INSERT INTO turn_items (thread_pk, seq, item_id)
SELECT t.thread_pk, t.seq, i ->> 'id'
FROM turns AS t, json_array_elements(
    CASE WHEN json_typeof(replace(t.item, '\u0000', '\u0020')::json -> 'items') = 'array'
        THEN replace(t.item, '\u0000', '\u0020')::json -> 'items' END
) AS i
WHERE t.format = 'openai.responses' AND strpos(t.item, '\u0000') > 0
    AND json_typeof(i -> 'id') = 'string'
ON CONFLICT DO NOTHING;
