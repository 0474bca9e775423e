/** Workflow ids are derived from domain ids, never random: one execution per instance, one per plan. */
export const instanceWorkflowId = (instanceId: string) => `workflow-instance-${instanceId}`;
export const planWorkflowId = (planId: string) => `alteration-plan-${planId}`;
