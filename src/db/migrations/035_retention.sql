-- Retention (src/alterations/retention.ts): what the purge removed answers for itself. A purged plan keeps a row
-- here, so that its address answers 404 "This plan was purged after {n} days" rather than "not found", and a
-- revert of it a 409 saying why.
CREATE TABLE purged_plans (
  tenant_id text NOT NULL,
  id text NOT NULL,
  retention_days integer NOT NULL,
  purged_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
-- The sweep's reads: finished plans by when they finished, finished instances by when they finished (all tenants).
CREATE INDEX alteration_plans_finished ON alteration_plans (completed_at) WHERE status IN (4, 5, 6);
CREATE INDEX workflow_instances_finished ON workflow_instances (finished_at) WHERE status = 'Finished';
