import swagger, { type SwaggerTransformObject } from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { apiSchemas } from '../http-kit/api-schemas.js';

/**
 * The OpenAPI 3.1 document of the routes that declare tags (agent API, AGP, health, chat
 * endpoints), generated from their zod schemas and served at `GET /openapi.json`. Must be
 * registered before the routes it describes: @fastify/swagger collects routes as they are added.
 * The web console is a browser UI and declares no tags, so it stays out.
 */
const ANSWER_TEXT: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '503': 'Not ready',
  '4XX': 'Refused; `error.code` says why and nothing changed',
  '5XX': "Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid)",
};

/**
 * Two finishing touches: fastify-type-provider-zod writes every named schema twice, as read
 * (`XInput`) and as written (`X`), and ours are answers, so the copies no request refers to are
 * dropped; and answers @fastify/swagger calls "Default Response" get the component's description
 * or a plain one.
 */
interface PlainResponse {
  description?: string;
  content?: Record<string, { schema?: { $ref?: string } }>;
}

interface PlainDocument {
  paths?: Record<string, Record<string, { responses?: Record<string, PlainResponse> }>>;
  components?: { schemas?: Record<string, { description?: string }> };
}

function finished(transform: SwaggerTransformObject): SwaggerTransformObject {
  return (input) => {
    // A plain JSON copy: the OpenAPI type unions say nothing this needs.
    const document: PlainDocument = JSON.parse(JSON.stringify(transform(input)));
    const schemas = document.components?.schemas ?? {};
    const referenced = JSON.stringify(document.paths ?? {});
    for (const name of Object.keys(schemas)) {
      if (name.endsWith('Input') && !referenced.includes(`"#/components/schemas/${name}"`)) delete schemas[name];
    }
    for (const pathItem of Object.values(document.paths ?? {})) {
      for (const operation of Object.values(pathItem)) {
        for (const [status, response] of Object.entries(operation.responses ?? {})) {
          if (response.description !== 'Default Response') continue;
          const ref = response.content?.['application/json']?.schema?.$ref?.replace('#/components/schemas/', '');
          const described = status.startsWith('2') && ref ? schemas[ref]?.description : undefined;
          response.description = described ?? ANSWER_TEXT[status] ?? 'Answer';
        }
      }
    }
    return document as ReturnType<SwaggerTransformObject>;
  };
}

export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'twokey',
        version: '1',
        description:
          'Two-key approval bridge for AI agents: an agent proposes an operation, an authorised human approves it in Slack, Discord or the web console, and twokey runs it exactly once. Errors are `{"error":{"code","message","requestId"}}`; the AGP routes repeat the message at the top level.',
      },
      components: {
        securitySchemes: {
          agentKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'The agent API key, `tk_agent_…` (created with `twokey agents create`, shown once).',
          },
        },
      },
      tags: [
        { name: 'agent API', description: 'Propose, follow, commit and cancel proposals (`/v1`).' },
        { name: 'AGP', description: 'The AGP Execute Handoff dialect (`/agp`).' },
        { name: 'chat', description: "Slack's and Discord's callbacks; signed by the platform, not for agents." },
        { name: 'health', description: 'Liveness, readiness and metrics; no authentication.' },
      ],
    },
    hideUntagged: true,
    transform: createJsonSchemaTransform({ schemaRegistry: apiSchemas }),
    transformObject: finished(createJsonSchemaTransformObject({ schemaRegistry: apiSchemas })),
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
