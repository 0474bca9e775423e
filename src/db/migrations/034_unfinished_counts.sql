-- The Dashboard's unfinished instances per definition and sub-status, read from an index alone (an index-only
-- scan; dedup'd, a few MB for a million instances). Its columns are indexed already, so updates that were HOT
-- stay HOT.
CREATE INDEX workflow_instances_unfinished_counts
  ON workflow_instances (tenant_id, status, definition_id, sub_status);
