import { configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';

/**
 * The operations the MCP tests gate: one commits through the agent, one on approval. The shared
 * test config's two operations, with the MCP tests' approvers, wording and 10-minute expiry.
 */
export const mcpConfigYaml = configYaml([
  upgradePlanOperation({
    summary: '{{agent}} wants to move {{params.org}} to {{params.plan}}.',
    expiresIn: '10m',
    approvers: ['web:alice', 'web:bob'],
    quorum: 1,
    slack: 'C0APPROVALS',
    commit: 'agent',
  }),
  deleteWorkspaceOperation({ approvers: ['web:alice', 'web:bob'], quorum: 1, commit: 'on_approve' }),
]);
