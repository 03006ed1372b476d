import { createHmac } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

export const SIGNING_SECRET = 'test-signing-secret-5c1e9a77d2';
export const BOT_TOKEN = 'xoxb-1111-2222-testbottoken';
/** The legacy verification token Slack still puts in every payload. */
export const LEGACY_TOKEN = 'legacyverificationtoken42';
/** Not a hooks.slack.com URL, so the logger's own scrubbing cannot hide a leak from the test. */
export const RESPONSE_URL = 'https://responses.example.test/actions/T0TEAM/1234/RESPONSEURLSECRET';

/** Signs a body exactly as Slack does (computed here independently of src/slack/signature.ts). */
export function slackHeaders(body: string, unixSeconds: number, secret = SIGNING_SECRET): Record<string, string> {
  const signature = createHmac('sha256', secret).update(`v0:${unixSeconds}:${body}`).digest('hex');
  return { 'x-slack-request-timestamp': String(unixSeconds), 'x-slack-signature': `v0=${signature}` };
}

export function interactionBody(payload: unknown): string {
  return `payload=${encodeURIComponent(JSON.stringify(payload))}`;
}

export function buttonClick(options: { actionId: string; proposalId: string; userId: string; channel?: string; messageTs?: string }) {
  const channel = options.channel ?? 'C0APPROVALS';
  return {
    type: 'block_actions',
    user: { id: options.userId, username: options.userId.toLowerCase(), name: options.userId.toLowerCase(), team_id: 'T0TEAM' },
    api_app_id: 'A0TWOKEY',
    token: LEGACY_TOKEN,
    container: { type: 'message', message_ts: options.messageTs ?? '1700000000.000100', channel_id: channel, is_ephemeral: false },
    trigger_id: `trigger-${Math.random().toString(36).slice(2)}`,
    team: { id: 'T0TEAM', domain: 'acme' },
    enterprise: null,
    is_enterprise_install: false,
    channel: { id: channel, name: 'approvals' },
    message: { type: 'message', ts: options.messageTs ?? '1700000000.000100', text: 'proposal' },
    state: { values: {} },
    response_url: RESPONSE_URL,
    actions: [
      {
        action_id: options.actionId,
        block_id: 'twokey_decision',
        text: { type: 'plain_text', text: options.actionId, emoji: true },
        value: options.proposalId,
        type: 'button',
        action_ts: '1700000001.000200',
      },
    ],
  };
}

export function rejectSubmission(options: { proposalId: string; userId: string; reason?: string }) {
  return {
    type: 'view_submission',
    team: { id: 'T0TEAM', domain: 'acme' },
    user: { id: options.userId, username: options.userId.toLowerCase(), name: options.userId.toLowerCase(), team_id: 'T0TEAM' },
    api_app_id: 'A0TWOKEY',
    token: LEGACY_TOKEN,
    trigger_id: 'trigger-submit',
    view: {
      id: 'V0REJECT',
      team_id: 'T0TEAM',
      type: 'modal',
      callback_id: 'twokey_reject_modal',
      private_metadata: options.proposalId,
      hash: '1700000002.abc',
      blocks: [],
      state: { values: { twokey_reason: { twokey_reason_input: { type: 'plain_text_input', value: options.reason ?? null } } } },
      title: { type: 'plain_text', text: 'Reject proposal' },
      app_id: 'A0TWOKEY',
      bot_id: 'B0TWOKEY',
    },
    response_urls: [],
  };
}

export interface SlackPoster {
  (
    body: string,
    options?: { unixSeconds?: number; headers?: Record<string, string>; contentType?: string; secret?: string },
  ): Promise<{
    status: number;
    body: string;
    ms: number;
  }>;
}

/** Posts to /slack/events through fastify's inject, signed with the twokey clock's current time. */
export function slackPoster(app: FastifyInstance, clock: () => Date): SlackPoster {
  return async (body, options = {}) => {
    const unixSeconds = options.unixSeconds ?? Math.floor(clock().getTime() / 1000);
    const started = performance.now();
    const response = await app.inject({
      method: 'POST',
      url: '/slack/events',
      headers: {
        'content-type': options.contentType ?? 'application/x-www-form-urlencoded',
        ...slackHeaders(body, unixSeconds, options.secret),
        ...options.headers,
      },
      payload: body,
    });
    return { status: response.statusCode, body: response.body, ms: performance.now() - started };
  };
}

/** The "Approve for…" modal submitted: a duration in ms, optional uses, no bounds. */
export function grantSubmission(proposalId: string, userId: string, durationMs: number, uses: string | null) {
  return {
    type: 'view_submission',
    team: { id: 'T0TEAM', domain: 'acme' },
    user: { id: userId, username: 'alice', name: 'alice', team_id: 'T0TEAM' },
    api_app_id: 'A0TWOKEY',
    token: LEGACY_TOKEN,
    trigger_id: 'trigger-submit',
    view: {
      id: 'V0GRANT',
      team_id: 'T0TEAM',
      type: 'modal',
      callback_id: 'twokey_grant_modal',
      private_metadata: proposalId,
      hash: '1700000002.abc',
      blocks: [],
      state: {
        values: {
          twokey_grant_duration: {
            twokey_grant_input: { type: 'static_select', selected_option: { text: { type: 'plain_text', text: '1 h' }, value: String(durationMs) } },
          },
          twokey_grant_uses: { twokey_grant_input: { type: 'number_input', value: uses } },
          twokey_grant_bounded: { twokey_grant_input: { type: 'checkboxes', selected_options: [] } },
        },
      },
      title: { type: 'plain_text', text: 'Approve for a while' },
      app_id: 'A0TWOKEY',
      bot_id: 'B0TWOKEY',
    },
    response_urls: [],
  };
}
