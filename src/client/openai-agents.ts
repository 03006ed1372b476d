// `twokey/openai-agents`, kept for code written before the client had its own package: `@twokey/client/openai-agents` is the same module.
export * from '@twokey/client/openai-agents';
