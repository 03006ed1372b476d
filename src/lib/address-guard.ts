import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { createRequire } from 'node:module';
import { isIP, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';
import type * as Undici from 'undici';

/**
 * undici (a hundred modules) is loaded by the first guarded agent, not with this module: the
 * environment's checks use `parseAllowList`, and every CLI command reads the environment.
 */
const loadUndici = () => createRequire(import.meta.url)('undici') as typeof Undici;

/**
 * Where twokey may connect when the URL was chosen by someone other than the operator (an agent's
 * `callbackUrl`): public unicast addresses only, unless the operator allows more.
 *
 * ipaddr.js names every special-purpose range; all but `unicast` are refused: private (RFC 1918),
 * loopback, link-local (169.254.169.254, the cloud metadata address), CGNAT (100.64/10), multicast,
 * unspecified, broadcast, reserved and documentation ranges, IPv6 unique-local, and the IPv6 forms
 * that embed an IPv4 address (mapped, NAT64, 6to4, Teredo) — an IPv4-mapped address is judged as the
 * IPv4 address it carries.
 */
export interface AddressPolicy {
  /** Why connecting to this IP is refused, or null when it is allowed. */
  refusal(ip: string): string | null;
  /** The operator allowed this host by name: it may resolve to any address. */
  allowsHostname(hostname: string): boolean;
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

function normalize(ip: string): ipaddr.IPv4 | ipaddr.IPv6 {
  return ipaddr.process(ip.replace(/^\[|\]$/g, ''));
}

/** Parses `TWOKEY_CALLBACK_ALLOW`: CIDRs, single IPs and hostnames, comma-separated. */
export function parseAllowList(text: string | undefined): { cidrs: Cidr[]; hostnames: Set<string> } {
  const cidrs: Cidr[] = [];
  const hostnames = new Set<string>();
  for (const raw of (text ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry.includes('/')) {
      const [address, bits] = ipaddr.parseCIDR(entry);
      // ::ffff:10.0.0.0/104 means 10.0.0.0/8: addresses are judged in their IPv4 form.
      const mapped = address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress();
      cidrs.push(mapped ? [address.toIPv4Address(), bits - 96] : [address, bits]);
    } else if (ipaddr.isValid(entry.replace(/^\[|\]$/g, ''))) {
      const address = normalize(entry);
      cidrs.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else if (/^[a-z0-9.-]+$/.test(entry)) {
      hostnames.add(entry.replace(/\.$/, ''));
    } else {
      throw new Error(`"${raw.trim()}" is neither a CIDR, an IP address nor a hostname`);
    }
  }
  return { cidrs, hostnames };
}

export function createAddressPolicy(allow: string | undefined): AddressPolicy {
  const { cidrs, hostnames } = parseAllowList(allow);
  return {
    refusal(ip) {
      let address: ipaddr.IPv4 | ipaddr.IPv6;
      try {
        address = normalize(ip);
      } catch {
        return 'not an IP address';
      }
      if (cidrs.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits))) return null;
      const range = address.range();
      return range === 'unicast' ? null : `${range} address`;
    },
    allowsHostname(hostname) {
      return hostnames.has(hostname.toLowerCase().replace(/\.$/, ''));
    },
  };
}

/** Every address twokey may connect to, for URLs the operator wrote (executors). */
export const TRUST_ALL: AddressPolicy = { refusal: () => null, allowsHostname: () => true };

/**
 * What can be said about a URL before any DNS: refused when it carries credentials, names a host
 * that is an IP in a refused range (the WHATWG parser turns `http://2130706433/` into
 * `http://127.0.0.1/` first), or `localhost`. Answers the reason, or null.
 */
export function staticUrlRefusal(text: string, policy: AddressPolicy): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  if (url.username || url.password) return 'must not carry a user name or password';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (policy.allowsHostname(host)) return null;
  if (isIP(host)) {
    const refusal = policy.refusal(host);
    return refusal ? `points at a ${refusal}, which twokey does not call (see TWOKEY_CALLBACK_ALLOW)` : null;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) return 'points at a loopback address, which twokey does not call (see TWOKEY_CALLBACK_ALLOW)';
  return null;
}

export class RefusedAddressError extends Error {
  override readonly name = 'RefusedAddressError';
}

export type Lookup = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemLookup: Lookup = (hostname, options, callback) => dnsLookup(hostname, options, callback);

/**
 * An undici Agent that refuses to connect anywhere the policy refuses. The check runs on every
 * connection, on the address the connection uses: the connector resolves the name itself, keeps only
 * allowed addresses and connects to one of those by IP (a name that resolved to a public address
 * when the URL was accepted and to 127.0.0.1 when it is called gets nowhere), IP literals are
 * checked before connecting, and the socket's peer address is checked again once connected. TLS
 * still verifies the certificate against the URL's host name.
 */
export function createGuardedAgent(policy: AddressPolicy, options: { lookup?: Lookup; connectTimeoutMs?: number } = {}): Undici.Agent {
  const resolve = options.lookup ?? systemLookup;
  const undici = loadUndici();
  const connect = undici.buildConnector({ timeout: options.connectTimeoutMs ?? 10_000 });
  type ConnectOptions = Parameters<typeof connect>[0];
  type ConnectCallback = Parameters<typeof connect>[1];

  function connectChecked(connectOptions: ConnectOptions, trusted: boolean, callback: ConnectCallback) {
    connect(connectOptions, (error, socket) => {
      if (error || !socket) return callback(error ?? new Error('connection failed'), null);
      const peer = (socket as Socket).remoteAddress;
      const refusal = trusted ? null : peer ? policy.refusal(peer) : 'unknown address';
      if (refusal) {
        socket.destroy();
        return callback(new RefusedAddressError(`refused to connect to a ${refusal}`), null);
      }
      return callback(null, socket);
    });
  }

  return new undici.Agent({
    connect(connectOptions, callback) {
      const hostname = connectOptions.hostname;
      const trusted = policy.allowsHostname(hostname);
      if (isIP(hostname)) {
        const refusal = trusted ? null : policy.refusal(hostname);
        if (refusal) return callback(new RefusedAddressError(`refused to connect to a ${refusal}`), null);
        return connectChecked(connectOptions, trusted, callback);
      }
      resolve(hostname, { all: true }, (error, addresses) => {
        if (error) return callback(error, null);
        const allowed = trusted ? addresses : addresses.filter((entry) => policy.refusal(entry.address) === null);
        const [chosen] = allowed;
        if (!chosen) {
          const reasons = [...new Set(addresses.map((entry) => policy.refusal(entry.address)))].join(', ');
          return callback(new RefusedAddressError(`refused to connect: the host resolves only to refused addresses (${reasons || 'none'})`), null);
        }
        // `host` (name:port) still names the server for TLS SNI and certificate checks.
        connectChecked({ ...connectOptions, hostname: chosen.address }, trusted, callback);
      });
    },
  });
}
