// Offline stand-ins for a real model, so the examples run without an API key: on the first step
// the "model" calls the named tool; on the next it repeats what the tool answered.
import { MockLanguageModelV3 } from 'ai/test';

const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };

export function standInModel(toolName, input) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last?.role !== 'tool') {
        return {
          content: [{ type: 'tool-call', toolCallId: `call_${Date.now()}`, toolName, input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls' },
          usage,
          warnings: [],
        };
      }
      const output = last.content[0]?.output;
      return {
        content: [{ type: 'text', text: `twokey says: ${output?.value ?? JSON.stringify(output)}` }],
        finishReason: { unified: 'stop' },
        usage,
        warnings: [],
      };
    },
  });
}
