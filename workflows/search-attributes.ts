import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * The search attributes of a plan workflow (contract section 7), so plans can be filtered in the Temporal
 * UI: `AlterationPlanStatus = "Running" AND AlterationTenant = "default"`. Shared by the workflow (which
 * keeps them current) and the starter (which sets them and registers them on the server).
 */
export const PLAN_STATUS_ATTRIBUTE = defineSearchAttributeKey('AlterationPlanStatus', SearchAttributeType.KEYWORD);
export const PLAN_TENANT_ATTRIBUTE = defineSearchAttributeKey('AlterationTenant', SearchAttributeType.KEYWORD);
export const PLAN_TYPES_ATTRIBUTE = defineSearchAttributeKey('AlterationTypes', SearchAttributeType.KEYWORD_LIST);

export const PLAN_SEARCH_ATTRIBUTES = [PLAN_STATUS_ATTRIBUTE, PLAN_TENANT_ATTRIBUTE, PLAN_TYPES_ATTRIBUTE] as const;
