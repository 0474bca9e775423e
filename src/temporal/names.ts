/** Workflow ids are derived from domain ids, never random: one execution per instance, one per plan. */
export const instanceWorkflowId = (instanceId: string) => `workflow-instance-${instanceId}`;
export const planWorkflowId = (planId: string) => `alteration-plan-${planId}`;

export const WORKFLOW_TYPES = {
  instanceExecution: 'instanceExecution',
  alterationPlan: 'alterationPlan',
} as const;

/** Signal that tells a running instance execution that new work was scheduled. */
export const WORK_AVAILABLE_SIGNAL = 'workAvailable';
