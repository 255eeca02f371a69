-- Each turn's running count: the sum of its thread's own counts (its first tokenizer's, the
-- `tokens` column) from the thread's first turn through this one, NULL while any of those turns
-- is not counted; the thread's row keeps the sum through its newest turn (0 with no turns, NULL
-- while one is not counted), which an append adds its turns' counts to. A tail read for a token
-- goal finds the turn that passes it in the index below, from the newest turn's running count,
-- where summing the newest turns' counts scanned each of them (`postgres._TAIL`: 0.25-0.3 ms of
-- the server's time at 8,000 tokens). The counts stored before this migration are summed now.
ALTER TABLE turns ADD COLUMN tokens_through bigint;
ALTER TABLE threads ADD COLUMN tokens_through bigint DEFAULT 0;
UPDATE turns SET tokens_through = x.through FROM (
    SELECT thread_pk, seq, sum(tokens) OVER w AS through,
           count(*) FILTER (WHERE tokens IS NULL) OVER w AS gaps
    FROM turns WINDOW w AS (PARTITION BY thread_pk ORDER BY seq)
) AS x WHERE turns.thread_pk = x.thread_pk AND turns.seq = x.seq AND x.gaps = 0;
UPDATE threads SET tokens_through = CASE WHEN turn_count = 0 THEN 0 ELSE (
    SELECT t.tokens_through FROM turns AS t WHERE t.thread_pk = threads.id AND t.seq = threads.turn_count
) END;
CREATE INDEX turns_by_running_count ON turns (thread_pk, tokens_through, seq)
    WHERE tokens_through IS NOT NULL;
