import { z } from 'zod';
import { errorStatus, type ErrorCode } from '../core/errors.js';

/**
 * What every HTTP API of twokey shares in its OpenAPI document: descriptions and names live in
 * `apiSchemas` (not zod's global registry, which every zod user in the process shares):
 * `.register(apiSchemas, { description })`, and `named` schemas become `components.schemas` entries
 * (`$ref`s). The error body is the one every agent route answers a failure with.
 */
export const apiSchemas = z.registry<{ id?: string; description?: string }>();

/** A schema that becomes a `components.schemas` entry, keeping the description it was given. */
export function named<T extends z.ZodType>(id: string, schema: T): T {
  apiSchemas.add(schema, { ...apiSchemas.get(schema), id });
  return schema;
}

const errorCodes = Object.keys(errorStatus) as [ErrorCode, ...ErrorCode[]];

export const errorDetailSchema = named(
  'ErrorDetail',
  z.object({
    path: z.string().register(apiSchemas, { description: 'JSON pointer of the offending value ("" for the whole body)' }),
    message: z.string(),
  }),
);

export const errorBodySchema = named(
  'Error',
  z
    .object({
      error: z.object({
        code: z.enum(errorCodes).register(apiSchemas, { description: 'Stable machine-readable code; the message is for humans' }),
        message: z.string(),
        requestId: z.string().register(apiSchemas, { description: 'Also in the server log line of this request' }),
        details: z.array(errorDetailSchema).optional().register(apiSchemas, { description: 'Every schema error, on a 400' }),
      }),
    })
    .register(apiSchemas, { description: 'Every failure of the agent API' }),
);
