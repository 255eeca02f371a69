-- The web page's sessions: the login form's key opens one, its cookie carries the session's
-- token (never the key), only the token's SHA-256 is stored. Logging out deletes it; revoking
-- the key ends it (a session is valid only while its key is active).
CREATE TABLE page_sessions (
    token_hash TEXT PRIMARY KEY,
    key_id TEXT NOT NULL REFERENCES api_keys (key_id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
)
