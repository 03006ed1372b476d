import * as z from 'zod';
import { signInUrl } from '../../console/urls.js';
import { TwokeyError } from '../../core/errors.js';
import type { JobStatus } from '../../outbox/ports.js';
import { defineCommand } from '../command.js';
import { table } from '../print.js';

/** The web console's approvers, and the outbox (chat posts and edits, callbacks). */

const JOB_STATUSES = ['queued', 'running', 'done', 'dead'] as const satisfies readonly JobStatus[];

/** `web:NAME` or `NAME`: the console checks the form itself and names what is wrong. */
const approverName = z.string('missing name').min(1, 'missing name');

export const approversLink = defineCommand({
  name: 'approvers.link',
  input: z.strictObject({
    name: approverName,
    // The CLI sends the base URL from its own environment (TWOKEY_PUBLIC_URL or HOST:PORT).
    baseUrl: z
      .string()
      .regex(/^https?:\/\//, 'baseUrl must be an http:// or https:// URL')
      .optional(),
  }),
  output: z.object({ approver: z.string(), url: z.string(), expiresAt: z.string(), decides: z.array(z.string()) }),
  async run(services, input) {
    const { approver, token, expiresAt } = await services.consoleAuth.mintLink(input.name);
    const decides = services
      .operations()
      .filter((operation) => operation.approval.approvers.includes(approver))
      .map((operation) => operation.name);
    return { approver, url: signInUrl(input.baseUrl ?? 'http://127.0.0.1:8080', token), expiresAt: expiresAt.toISOString(), decides };
  },
  print: (link) =>
    [
      `One-time sign-in link to the web console for ${link.approver} (works once, until ${link.expiresAt}):`,
      ...(link.decides.length === 0 ? [`note: ${link.approver} approves no operation in the config; they can look but not decide`] : []),
      // The link alone on the last line, so `| tail -n 1` captures it.
      link.url,
    ].join('\n'),
});

export const approversRevokeSessions = defineCommand({
  name: 'approvers.revoke-sessions',
  input: z.strictObject({ name: approverName }),
  output: z.object({ approver: z.string(), sessions: z.number(), links: z.number() }),
  async run(services, input) {
    return services.consoleAuth.revokeSessions(input.name);
  },
  print: (revoked) => `${revoked.approver}: ${revoked.sessions} console session(s) ended, ${revoked.links} unused sign-in link(s) cancelled.`,
});

export const jobsList = defineCommand({
  name: 'jobs.list',
  input: z.strictObject({ status: z.enum(JOB_STATUSES, `--status must be one of ${JOB_STATUSES.join(', ')}`).optional() }),
  output: z.array(
    z.object({
      id: z.number(),
      kind: z.string(),
      status: z.string(),
      attempts: z.string(),
      target: z.string().nullable(),
      runAt: z.string(),
      lastError: z.string().nullable(),
    }),
  ),
  async run(services, input) {
    const rows = await services.jobs.list(input.status ? { status: input.status } : {});
    return rows.map((job) => ({
      id: job.id,
      kind: job.kind,
      status: job.status,
      attempts: `${job.attempts}/${job.maxAttempts}`,
      target: typeof job.payload.proposalId === 'string' ? job.payload.proposalId : null,
      runAt: job.runAt.toISOString(),
      lastError: job.lastError,
    }));
  },
  print: (jobs) => table(jobs, ['id', 'kind', 'status', 'attempts', 'target', 'runAt', 'lastError']),
});

export const jobsRetry = defineCommand({
  name: 'jobs.retry',
  input: z.strictObject({
    // The CLI's argument is text; a script over the socket may send the number.
    id: z.preprocess(
      (id) => (typeof id === 'number' ? String(id) : id),
      z
        .string('missing id')
        .regex(/^\d{1,15}$/, 'job id must be a number')
        .transform(Number),
    ),
  }),
  output: z.object({ id: z.number(), kind: z.string(), status: z.string() }),
  async run(services, input) {
    const job = await services.jobs.retry(input.id, services.clock());
    if (!job) throw new TwokeyError('not_found', `no unfinished job ${input.id}`);
    return { id: job.id, kind: job.kind, status: job.status };
  },
  print: (job) => `job ${job.id} (${job.kind}) queued again`,
});
