import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify';
import { TwokeyError, type ErrorCode, type ErrorDetail } from '../core/errors.js';
import { isDatabaseUnavailable } from '../lib/driver-errors.js';

/**
 * What a 503 `database_unavailable` asks the client to wait. The pool reconnects within about 2 s
 * of the database coming back; a restart takes a few seconds more.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/** Said the same way on every route: what the client can do, nothing of the driver's internals. */
export function databaseUnavailable(): TwokeyError {
  return new TwokeyError('database_unavailable', `twokey cannot reach its database right now; try again in ${DATABASE_RETRY_AFTER_SECONDS} seconds`);
}

/** The innermost error's code or name, for the log: enough to tell a refused connection from a closed one. */
function rootCause(error: unknown): string {
  let current: unknown = error;
  while (typeof current === 'object' && current !== null && (current as { cause?: unknown }).cause) current = (current as { cause?: unknown }).cause;
  const { code, name } = (current ?? {}) as { code?: unknown; name?: unknown };
  return String(code ?? name ?? 'unknown');
}

function send(reply: FastifyReply, request: FastifyRequest, code: ErrorCode, status: number, message: string, details?: ErrorDetail[]) {
  return reply.status(status).send({
    error: { code, message, requestId: request.id, ...(details && details.length > 0 ? { details } : {}) },
  });
}

/**
 * One schema error as twokey details. Route schemas are zod (fastify-type-provider-zod: `keyword` is
 * the zod issue code, `instancePath` a JSON pointer, "/" for the whole value); ajv's shape is kept
 * for any JSON-schema route. An unknown property is named, one detail each.
 */
function detailsOf(issue: FastifySchemaValidationError): ErrorDetail[] {
  const params = issue.params as { keys?: unknown; additionalProperty?: string; missingProperty?: string };
  const path = issue.instancePath === '/' ? '' : issue.instancePath;
  if (issue.keyword === 'unrecognized_keys' && Array.isArray(params.keys)) {
    return params.keys.map((key) => ({ path, message: `unknown property "${String(key)}"` }));
  }
  if (issue.keyword === 'additionalProperties') return [{ path, message: `unknown property "${params.additionalProperty ?? ''}"` }];
  return [{ path: path || params.missingProperty || '', message: issue.message ?? 'is invalid' }];
}

/** fastify's own failures (parsing, schema, limits), translated into twokey's closed set of codes. */
function fromFastify(error: FastifyError): TwokeyError | null {
  if (error.validation) {
    const details = error.validation.flatMap(detailsOf);
    const where = error.validationContext ?? 'request';
    return new TwokeyError('invalid_request', `${where} is invalid: ${details.map((d) => `${d.path || where} ${d.message}`).join('; ')}`, details);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new TwokeyError('invalid_json', 'the request body is not valid JSON');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new TwokeyError('payload_too_large', 'the request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new TwokeyError('invalid_request', 'unsupported content-type; send application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new TwokeyError('invalid_request', 'content-length does not match the body');
    default:
      break;
  }
  if (error instanceof SyntaxError) return new TwokeyError('invalid_json', 'the request body is not valid JSON');
  if (error.statusCode === 429) return new TwokeyError('rate_limited', 'too many requests; slow down');
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new TwokeyError('invalid_request', error.message);
  }
  return null;
}

/**
 * What fastify answers itself, before any route or hook (its `frameworkErrors`): a path that is not
 * valid percent-encoded UTF-8, an over-long path parameter. Said in twokey's shape; the path is not
 * quoted, as it may hold what a client should never have put in a URL.
 */
/** fastify's `frameworkErrors`: the reply is sent here, nothing is returned for fastify to wait on. */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  switch (error.code) {
    case 'FST_ERR_BAD_URL':
      send(reply, request, 'invalid_request', 400, 'the URL path is not valid percent-encoded UTF-8');
      return;
    case 'FST_ERR_MAX_PARAM_LENGTH':
      send(reply, request, 'invalid_request', 400, 'a URL path segment is too long');
      return;
    default:
      request.log.error({ err: error }, 'unhandled framework error');
      send(reply, request, 'internal', 500, 'internal error; see the server log for this requestId');
  }
}

/**
 * A TwokeyError raised below a library that wraps what it catches (drizzle wraps every driver error
 * in its own, with the original as `cause`): the storage guard refuses writes that way.
 */
function wrappedTwokeyError(error: unknown): TwokeyError | null {
  for (let cause = error, depth = 0; typeof cause === 'object' && cause !== null && depth < 5; depth += 1) {
    if (cause instanceof TwokeyError) return cause;
    cause = (cause as { cause?: unknown }).cause;
  }
  return null;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | TwokeyError, request, reply) => {
    if (isDatabaseUnavailable(error) || (error instanceof TwokeyError && error.code === 'database_unavailable')) {
      // Expected while PostgreSQL restarts: one line, without the failed query and its parameters.
      request.log.warn({ code: 'database_unavailable', cause: rootCause(error) }, 'database unavailable');
      reply.header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
      const answer = databaseUnavailable();
      return send(reply, request, answer.code, answer.status, answer.message);
    }
    const known = wrappedTwokeyError(error) ?? fromFastify(error);
    if (known && known.status < 500) {
      return send(reply, request, known.code, known.status, known.message, known.details);
    }
    // Logged once per change of the disk's state, not once per refused request.
    if (known?.code === 'insufficient_storage') return send(reply, request, known.code, known.status, known.message);
    if (known) {
      request.log.warn({ code: known.code, err: known }, 'request failed');
      return send(reply, request, known.code, known.status, known.message);
    }
    // Never echo an unexpected failure's message: it may hold internals or secrets.
    request.log.error({ err: error }, 'unhandled error');
    return send(reply, request, 'internal', 500, 'internal error; see the server log for this requestId');
  });

  app.setNotFoundHandler((request, reply) => send(reply, request, 'not_found', 404, `no route ${request.method} ${request.url.split('?')[0] ?? ''}`));
}
