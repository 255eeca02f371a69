-- A turn whose message carries large files inline (base64 images, PDFs, recordings) keeps,
-- beside it, the message with those files named instead (`[image, attached earlier]`) and
-- the bytes of base64 they hold: a window reads those in place of the message, and the whole
-- row only for the newest files its request sends, so a load reads about what it sends
-- however many files the thread's window holds. NULL for every other turn, and for the turns
-- stored before this migration (their files are under the old limit of a message, 1 MiB).
ALTER TABLE turns ADD COLUMN shed TEXT;
ALTER TABLE turns ADD COLUMN shed_bytes INTEGER;
