import { ReceiverMultipleAckError, type App, type Receiver, type ReceiverEvent } from '@slack/bolt';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { slackEventsSchema } from './route-schema.js';
import type { SlackLog } from './log.js';
import { verifySlackSignature } from './signature.js';

export interface FastifyReceiverOptions {
  signingSecret: string;
  clock: () => Date;
  log: () => SlackLog;
  /** Where Slack's Request URL points (interactivity and events). */
  path?: string;
  /** Slack gives up after 3 s; past this an unanswered request gets a 404 like Bolt's own receiver. */
  ackTimeoutMs?: number;
  /**
   * Takes a press of a decision button itself, without Bolt: resolves once it may be answered (the
   * click is stored); null when the body is not one.
   */
  decisionButton?(body: Record<string, unknown>): Promise<void> | null;
}

type Answer = { status: number; body?: unknown };

const BODY_LIMIT_BYTES = 1024 * 1024;

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Slack sends interactions as `payload=<json>` forms, events as JSON, slash commands as plain forms. */
export function parseSlackBody(raw: Buffer, contentType: string): Record<string, unknown> {
  const text = raw.toString('utf8');
  if (contentType.startsWith('application/json')) {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new SyntaxError('not a JSON object');
    return parsed as Record<string, unknown>;
  }
  const form = new URLSearchParams(text);
  const payload = form.get('payload');
  if (payload !== null) {
    const parsed: unknown = JSON.parse(payload);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new SyntaxError('payload is not a JSON object');
    return parsed as Record<string, unknown>;
  }
  return Object.fromEntries(form);
}

/**
 * A modal submission Slack could never send: Bolt and the listener read `view.state.values` and
 * `view.private_metadata` without checking, so a signed body without them is refused here with a 400
 * instead of failing inside a listener (which would leave it unanswered).
 */
function isMalformedViewSubmission(body: Record<string, unknown>): boolean {
  if (body.type !== 'view_submission') return false;
  const user = body.user as { id?: unknown } | null | undefined;
  const view = body.view as { private_metadata?: unknown; state?: { values?: unknown } | null } | null | undefined;
  const values = view?.state?.values;
  return typeof user?.id !== 'string' || typeof view?.private_metadata !== 'string' || typeof values !== 'object' || values === null || Array.isArray(values);
}

/**
 * Bolt's Receiver living inside twokey's fastify server: Slack's requests arrive at `POST /slack/events`
 * on the same port as the agent API. The route sits in its own plugin scope so it alone keeps the raw
 * body the signature is computed over.
 */
export class FastifySlackReceiver implements Receiver {
  private bolt: App | undefined;

  constructor(private readonly options: FastifyReceiverOptions) {}

  init(app: App): void {
    this.bolt = app;
  }

  // The fastify server's lifecycle is twokey's; nothing to open or close here.
  async start(): Promise<void> {}
  async stop(): Promise<void> {}

  async register(server: FastifyInstance): Promise<void> {
    const path = this.options.path ?? '/slack/events';
    await server.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        ['application/x-www-form-urlencoded', 'application/json'],
        { parseAs: 'buffer', bodyLimit: BODY_LIMIT_BYTES },
        (_request, body, done) => done(null, body),
      );
      // Zod only to document the route: headers all optional, the body let through as raw bytes.
      scope.setValidatorCompiler(validatorCompiler);
      scope.setSerializerCompiler(serializerCompiler);
      scope.post(path, { schema: slackEventsSchema }, (request, reply) => this.handle(request, reply));
    });
  }

  private async handle(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const raw = request.body;
    if (!Buffer.isBuffer(raw)) return reply.code(400).send();
    const verdict = verifySlackSignature({
      signingSecret: this.options.signingSecret,
      timestamp: header(request, 'x-slack-request-timestamp'),
      signature: header(request, 'x-slack-signature'),
      rawBody: raw,
      now: this.options.clock(),
    });
    if (verdict !== 'valid') {
      this.options.log().warn({ requestId: request.id, verdict }, 'refused a Slack request: bad signature');
      // Nothing but the status: a prober learns no more than "no".
      return reply.code(401).send();
    }

    let body: Record<string, unknown>;
    try {
      body = parseSlackBody(raw, header(request, 'content-type') ?? '');
    } catch {
      return reply.code(400).send();
    }
    if (body.type === 'url_verification' && typeof body.challenge === 'string') {
      return reply.code(200).send({ challenge: body.challenge });
    }
    if (body.ssl_check !== undefined) return reply.code(200).send();

    if (isMalformedViewSubmission(body)) {
      this.options.log().warn({ requestId: request.id }, 'refused a Slack request: a view submission without its view state');
      return reply.code(400).send();
    }

    const retryNum = Number(header(request, 'x-slack-retry-num'));
    const event = { body, retryNum: Number.isInteger(retryNum) ? retryNum : undefined, retryReason: header(request, 'x-slack-retry-reason') };
    // A decision is answered once it is stored (src/slack/approver.ts), here without Bolt's routing:
    // in a burst of clicks every answer then waits only for its own write, not for Bolt's middleware
    // on the clicks before it.
    const decision = this.options.decisionButton?.(body);
    if (decision) {
      await decision;
      return reply.code(200).send();
    }
    const answer = await this.dispatch(event);
    reply.code(answer.status);
    if (answer.body === undefined || answer.body === '') return reply.send();
    if (typeof answer.body === 'string') return reply.type('text/plain; charset=utf-8').send(answer.body);
    return reply.send(answer.body);
  }

  /** Resolves as soon as a listener calls `ack`; the listener's work goes on after the answer. */
  private dispatch(event: Omit<ReceiverEvent, 'ack'>): Promise<Answer> {
    const bolt = this.bolt;
    if (!bolt) return Promise.resolve({ status: 503 });
    return new Promise<Answer>((resolve) => {
      let answered = false;
      const answer = (result: Answer) => {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        resolve(result);
      };
      const timer = setTimeout(() => {
        this.options.log().warn('a Slack request was not acknowledged in time');
        answer({ status: 404 });
      }, this.options.ackTimeoutMs ?? 3001);
      let acked = false;
      const ack = async (response?: unknown): Promise<void> => {
        if (acked) throw new ReceiverMultipleAckError();
        acked = true;
        answer({ status: 200, body: response });
      };
      void bolt
        .processEvent({ ...event, ack })
        // No listener took it (an event twokey does not subscribe to): Slack needs no 3 s wait for that.
        .then(() => answer({ status: acked ? 200 : 404 }))
        .catch((error: unknown) => {
          // Bolt hands listener failures to bolt.error, so what rejects here is Bolt reading the
          // envelope before any listener (`body.view.…`, `body.user.id`, `'channel' in event`):
          // a signed body in a shape Slack never sends is the sender's fault, not a server error.
          if (!acked && error instanceof TypeError) {
            this.options.log().warn({ err: { type: error.name, message: error.message } }, 'refused a Slack request: Bolt cannot read its payload');
            answer({ status: 400 });
            return;
          }
          this.options.log().error({ err: error instanceof Error ? { type: error.name, message: error.message } : undefined }, 'Slack event processing failed');
          answer({ status: 500 });
        });
    });
  }
}
