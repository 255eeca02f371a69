-- The Responses API's stored responses, and the metadata of threads read as conversations. A
-- response's items are turns of its thread: the row keeps where they are (the seqs of its input,
-- its output and its output's last turn) and the response object as it was returned (JSON text).
-- Both go with their thread (cascade) and a fork copies neither. A response id is the tenant's:
-- the same id in two tenants is two records.
CREATE TABLE responses (
    tenant_id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    thread_pk BIGINT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    input_seq INTEGER NOT NULL,
    output_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, response_id)
);
-- The cascade finds a thread's responses without reading the whole table.
CREATE INDEX responses_by_thread ON responses (thread_pk);
-- A conversation's metadata (a JSON object of strings); no row: {}.
CREATE TABLE conversation_metadata (
    thread_pk BIGINT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    metadata TEXT NOT NULL
)
;
-- A conversation awaiting its answer (its items end with the user's turn, or a call's
-- outputs), under a key of its user and newest turn: a session that adds the input to the
-- conversation and then sends the whole history to /v1/responses is found by it.
CREATE TABLE conversation_awaiting (
    thread_pk BIGINT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    awaiting_key TEXT NOT NULL
);
CREATE INDEX conversation_awaiting_by_key ON conversation_awaiting (tenant_id, awaiting_key)
