import { policyDecider, type PolicyVerdict } from './rules.js';

/**
 * What a policy verdict means, said once: which decision, under which decider, for what reason,
 * with which approval, and the trace of every rule tried. The core records it when a rule decides a
 * proposal; `twokey policy test` prints it. A new kind of verdict is explained here, nowhere else.
 */

/** One rule tried, in order: `true` decided, `false` passed on, `error: …` could not be evaluated. */
export interface TraceStep {
  rule: string;
  when: string;
  result: string;
}

/** How the audit log names a rule: its place in the config and its condition. */
export interface RuleReference {
  path: string;
  when: string;
}

/** The approval people give: how many of whom. */
export interface Approval {
  quorum: number;
  approvers: string[];
}

/**
 * One verdict, explained. `decision: require` means people decide, with `quorum` of `approvers`;
 * `decidedBy` is `policy:<operation>#<index>` when a rule decided, null when the operation's own
 * approval simply applies (no rule matched, or the matching one could not be evaluated).
 */
export type VerdictExplanation = { trace: TraceStep[] } & (
  | ({ kind: 'none'; decision: 'require'; decidedBy: null; reason: string; rule: null } & Approval)
  /** Fail closed: the rule's condition could not be evaluated, so the operation's approval applies. */
  | ({ kind: 'fallback'; decision: 'require'; decidedBy: null; reason: string; rule: RuleReference; error: string } & Approval)
  /** `changes`: what the rule sets instead of the operation's approval (nothing when it only says "ask people"). */
  | ({ kind: 'require'; decision: 'require'; decidedBy: string; reason: string | null; rule: RuleReference; changes: ApprovalChanges } & Approval)
  | { kind: 'approve' | 'deny'; decision: 'approve' | 'deny'; decidedBy: string; reason: string; rule: RuleReference }
);

/** What a `require` rule sets instead of the operation's approval; `stepUp`: its approvals need a passkey. */
export type ApprovalChanges = Partial<Approval> & { stepUp?: 'passkey' };

/** The approval that applies when no rule changes it: the operation's (or the proposal's copy of it). */
export interface DefaultApproval {
  quorum: number;
  approvers: readonly string[];
}

export function explainVerdict(verdict: PolicyVerdict, operation: string, approval: DefaultApproval): VerdictExplanation {
  const trace = verdict.trace.map((step) => ({
    rule: `#${step.index}`,
    when: step.when,
    result: step.verdict.kind === 'undecided' ? `error: ${step.verdict.error}` : step.verdict.kind === 'match' ? 'true' : 'false',
  }));
  const people: Approval = { quorum: approval.quorum, approvers: [...approval.approvers] };
  if (verdict.kind === 'none') {
    return { kind: 'none', decision: 'require', decidedBy: null, reason: "no rule matched: the operation's approval applies", rule: null, ...people, trace };
  }
  const rule = { path: verdict.rule.path, when: verdict.rule.when.source };
  switch (verdict.kind) {
    case 'fallback':
      return {
        kind: 'fallback',
        decision: 'require',
        decidedBy: null,
        reason: `rule #${verdict.rule.index} could not be evaluated (${verdict.error}): the operation's approval applies`,
        rule,
        error: verdict.error,
        ...people,
        trace,
      };
    case 'require': {
      const changes: ApprovalChanges = {
        ...(verdict.quorum !== undefined ? { quorum: verdict.quorum } : {}),
        ...(verdict.approvers !== undefined ? { approvers: verdict.approvers } : {}),
        ...(verdict.stepUp !== undefined ? { stepUp: verdict.stepUp } : {}),
      };
      const decidedBy = policyDecider(operation, verdict.rule);
      return { kind: 'require', decision: 'require', decidedBy, reason: verdict.reason, rule, changes, ...people, ...changes, trace };
    }
    case 'approve':
    case 'deny':
      return { kind: verdict.kind, decision: verdict.kind, decidedBy: policyDecider(operation, verdict.rule), reason: verdict.reason, rule, trace };
  }
}
