-- Turns kept verbatim: the format a turn was given in and its original item (JSON text), beside
-- the chat-format view in `message` that counts, units and windows use. NULL item: the chat view
-- is the original; every turn stored before this migration is a plain chat message.
ALTER TABLE turns ADD COLUMN format TEXT NOT NULL DEFAULT 'openai.chat';
ALTER TABLE turns ADD COLUMN item TEXT;
