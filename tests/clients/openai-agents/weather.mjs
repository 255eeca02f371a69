// What the client scripts share (session.mjs, chain.mjs): the agent they run, with a weather
// tool, and the four questions they ask it (the first and the third call the tool).
import { Agent, tool } from '@openai/agents';
import { z } from 'zod';

const weather = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

export const agent = new Agent({
  name: 'weather',
  instructions: 'Be brief.',
  model: 'answer-model',
  tools: [weather],
});

export const questions = [
  'What is the weather in Lyon?',
  'My name is Ada.',
  'And the weather now?',
  'Thanks',
];
