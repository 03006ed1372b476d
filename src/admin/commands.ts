import { TwokeyError } from '../core/errors.js';
import type { AdminCommand } from './command.js';
import { agentsCreate, agentsList, agentsRevoke } from './commands/agents.js';
import { auditList, auditVerify } from './commands/audit.js';
import { approversLink, approversRevokeSessions, jobsList, jobsRetry } from './commands/operators.js';
import { grantsList, grantsRevoke, policyTest } from './commands/policy.js';
import { proposalsApprove, proposalsList, proposalsReject, proposalsRetry } from './commands/proposals.js';

/**
 * Every operator command, by name: what the admin socket accepts, what the CLI runs and prints,
 * what the tests call. A command is added here and in its group's file, nowhere else.
 */
export const adminCommands = {
  'agents.create': agentsCreate,
  'agents.list': agentsList,
  'agents.revoke': agentsRevoke,
  'proposals.list': proposalsList,
  'proposals.approve': proposalsApprove,
  'proposals.reject': proposalsReject,
  'proposals.retry': proposalsRetry,
  'policy.test': policyTest,
  'grants.list': grantsList,
  'grants.revoke': grantsRevoke,
  'approvers.link': approversLink,
  'approvers.revoke-sessions': approversRevokeSessions,
  'jobs.list': jobsList,
  'jobs.retry': jobsRetry,
  'audit.list': auditList,
  'audit.verify': auditVerify,
} as const;

export type AdminCommandName = keyof typeof adminCommands;
export type AdminCommands = typeof adminCommands;

export function isAdminCommandName(name: string): name is AdminCommandName {
  return Object.hasOwn(adminCommands, name);
}

/** The command of that name, or an `invalid_request` naming the unknown one. */
export function adminCommand(name: string): AdminCommand {
  if (!isAdminCommandName(name)) throw new TwokeyError('invalid_request', `unknown admin operation "${name}"`);
  return adminCommands[name] as AdminCommand;
}
