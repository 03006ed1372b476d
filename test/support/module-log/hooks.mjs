// The loader-thread half of register.mjs: every resolved file: URL, appended as it resolves, so a
// process that exits at once (process.exit in a command) still leaves its list behind.
import { appendFileSync } from 'node:fs';

let file;

export function initialize(data) {
  file = data.file;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (resolved.url.startsWith('file:')) appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}
