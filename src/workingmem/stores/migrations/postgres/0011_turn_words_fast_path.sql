-- A turn's words without a subtransaction when its JSON cannot fail to read: an EXCEPTION block
-- opens a subtransaction on every call, which cost more than the words and their vector
-- together (an append of 100 LoCoMo turns: 13-15 ms with the block, 6-7 ms without). jsonb
-- refuses some JSON that is valid: the escapes \u0000 and a lone surrogate, a number beyond
-- numeric's range (an exponent of 6 digits, or more than 16,383 digits), nesting past the
-- server's stack. A message with none of what leads there (no \u at all, no exponent of 6
-- digits, shorter than 16,384 characters, fewer than 1,000 brackets) is read directly; any
-- other as before, where a failure is caught. The words are the same either way, so the
-- vectors stored before stay right.
CREATE OR REPLACE FUNCTION workingmem_turn_words(message TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF length(message) < 16384
        AND strpos(message, '\u') = 0
        AND message !~ '[eE][-+]?[0-9]{6}'
        AND length(message) - length(translate(message, '[{', '')) < 1000
    THEN
        RETURN workingmem_words(message::jsonb);
    END IF;
    BEGIN
        RETURN workingmem_words(message::jsonb);
    EXCEPTION WHEN OTHERS THEN
        BEGIN
            RETURN workingmem_words(replace(message, '\u0000', '')::jsonb);
        EXCEPTION WHEN OTHERS THEN
            RETURN '';
        END;
    END;
END
$$;
