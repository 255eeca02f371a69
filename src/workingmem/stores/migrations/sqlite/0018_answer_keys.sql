-- A key of a response's answer (its user and what it says), kept for a response stored in a
-- thread found by how its input opened (NULL otherwise): a session that adds a run's items to
-- its conversation only after the model answered them finds that thread by its answer, and
-- the conversation takes its place (`workingmem.service.sessions`).
ALTER TABLE responses ADD COLUMN answer_key TEXT;
CREATE INDEX responses_by_answer_key ON responses (tenant_id, answer_key, created_at)
    WHERE answer_key IS NOT NULL
