-- Each turn's running count: the sum of its thread's own counts (its first tokenizer's, the
-- `tokens` column) from the thread's first turn through this one, NULL while any of those turns
-- is not counted; the thread's row keeps the sum through its newest turn (0 with no turns, NULL
-- while one is not counted), which an append adds its turns' counts to. A read for a token goal
-- then finds where the goal is passed from two running counts, where summing the newest turns'
-- counts costs a scan of each (PostgreSQL's tail read, `postgres._TAIL`). The counts stored
-- before this migration are summed now.
ALTER TABLE turns ADD COLUMN tokens_through INTEGER;
ALTER TABLE threads ADD COLUMN tokens_through INTEGER DEFAULT 0;
UPDATE turns SET tokens_through = x.through FROM (
    SELECT thread_pk, seq, sum(tokens) OVER w AS through, sum(tokens IS NULL) OVER w AS gaps
    FROM turns WINDOW w AS (PARTITION BY thread_pk ORDER BY seq)
) AS x WHERE turns.thread_pk = x.thread_pk AND turns.seq = x.seq AND x.gaps = 0;
UPDATE threads SET tokens_through = CASE WHEN turn_count = 0 THEN 0 ELSE (
    SELECT t.tokens_through FROM turns AS t WHERE t.thread_pk = threads.id AND t.seq = threads.turn_count
) END;
