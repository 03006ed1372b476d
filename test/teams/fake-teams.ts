import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';

/**
 * Microsoft's side of a Teams bot, on 127.0.0.1: the Entra token endpoint (client credentials), the
 * Bot Connector service (create, reply to and replace activities, recording each), and the Bot
 * Framework channel's OpenID issuer (metadata → JWKS) with its own RSA key, which signs the
 * activities a test sends to twokey as the channel does.
 */

export interface RecordedCall {
  method: string;
  path: string;
  authorization: string | undefined;
  body: any;
}

export interface StoredActivity {
  id: string;
  conversationId: string;
  body: any;
  edits: number;
}

export interface FakeTeams {
  /** The Bot Connector's base URL (TEAMS_SERVICE_URL), ending in `/`. */
  serviceUrl: string;
  tokenUrl: string;
  openIdMetadataUrl: string;
  issuer: string;
  calls: RecordedCall[];
  /** The token requests, their form fields as sent. */
  tokenRequests: Array<Record<string, string>>;
  activities: Map<string, StoredActivity>;
  callsTo(method: string, path: RegExp): RecordedCall[];
  /** A token as the channel signs it; `claims` and `key` let a test forge what the channel never would. */
  sign(claims?: JWTPayload & { serviceUrl?: string }, options?: { key?: 'channel' | 'foreign'; kid?: string }): Promise<string>;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakeTeams(options: { appId: string; appPassword: string; tenantId: string }): Promise<FakeTeams> {
  const channelKey = await generateKeyPair('RS256');
  // A key of some other issuer: same algorithm, a kid of its own, in no JWKS this channel publishes.
  const foreignKey = await generateKeyPair('RS256');
  const kid = `channel-${randomBytes(4).toString('hex')}`;
  const jwk = { ...(await exportJWK(channelKey.publicKey)), kid, use: 'sig', alg: 'RS256', endorsements: ['msteams'] };
  const calls: RecordedCall[] = [];
  const tokenRequests: Array<Record<string, string>> = [];
  const activities = new Map<string, StoredActivity>();
  const issued = new Set<string>();
  let base = '';

  const server: Server = createServer((request, response) => {
    void (async () => {
      const url = new URL(request.url ?? '/', 'http://fake');
      const raw = await readBody(request);
      const send = (status: number, body?: unknown) => {
        response.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
        response.end(body === undefined ? undefined : JSON.stringify(body));
      };
      if (request.method === 'GET' && url.pathname === '/botframework/openid') {
        return send(200, { issuer: `${base}/botframework`, jwks_uri: `${base}/botframework/keys`, id_token_signing_alg_values_supported: ['RS256'] });
      }
      if (request.method === 'GET' && url.pathname === '/botframework/keys') return send(200, { keys: [jwk] });
      if (request.method === 'POST' && url.pathname === `/${options.tenantId}/oauth2/v2.0/token`) {
        const form = Object.fromEntries(new URLSearchParams(raw));
        tokenRequests.push(form);
        if (form.grant_type !== 'client_credentials' || form.client_id !== options.appId || form.client_secret !== options.appPassword) {
          return send(401, { error: 'invalid_client' });
        }
        const token = `bot-${randomBytes(16).toString('hex')}`;
        issued.add(token);
        return send(200, { token_type: 'Bearer', expires_in: 3599, access_token: token });
      }
      const match = /^\/teams\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?$/.exec(url.pathname);
      if (!match?.[1]) return send(404, { error: { code: 'NotFound' } });
      const conversationId = decodeURIComponent(match[1]);
      const activityId = match[2] ? decodeURIComponent(match[2]) : undefined;
      const body = raw ? JSON.parse(raw) : null;
      const authorization = request.headers.authorization;
      calls.push({
        method: request.method ?? '',
        path: `/v3/conversations/${conversationId}/activities${activityId ? `/${activityId}` : ''}`,
        authorization,
        body,
      });
      if (!authorization?.startsWith('Bearer ') || !issued.has(authorization.slice(7))) return send(401, { message: 'Authorization has been denied' });
      if (request.method === 'POST') {
        const id = `1${Date.now()}${randomBytes(2).readUInt16BE()}`;
        activities.set(id, { id, conversationId, body, edits: 0 });
        return send(201, { id });
      }
      if (request.method === 'PUT' && activityId) {
        const stored = activities.get(activityId);
        if (!stored || stored.conversationId !== conversationId) return send(404, { error: { code: 'ActivityNotFoundInConversation' } });
        stored.body = body;
        stored.edits += 1;
        return send(200, { id: activityId });
      }
      return send(405);
    })().catch(() => {
      response.writeHead(500).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const issuer = `${base}/botframework`;
  const serviceUrl = `${base}/teams/`;

  async function sign(claims: JWTPayload & { serviceUrl?: string } = {}, signOptions: { key?: 'channel' | 'foreign'; kid?: string } = {}): Promise<string> {
    const key: CryptoKey = signOptions.key === 'foreign' ? foreignKey.privateKey : channelKey.privateKey;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ serviceUrl, ...claims })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: signOptions.kid ?? (signOptions.key === 'foreign' ? `foreign-${randomUUID()}` : kid) })
      .setIssuer(typeof claims.iss === 'string' ? claims.iss : issuer)
      .setAudience(claims.aud ?? options.appId)
      .setIssuedAt(now)
      .setNotBefore(now - 5)
      .setExpirationTime(now + 3600)
      .sign(key);
  }

  return {
    serviceUrl,
    tokenUrl: `${base}/${options.tenantId}/oauth2/v2.0/token`,
    openIdMetadataUrl: `${base}/botframework/openid`,
    issuer,
    calls,
    tokenRequests,
    activities,
    callsTo: (method, path) => calls.filter((call) => call.method === method && path.test(call.path)),
    sign,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
