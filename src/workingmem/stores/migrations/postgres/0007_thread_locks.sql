-- One ask at a time per thread, across processes: the lock is held from the user turn's append
-- to the answer's (renewed while the answer is made), so every answer is built from the thread
-- with its own question newest and is stored right after it. Keyed by the thread's ids: the
-- thread row may not exist yet.
CREATE TABLE thread_locks (
    tenant_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, thread_id)
)
