/**
 * Node's system error codes in words, for the one-line messages an operator reads at start
 * (`twokey: cannot use the data directory …: permission denied`).
 */
const SYSTEM_ERROR_TEXT: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a part of the path is a file, not a directory',
  EISDIR: 'it is a directory, not a file',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  EEXIST: 'it already exists',
  ECONNREFUSED: 'connection refused (nothing listens there)',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved (DNS did not answer)',
};

/** A system error code (`EACCES`…) in words; the code itself when it is not one of those above. */
export function systemErrorText(code: string): string {
  return SYSTEM_ERROR_TEXT[code] ?? code;
}
