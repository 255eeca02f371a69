-- The tools a response's chain loaded (the `tools` of its input's tool_search_output and
-- additional_tools items, of the searches the gateway ran for it, and of the responses it
-- continued; NULL: none), as a JSON list: continuing from the response offers them, as OpenAI
-- keeps a chain's loaded tools loaded.
ALTER TABLE responses ADD COLUMN carried_tools TEXT
