// `twokey/langgraph`, kept for code written before the client had its own package: `@twokey/client/langgraph` is the same module.
export * from '@twokey/client/langgraph';
