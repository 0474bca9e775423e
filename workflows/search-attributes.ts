import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * The search attributes of a plan workflow (contract section 7), so plans can be filtered in the Temporal
 * UI: `AlterationPlanStatus = "Running" AND AlterationTenant = "default"`. Shared by the workflow (which
 * keeps them current) and the starter (which sets them and registers them on the server).
 */
export const PLAN_STATUS_ATTRIBUTE = defineSearchAttributeKey('AlterationPlanStatus', SearchAttributeType.KEYWORD);
export const PLAN_TENANT_ATTRIBUTE = defineSearchAttributeKey('AlterationTenant', SearchAttributeType.KEYWORD);
export const PLAN_TYPES_ATTRIBUTE = defineSearchAttributeKey('AlterationTypes', SearchAttributeType.KEYWORD_LIST);

/**
 * An instance execution (`workflow-instance-{id}`) carries the instance's state as it left it ("Running/
 * Suspended"), its definition, and its tenant (AlterationTenant, as plans do), so the UI can find them.
 */
export const INSTANCE_STATUS_ATTRIBUTE = defineSearchAttributeKey(
  'WorkflowInstanceStatus',
  SearchAttributeType.KEYWORD,
);
export const DEFINITION_ATTRIBUTE = defineSearchAttributeKey('WorkflowDefinitionId', SearchAttributeType.KEYWORD);
/**
 * The last plans whose change its workflow was told of (at most PLAN_IDS_KEPT, oldest first), so that
 * `AlterationPlanIds = "{planId}"` lists in the UI the instances a plan touched. A change its workflow is not told
 * of (a variable set on a suspended instance: nothing for the workflow to do) does not show here; the API's
 * `GET /workflow-instances/{id}/alterations` lists every plan.
 */
export const PLAN_IDS_ATTRIBUTE = defineSearchAttributeKey('AlterationPlanIds', SearchAttributeType.KEYWORD_LIST);
export const PLAN_IDS_KEPT = 10;

/** Every search attribute the service uses: registered at start (src/temporal/search-attributes.ts). */
export const SEARCH_ATTRIBUTES = [
  PLAN_STATUS_ATTRIBUTE,
  PLAN_TENANT_ATTRIBUTE,
  PLAN_TYPES_ATTRIBUTE,
  INSTANCE_STATUS_ATTRIBUTE,
  DEFINITION_ATTRIBUTE,
  PLAN_IDS_ATTRIBUTE,
] as const;
