import type * as Undici from 'undici';

let undici: Promise<typeof Undici> | null = null;

/**
 * undici (a hundred modules) loaded with the first request sent, not before the server answers; once.
 * Each `import()` resolves the module again (with a loader hook, through its thread), so it is kept.
 */
export const loadUndici = (): Promise<typeof Undici> => (undici ??= import('undici'));
