// The OpenAI Agents SDK for TypeScript through the gateway over the Responses API's WebSocket
// mode (tests/service/test_agents_js.py): an `OpenAIProvider` with `useResponsesWebSocket`, four
// runs chained by `previousResponseId`, the first and the third calling the agent's tool.
// Node.js 20 has no WebSocket of its own that sends headers: `ws` is the SDK's WebSocket.
//
//   node chain.mjs <base URL> <API key>
//
// Prints {"answers": [...], "last": "resp_..."} as JSON.
import OpenAI from 'openai';
import WebSocket from 'ws';
import { OpenAIProvider, Runner, setTracingDisabled } from '@openai/agents';
import { agent, questions } from './weather.mjs';

globalThis.WebSocket ??= WebSocket;
const [baseURL, apiKey] = process.argv.slice(2);
const provider = new OpenAIProvider({
  openAIClient: new OpenAI({ baseURL, apiKey, maxRetries: 0 }),
  useResponsesWebSocket: true,
});
const runner = new Runner({ modelProvider: provider });
setTracingDisabled(true);

const answers = [];
let previousResponseId;
for (const text of questions) {
  const result = await runner.run(agent, text, { previousResponseId });
  answers.push(result.finalOutput);
  previousResponseId = result.lastResponseId;
}
await provider.close(); // its socket
console.log(JSON.stringify({ answers, last: previousResponseId }));
