-- GET /workflow-instances pages newest first (created_at DESC, id DESC) within an equality filter. Each
-- filtered column gets an index that ends in (created_at, id), so a page of a filtered list reads about
-- `limit` index entries however old the matching instances are, instead of walking every instance of the
-- tenant or sorting every match. The indexes they replace are their prefixes (the alteration filter's
-- `= ANY` lookups use the new ones the same way), so writes pay for one index more than before, not four.
CREATE INDEX workflow_instances_tenant_definition_created ON workflow_instances (tenant_id, definition_id, created_at, id);
CREATE INDEX workflow_instances_tenant_correlation_created ON workflow_instances (tenant_id, correlation_id, created_at, id);
CREATE INDEX workflow_instances_tenant_status_created ON workflow_instances (tenant_id, status, created_at, id);
CREATE INDEX workflow_instances_tenant_sub_status_created ON workflow_instances (tenant_id, sub_status, created_at, id);
DROP INDEX workflow_instances_tenant_definition;
DROP INDEX workflow_instances_tenant_correlation;
DROP INDEX workflow_instances_tenant_status;
