import type { Alteration, Filter } from './model.js';
import { specOf } from './types/index.js';

/** What a plan's one-line summary reads: its alterations and filter, the plan it reverts, the approval it awaits. */
export interface SummarizedPlan {
  alterations: readonly Alteration[];
  filter: Filter;
  revertOf?: string | null | undefined;
  approval?: { requestedBy: { kind: string; name: string } } | null | undefined;
}

/**
 * One line: what the plan does, to which instances ("ModifyVariable amount on instances of order-approval"):
 * each alteration in its type's own words (`AlterationTypeSpec.summary`).
 */
export function planSummary(plan: SummarizedPlan): string {
  if (plan.revertOf) return `Revert plan ${plan.revertOf}: restore the instances it changed`;
  const what = plan.alterations.map((a) => specOf(a).summary(a)).join(', ');
  const gated = plan.approval
    ? ` · needs approval by someone other than ${plan.approval.requestedBy.name} (alterations:approve)`
    : '';
  const f = plan.filter;
  const list = (values: readonly string[], max = 3) =>
    values.slice(0, max).join(', ') + (values.length > max ? ` and ${values.length - max} more` : '');
  const on = f.workflowInstanceIds?.length
    ? `${f.workflowInstanceIds.length} listed instance${f.workflowInstanceIds.length === 1 ? '' : 's'}`
    : f.definitionIds?.length
      ? `instances of ${list(f.definitionIds)}`
      : 'the instances the filter matches';
  return `${what} on ${on}${gated}`;
}
