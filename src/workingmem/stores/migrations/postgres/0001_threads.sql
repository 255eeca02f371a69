-- Threads, their turns, per-tokenizer token counts, and the memory state with its history.
CREATE TABLE threads (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    user_id TEXT,
    turn_count INTEGER NOT NULL DEFAULT 0,
    last_unit_seq INTEGER NOT NULL DEFAULT 0,
    tokenizers TEXT NOT NULL DEFAULT '[]',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant_id, thread_id)
);
CREATE INDEX threads_by_tenant_updated ON threads (tenant_id, updated_at DESC, id DESC);
CREATE TABLE turns (
    thread_pk BIGINT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    unit_seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    user_id TEXT,
    message TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (thread_pk, seq)
);
CREATE TABLE turn_tokens (
    thread_pk BIGINT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    tokenizer TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (thread_pk, tokenizer, seq)
);
CREATE TABLE memory_states (
    thread_pk BIGINT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    summary TEXT NOT NULL,
    facts TEXT NOT NULL,
    turn_count INTEGER NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE memory_state_versions (
    thread_pk BIGINT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    summary TEXT NOT NULL,
    facts TEXT NOT NULL,
    turn_count INTEGER NOT NULL,
    reason TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (thread_pk, version)
);
