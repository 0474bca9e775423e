import { escapeLike } from '../db/sql.js';

/** One incident an instance must have: each given field matches (the message as a case-insensitive substring). */
export interface IncidentMatch {
  activityId?: string | null | undefined;
  activityType?: string | null | undefined;
  messageContains?: string | null | undefined;
}

/**
 * Incident filters: for each entry, one of the instance's incidents matches all its given fields. Only instances
 * with incidents are read (their own index); an instance's incidents are few, so each entry is an EXISTS over them.
 */
export function incidentCondition(entries: readonly IncidentMatch[], param: (value: unknown) => string): string {
  const each = entries.map((e) => {
    const matches = [
      ...(e.activityId != null ? [`e->>'activityId' = ${param(e.activityId)}`] : []),
      ...(e.activityType != null ? [`e->>'activityType' = ${param(e.activityType)}`] : []),
      ...(e.messageContains != null ? [`e->>'message' ILIKE ${param(`%${escapeLike(e.messageContains)}%`)}`] : []),
    ];
    return `EXISTS (SELECT 1 FROM jsonb_array_elements(i.incidents) e${matches.length ? ` WHERE ${matches.join(' AND ')}` : ''})`;
  });
  return ['(i.incident_count > 0)', ...each].join(' AND ');
}
