// `twokey/sdk`, kept for code written before the client had its own package: `@twokey/client` is the same module.
export * from '@twokey/client';
