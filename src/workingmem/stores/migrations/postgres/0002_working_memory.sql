-- Agent-editable working memory (spec 003): one current document per (tenant, scope, owner),
-- its version for compare-and-set, and every kept version (the history, for roll back).
CREATE TABLE working_memory (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('conversation', 'user')),
    owner_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    content TEXT,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant_id, scope, owner_id)
);
CREATE TABLE working_memory_versions (
    document_pk BIGINT NOT NULL REFERENCES working_memory (id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    content TEXT,
    reason TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (document_pk, version)
);
