// The OpenAI Agents SDK for TypeScript through the gateway with `OpenAIConversationsSession`
// (tests/service/test_agents_js.py): the session keeps the history in a conversation of the
// gateway, sends all of it as the input of every model call, and adds each run's items to the
// conversation once the run is answered. Four runs, the first and the third calling the
// agent's tool; `stream` streams each run.
//
//   node session.mjs <base URL> <API key> plain|stream
//
// Prints {"answers": [...], "conversation": "conv_...", "items": [...]} as JSON, the items as
// the session reads them back (each a role or a type).
import OpenAI from 'openai';
import {
  OpenAIConversationsSession,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
} from '@openai/agents';
import { agent, questions } from './weather.mjs';

const [baseURL, apiKey, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
setDefaultOpenAIClient(client);
setTracingDisabled(true);
const session = new OpenAIConversationsSession({ client });

const answers = [];
for (const text of questions) {
  if (mode === 'stream') {
    const streamed = await run(agent, text, { session, stream: true });
    for await (const _event of streamed) {
      // read to its end
    }
    await streamed.completed;
    answers.push(streamed.finalOutput);
  } else {
    answers.push((await run(agent, text, { session })).finalOutput);
  }
}
const items = (await session.getItems()).map((item) => item.role ?? item.type);
console.log(JSON.stringify({ answers, conversation: await session.getSessionId(), items }));
