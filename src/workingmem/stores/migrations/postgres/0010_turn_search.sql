-- Full-text search over each turn's words (recall, `search_turns`): a tsvector of the chat
-- view's text parts and each tool call's name and arguments (English stemming), generated from
-- the stored message, so it is in step with every insert and delete of a turn by construction,
-- and a GIN index to find a word's turns. The text the vector is made of is one function.
CREATE FUNCTION workingmem_words(m JSONB) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT concat_ws(' ',
        CASE jsonb_typeof(m -> 'content')
            WHEN 'string' THEN m ->> 'content'
            WHEN 'array' THEN (
                SELECT string_agg(p ->> 'text', ' ') FROM jsonb_array_elements(m -> 'content') AS p
                WHERE p ->> 'type' = 'text'
            )
        END,
        (
            SELECT string_agg(concat_ws(' ', c -> 'function' ->> 'name', c -> 'function' ->> 'arguments'), ' ')
            FROM jsonb_array_elements(
                CASE jsonb_typeof(m -> 'tool_calls') WHEN 'array' THEN m -> 'tool_calls' ELSE '[]'::jsonb END
            ) AS c
        )
    )
$$;
-- A stored message is JSON text that jsonb may refuse (a NUL character, which PostgreSQL's text
-- cannot hold): its words are then read without the NULs, or there are none. Never an error:
-- the turn is stored whatever its words.
CREATE FUNCTION workingmem_turn_words(message TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN workingmem_words(message::jsonb);
EXCEPTION WHEN OTHERS THEN
    BEGIN
        RETURN workingmem_words(replace(message, '\u0000', '')::jsonb);
    EXCEPTION WHEN OTHERS THEN
        RETURN '';
    END;
END
$$;
ALTER TABLE turns ADD COLUMN search TSVECTOR
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, workingmem_turn_words(message))) STORED;
CREATE INDEX turns_search ON turns USING GIN (search);
-- A unit's turns by its first turn's seq: recall gives a hit's whole unit (a call, its results).
CREATE INDEX turns_by_unit ON turns (thread_pk, unit_seq)
