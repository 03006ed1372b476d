import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TwokeyError, type ErrorCode, type ErrorDetail } from '../core/errors.js';

function send(reply: FastifyReply, request: FastifyRequest, code: ErrorCode, status: number, message: string, details?: ErrorDetail[]) {
  return reply.status(status).send({
    error: { code, message, requestId: request.id, ...(details && details.length > 0 ? { details } : {}) },
  });
}

/** fastify's own failures (parsing, schema, limits), translated into twokey's closed set of codes. */
function fromFastify(error: FastifyError): TwokeyError | null {
  if (error.validation) {
    const details = error.validation.map((issue) => ({
      path: issue.instancePath || (issue.params as { missingProperty?: string }).missingProperty || '',
      message:
        issue.keyword === 'additionalProperties'
          ? `unknown property "${(issue.params as { additionalProperty?: string }).additionalProperty ?? ''}"`
          : (issue.message ?? 'is invalid'),
    }));
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
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  switch (error.code) {
    case 'FST_ERR_BAD_URL':
      return send(reply, request, 'invalid_request', 400, 'the URL path is not valid percent-encoded UTF-8');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return send(reply, request, 'invalid_request', 400, 'a URL path segment is too long');
    default:
      request.log.error({ err: error }, 'unhandled framework error');
      return send(reply, request, 'internal', 500, 'internal error; see the server log for this requestId');
  }
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | TwokeyError, request, reply) => {
    const known = error instanceof TwokeyError ? error : fromFastify(error);
    if (known && known.status < 500) {
      return send(reply, request, known.code, known.status, known.message, known.details);
    }
    if (known) {
      request.log.warn({ code: known.code, err: known }, 'request failed');
      return send(reply, request, known.code, known.status, known.message);
    }
    // Never echo an unexpected failure's message: it may hold internals or secrets.
    request.log.error({ err: error }, 'unhandled error');
    return send(reply, request, 'internal', 500, 'internal error; see the server log for this requestId');
  });

  app.setNotFoundHandler((request, reply) =>
    send(reply, request, 'not_found', 404, `no route ${request.method} ${request.url.split('?')[0] ?? ''}`),
  );
}
