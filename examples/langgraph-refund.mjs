// A graph decides to refund an order, pauses while twokey asks a human (console or Slack), then resumes.
// Run against `npm start`:  TWOKEY_AGENT_KEY=tk_agent_… node examples/langgraph-refund.mjs
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { Twokey } from '@twokey/client';
import { resumeWhenDecided, twokeyGate } from '@twokey/client/langgraph';

const client = new Twokey({ baseUrl: process.env.TWOKEY_URL ?? 'http://127.0.0.1:8080', apiKey: process.env.TWOKEY_AGENT_KEY });
const State = Annotation.Root({ order: Annotation(), amount_cents: Annotation(), report: Annotation() });

const graph = new StateGraph(State)
  .addNode('refund', async ({ order, amount_cents }) => ({ report: (await twokeyGate(client, { operation: 'refund', params: { order, amount_cents } })).text }))
  .addEdge(START, 'refund')
  .addEdge('refund', END)
  .compile({ checkpointer: new MemorySaver() }); // a durable checkpointer (PostgresSaver) lets another process resume

const config = { configurable: { thread_id: `refund-${Date.now()}` } };
await graph.invoke({ order: 'ord_1042', amount_cents: 1250 }, config); // pauses on twokey
console.log('Waiting for a human to decide in twokey…');
const resumed = await resumeWhenDecided(client, graph, config);
console.log(resumed?.output.report ?? 'no decision yet');
