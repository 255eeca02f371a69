-- Single flight for summary updates: one lease per thread, across processes; it expires, so a
-- crashed updater never blocks a thread for good.
CREATE TABLE memory_leases (
    thread_pk INTEGER PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
