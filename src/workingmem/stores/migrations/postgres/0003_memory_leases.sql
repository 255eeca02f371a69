-- Single flight for summary updates: one lease per thread, across workers; it expires, so a
-- crashed updater never blocks a thread for good.
CREATE TABLE memory_leases (
    thread_pk BIGINT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
