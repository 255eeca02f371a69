-- The system and developer messages a response's input opened with, and those of the responses
-- it continued (NULL: none). The gateway reads them as the call's instructions, not as turns;
-- continuing from the response carries them over, as OpenAI carries an input's items. A JSON
-- string, as every text of a turn is stored.
ALTER TABLE responses ADD COLUMN carried_instructions TEXT
