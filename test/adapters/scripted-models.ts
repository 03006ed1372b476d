import { MockLanguageModelV3 } from 'ai/test';

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/**
 * An AI SDK model that, like a real one deciding to act, first calls one tool and then answers
 * with a text that quotes the tool's answer; every prompt it receives is kept for assertions.
 */
export function refundingModel(toolName: string, input: Record<string, unknown>, toolCallId = 'call_refund_1') {
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      step += 1;
      if (step === 1) {
        return {
          content: [{ type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls', raw: undefined },
          usage,
          warnings: [],
        };
      }
      // The text the tool gave back is the last tool message of the prompt.
      const last = options.prompt.at(-1);
      const said = last?.role === 'tool' ? JSON.stringify(last.content) : 'nothing';
      return { content: [{ type: 'text', text: `The tool said: ${said}` }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
  return model;
}
