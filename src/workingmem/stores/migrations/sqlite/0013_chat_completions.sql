-- Stored chat completions (`store: true` on /v1/chat/completions): the completion object as it
-- was returned, the request's messages as the client sent them (the records answer OpenAI's
-- `messages.list` with them, whatever the thread became since), the model and the metadata, by
-- which a tenant's list is filtered (one row a pair in chat_completion_metadata). A record goes
-- with its thread (cascade: forgetting a thread forgets what its completions said), and a fork
-- copies none. `id` is the list's order: the order they were stored in.
CREATE TABLE chat_completions (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    completion_id TEXT NOT NULL,
    thread_pk INTEGER NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    metadata TEXT NOT NULL,
    body TEXT NOT NULL,
    messages TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, completion_id)
);
CREATE INDEX chat_completions_by_thread ON chat_completions (thread_pk);
CREATE INDEX chat_completions_by_tenant ON chat_completions (tenant_id, id);
CREATE INDEX chat_completions_by_model ON chat_completions (tenant_id, model, id);
CREATE TABLE chat_completion_metadata (
    completion_pk INTEGER NOT NULL REFERENCES chat_completions (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (completion_pk, key)
) WITHOUT ROWID
