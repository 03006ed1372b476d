// `twokey/ai-sdk`, kept for code written before the client had its own package: `@twokey/client/ai-sdk` is the same module.
export * from '@twokey/client/ai-sdk';
