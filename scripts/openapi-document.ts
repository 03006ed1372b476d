import openapiTS, { astToString } from 'openapi-typescript';

/**
 * What `npm run openapi` writes and what the tests compare against: the document served at
 * `GET /openapi.json` (the chat endpoints included, so every platform is configured for HTTP),
 * and the SDK's types generated from it.
 */

/** Slack, Discord and Teams over HTTP, so `/slack/events`, `/discord/interactions` and `/teams/messages` are in the document. Placeholders: nothing is called. */
export const documentedChatEnv = {
  SLACK_BOT_TOKEN: 'xoxb-openapi-document',
  SLACK_SIGNING_SECRET: 'openapi-document-signing-secret',
  DISCORD_BOT_TOKEN: 'openapi-document-bot-token',
  DISCORD_PUBLIC_KEY: '0380ae8e9fefcae755ffd8a907c0206325ced5ad4d9866165b185b5854800518',
  TEAMS_APP_ID: '00000000-0000-4000-8000-000000000000',
  TEAMS_APP_PASSWORD: 'openapi-document-app-password',
};

export const documentPath = new URL('../docs/openapi.json', import.meta.url);
export const sdkTypesPath = new URL('../packages/client/src/sdk/api-types.ts', import.meta.url);

export function documentText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

const SDK_TYPES_HEADER = `/**
 * Generated from docs/openapi.json by \`npm run openapi\` (openapi-typescript); do not edit.
 * Types only: the SDK imports them with \`import type\`, so it stays dependency-free at run time.
 */

`;

export async function sdkTypesText(document: unknown): Promise<string> {
  // openapi-typescript takes a parsed document or its text; the text keeps its input unmutated.
  const ast = await openapiTS(JSON.stringify(document), { alphabetize: true, exportType: true });
  return SDK_TYPES_HEADER + astToString(ast);
}
