// A model decides to refund an order; twokey asks a human (console or Slack) and runs the refund.
// Run against `npm start`:  TWOKEY_AGENT_KEY=tk_agent_… node examples/openai-agents-refund.mjs
import { Agent, run, setTracingDisabled, Usage } from '@openai/agents';
import { Twokey } from '@twokey/client';
import { twokeyTool } from '@twokey/client/openai-agents';

setTracingDisabled(true); // the stand-in model below is offline; drop both with a real model
const client = new Twokey({ baseUrl: process.env.TWOKEY_URL ?? 'http://127.0.0.1:8080', apiKey: process.env.TWOKEY_AGENT_KEY });

// Offline stand-in for a real model: calls `refund` once, then repeats what the tool answered.
const standIn = {
  async getResponse({ input }) {
    const result = Array.isArray(input) ? input.find((item) => item.type === 'function_call_result') : null;
    const output = result
      ? [
          {
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: `twokey says: ${result.output?.text ?? JSON.stringify(result.output)}` }],
          },
        ]
      : [
          {
            type: 'function_call',
            callId: `call_${Date.now()}`,
            name: 'refund',
            arguments: JSON.stringify({ order: 'ord_1042', amount_cents: 1250 }),
            status: 'completed',
          },
        ];
    return { usage: new Usage(), output };
  },
  async *getStreamedResponse() {},
};

const agent = new Agent({ name: 'support', instructions: 'Make customers whole.', model: standIn, tools: [twokeyTool({ client, operation: 'refund' })] });
const result = await run(agent, 'Order ord_1042 arrived broken. Make it right.');
console.log(result.finalOutput);
