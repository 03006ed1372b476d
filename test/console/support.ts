import type { WebConsole } from '../../src/console/index.js';
import type { Database } from '../../src/db/database.js';
import type { Driver } from '../support/database.js';
import { USD_COST, configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey, type TestTwokeyOptions } from '../support/twokey.js';

const CONSOLE_APPROVERS = ['web:operator', 'web:reviewer'];

export const consoleConfigYaml = configYaml([
  upgradePlanOperation({
    confirmationType: 'payment',
    amountCents: true,
    cost: USD_COST,
    expiresIn: '5m',
    approvers: CONSOLE_APPROVERS,
    commit: 'on_approve',
  }),
  `  - name: send_mailing
    description: Send an email campaign to a mailing list
    params:
      type: object
      required: [list, subject, recipients]
      properties:
        list: { type: string }
        subject: { type: string }
        recipients: { type: integer }
    summary: '{{ agent }} wants to send "{{ params.subject }}" to the {{ params.list }} list ({{ params.recipients }} recipients).'
    expiresIn: 10m
    approval:
      approvers: [web:operator, web:reviewer]
    commit: on_approve
    executor: { type: echo }
`,
  deleteWorkspaceOperation({
    description: 'Permanently delete a workspace and all its data',
    summary: '{{agent}} wants to PERMANENTLY delete the workspace {{params.workspace}}.',
    expiresIn: '1h',
    approvers: CONSOLE_APPROVERS,
    quorum: 2,
    commit: 'on_approve',
  }),
]);

export interface ConsoleTwokey extends TestTwokey {
  web: WebConsole;
  /** http://127.0.0.1:PORT when started with `listen`, else a placeholder for `app.inject`. */
  baseUrl: string;
  /** Signs in through the real link flow; returns the Cookie header and the session's CSRF token. */
  signIn(name: string): Promise<{ cookie: string; csrf: string }>;
  /** GET a console page as a signed-in person (or nobody). */
  page(url: string, cookie?: string): Promise<{ status: number; body: string; headers: Record<string, unknown> }>;
  /** POST a console form. */
  form(
    url: string,
    fields: Record<string, string>,
    options?: { cookie?: string; headers?: Record<string, string> },
  ): Promise<{ status: number; body: string; headers: Record<string, unknown> }>;
  propose(apiKey: string, operation: string, params: Record<string, unknown>): Promise<{ id: string; summary: string }>;
}

export const csrfOf = (html: string): string => /name="_csrf" value="([0-9a-f]{64})"/.exec(html)?.[1] ?? '';

/**
 * A real twokey (its web console included) configured for the console tests, listening on a real
 * port when a browser needs one.
 */
export async function startConsoleTwokey(options: {
  driver: Driver;
  clock?: () => Date;
  env?: Record<string, string>;
  listen?: boolean;
  /** An already open database (the caller closes it). */
  database?: Database;
  configYaml?: string;
  executorFor?: TestTwokeyOptions['executorFor'];
  auditIntervalMs?: number;
}): Promise<ConsoleTwokey> {
  const twokey = await startTestTwokey({
    driver: options.driver,
    configYaml: options.configYaml ?? consoleConfigYaml,
    clock: options.clock,
    env: options.env,
    database: options.database,
    executorFor: options.executorFor,
    auditIntervalMs: options.auditIntervalMs,
  });
  const web = twokey.webConsole;
  const baseUrl = options.listen ? await twokey.app.listen({ host: '127.0.0.1', port: 0 }) : 'http://localhost:80';

  const inject = async (method: 'GET' | 'POST', url: string, payload: string | undefined, headers: Record<string, string>) => {
    const response = await twokey.app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
    return { status: response.statusCode, body: response.body, headers: response.headers as Record<string, unknown> };
  };
  const page: ConsoleTwokey['page'] = (url, cookie) => inject('GET', url, undefined, cookie ? { cookie } : {});
  const form: ConsoleTwokey['form'] = (url, fields, formOptions = {}) =>
    inject('POST', url, new URLSearchParams(fields).toString(), {
      'content-type': 'application/x-www-form-urlencoded',
      ...(formOptions.cookie ? { cookie: formOptions.cookie } : {}),
      ...formOptions.headers,
    });

  return Object.assign(twokey, {
    web,
    baseUrl,
    page,
    form,
    async signIn(name: string) {
      const { token } = await web.auth.mintLink(name);
      const response = await twokey.app.inject({
        method: 'POST',
        url: '/console/login',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ token }).toString(),
      });
      const cookie = response.cookies[0];
      if (response.statusCode !== 303 || !cookie) throw new Error(`sign-in failed: ${response.statusCode}`);
      const header = `${cookie.name}=${cookie.value}`;
      return { cookie: header, csrf: csrfOf((await page('/console', header)).body) };
    },
    async propose(apiKey: string, operation: string, params: Record<string, unknown>) {
      const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation, params } });
      if (response.status !== 201) throw new Error(`propose failed: ${JSON.stringify(response.body)}`);
      return response.body as { id: string; summary: string };
    },
  });
}
