import * as z from 'zod';
import { defineCommand } from '../command.js';
import { table } from '../print.js';

/** Agents and their API keys. */

const name = z.string().min(1, 'missing name');
const nullableDate = z.string().nullable();

export const agentsCreate = defineCommand({
  name: 'agents.create',
  input: z.strictObject({
    name,
    owners: z.array(z.string()).optional(),
    operations: z.array(z.string()).optional(),
  }),
  output: z.object({
    id: z.string(),
    name: z.string(),
    owners: z.array(z.string()),
    operations: z.array(z.string()).nullable(),
    apiKey: z.string(),
    callbackSecret: z.string(),
  }),
  async run(services, input) {
    const { agent, apiKey, callbackSecret } = await services.agents.create({
      name: input.name,
      owners: input.owners ?? [],
      operations: input.operations ?? null,
    });
    return { id: agent.id, name: agent.name, owners: agent.owners, operations: agent.operations, apiKey, callbackSecret };
  },
  print: (created) =>
    [
      `Agent "${created.name}" created (${created.id}).`,
      `Callback signing secret, shown once: ${created.callbackSecret}`,
      'API key, shown once (the next line):',
      // The key alone on the last line, so `| tail -n 1` captures it.
      created.apiKey,
    ].join('\n'),
});

export const agentsList = defineCommand({
  name: 'agents.list',
  input: z.strictObject({}),
  output: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      keyPrefix: z.string(),
      owners: z.array(z.string()),
      operations: z.array(z.string()).nullable(),
      createdAt: z.string(),
      revokedAt: nullableDate,
    }),
  ),
  async run(services) {
    return (await services.agents.list()).map((agent) => ({
      id: agent.id,
      name: agent.name,
      keyPrefix: agent.keyPrefix,
      owners: agent.owners,
      operations: agent.operations,
      createdAt: agent.createdAt.toISOString(),
      revokedAt: agent.revokedAt?.toISOString() ?? null,
    }));
  },
  print: (agents) => table(agents, ['name', 'id', 'keyPrefix', 'owners', 'operations', 'createdAt', 'revokedAt']),
});

export const agentsRevoke = defineCommand({
  name: 'agents.revoke',
  input: z.strictObject({ name }),
  output: z.object({ name: z.string(), revokedAt: nullableDate }),
  async run(services, input) {
    const agent = await services.agents.revoke(input.name);
    return { name: agent.name, revokedAt: agent.revokedAt?.toISOString() ?? null };
  },
  print: (revoked) => `Agent "${revoked.name}" revoked at ${String(revoked.revokedAt)}.`,
});
