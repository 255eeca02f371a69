// The AI SDK through the gateway as an app uses it (tests/service/test_ai_sdk.py): the app
// keeps the conversation and resends it whole on every call, with no thread id; the SDK runs
// the app's tool between the steps of an answer; the last answer is streamed. The SDK's
// default OpenAI model speaks the Responses API (and refers to the answers it was given by
// their ids); `chat` speaks Chat Completions, `anthropic` (the Anthropic provider) Messages.
//
//   node conversation.mjs <base URL> <API key> responses|chat|anthropic
//
// Prints {"answers": [...]} as JSON.
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

globalThis.AI_SDK_LOG_WARNINGS = false; // stdout is the JSON (the SDK warns of the unknown model)
const [baseURL, apiKey, api] = process.argv.slice(2);
const provider = createOpenAI({ baseURL, apiKey });
const model =
  api === 'anthropic'
    ? createAnthropic({ baseURL, apiKey })('answer-model')
    : api === 'chat'
      ? provider.chat('answer-model')
      : provider('answer-model');
const weather = tool({
  description: 'The weather in a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

const messages = [];
const answers = [];
for (const [question, stream] of [
  ['I live in Lyon.', false],
  ['What is the weather?', false],
  ['Where do I live?', true],
]) {
  messages.push({ role: 'user', content: question });
  const call = { model, system: 'Be brief.', messages, tools: { weather }, stopWhen: stepCountIs(4) };
  let text = '';
  let response;
  if (stream) {
    const streamed = streamText(call);
    for await (const piece of streamed.textStream) text += piece;
    response = await streamed.response;
  } else {
    const answered = await generateText(call);
    text = answered.text;
    response = answered.response;
  }
  messages.push(...response.messages);
  answers.push(text);
}
console.log(JSON.stringify({ answers }));
