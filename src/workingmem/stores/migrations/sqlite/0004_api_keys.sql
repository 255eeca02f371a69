-- API keys of the service: only the SHA-256 of each secret is stored, with its first
-- characters to recognise it. Keys are revoked (revoked_at), never deleted.
CREATE TABLE api_keys (
    id INTEGER PRIMARY KEY,
    key_id TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    label TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, id);
