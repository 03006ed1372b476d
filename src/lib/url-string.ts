import * as z from 'zod';

/** A zod string that must be a URL of one of these protocols (`https:`), with its own message: the value may be a secret. */
export function urlString(protocols: readonly string[], error: string) {
  return z.string().refine(
    (text) => {
      try {
        return protocols.includes(new URL(text).protocol);
      } catch {
        return false;
      }
    },
    { error },
  );
}
