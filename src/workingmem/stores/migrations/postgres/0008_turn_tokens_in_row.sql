-- Each turn's count with its thread's first tokenizer (the model it is read for, nearly always
-- the only one) in the turn's own row: a window read sums the counts as it walks the turns, with
-- no lookup per turn. Other tokenizers' counts stay in turn_tokens. NULL: not counted yet. The
-- counts stored before this migration move in.
ALTER TABLE turns ADD COLUMN tokens INTEGER;
UPDATE turns SET tokens = k.tokens FROM turn_tokens AS k, threads AS th
WHERE th.id = turns.thread_pk AND k.thread_pk = turns.thread_pk AND k.seq = turns.seq
AND k.tokenizer = th.tokenizers::json ->> 0;
DELETE FROM turn_tokens AS k USING threads AS th
WHERE th.id = k.thread_pk AND k.tokenizer = th.tokenizers::json ->> 0
