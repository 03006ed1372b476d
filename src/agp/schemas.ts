import { z } from 'zod';
import { apiSchemas, errorBodySchema, named } from '../http-kit/api-schemas.js';

/**
 * The AGP dialect's requests and answers as zod schemas: validation, handler types and the
 * `/agp` part of `GET /openapi.json`. Named schemas join the agent API's registry (`apiSchemas`),
 * so the document has one set of components.
 */

const businessId = z.string().min(1).max(64).register(apiSchemas, { description: 'A business from the `businesses:` config section' });
const agpRequest = z.record(z.string(), z.unknown()).register(apiSchemas, { description: "The AGP request; the business's adapter reads it" });

export const discoverBodySchema = z.strictObject({ businessId });
export const agpCallBodySchema = z.strictObject({ businessId, request: agpRequest });

export const agpErrorSchema = named(
  'AgpError',
  errorBodySchema
    .extend({ message: z.string().register(apiSchemas, { description: "The error's message again, where the AGP reference SDK reads it" }) })
    .register(apiSchemas, { description: 'Every failure of the AGP routes' }),
);

export const agpEnvelopeSchema = named(
  'AgpEnvelope',
  z.object({
    transactionId: z.string(),
    operation: z.enum(['discover', 'query', 'execute']),
    businessId: z.string(),
    status: z.literal('succeeded'),
    data: z.unknown().register(apiSchemas, {
      description: "What the business answered; for execute, `{ status: 'succeeded' | 'pending_confirmation' | 'completed' | 'error' | 'failed', … }`",
    }),
    replayed: z.literal(true).optional().register(apiSchemas, {
      description:
        'Present when this execute had already run (the same agent, token and request): the stored answer, nothing run again; the header `Idempotent-Replayed: true` says the same',
    }),
  }),
);

export const prepareAnswerSchema = named(
  'AgpPrepareAnswer',
  z.object({
    confirmationToken: z.string().register(apiSchemas, { description: 'Single use; bound to this agent, business and request' }),
    expiresAt: z.string(),
    summary: z.string(),
    businessId: z.string(),
    proposalId: z.string().optional().register(apiSchemas, { description: 'Set when a human must approve first: follow it on GET /v1/proposals/{id}' }),
    approval: z
      .object({
        status: z.enum(['pending', 'approved', 'rejected']),
        quorum: z.int(),
        decidedBy: z.string().optional(),
        reason: z.string().nullable().optional(),
      })
      .optional()
      .register(apiSchemas, { description: 'Where a human (or a policy rule) decides: pending, or already decided at prepare' }),
  }),
);

export const executeHeadersSchema = z.looseObject({
  'x-confirmation-token': z.string().optional().register(apiSchemas, { description: 'The token from POST /agp/execute/prepare' }),
  'idempotency-key': z.string().optional().register(apiSchemas, { description: 'A retry with the same key gets the first answer back' }),
});

export type DiscoverBody = z.output<typeof discoverBodySchema>;
export type AgpCallBody = z.output<typeof agpCallBodySchema>;
export type AgpErrorBody = z.output<typeof agpErrorSchema>;
export type AgpEnvelopeAnswer = z.output<typeof agpEnvelopeSchema>;
export type PrepareAnswer = z.output<typeof prepareAnswerSchema>;
