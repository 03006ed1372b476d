// A model decides to refund an order; twokey asks a human (console or Slack) and runs the refund.
// Run against `npm start`:  TWOKEY_AGENT_KEY=tk_agent_… node examples/ai-sdk-refund.mjs
import { generateText, stepCountIs } from 'ai';
import { Twokey } from '@twokey/client';
import { twokeyTool } from '@twokey/client/ai-sdk';
import { standInModel } from './stand-in-models.mjs';

const client = new Twokey({ baseUrl: process.env.TWOKEY_URL ?? 'http://127.0.0.1:8080', apiKey: process.env.TWOKEY_AGENT_KEY });
const { text } = await generateText({
  model: standInModel('refund', { order: 'ord_1042', amount_cents: 1250 }), // your model, e.g. openai('gpt-5')
  tools: { refund: twokeyTool({ client, operation: 'refund' }) },
  prompt: 'Order ord_1042 arrived broken. Make it right.',
  stopWhen: stepCountIs(3),
});
console.log(text);
