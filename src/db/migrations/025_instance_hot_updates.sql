-- Instance writes that change no indexed column are heap-only (HOT): the new row version goes on the same page and
-- no index gets a new entry. `updated_at` changes on every write, and its B-tree (tenant_id, updated_at) made
-- every write, a ModifyVariable plan's included, add an entry to each of the table's fifteen indexes. A BRIN
-- index (block ranges, no pointer per row) serves the UpdatedAt filter instead: since PostgreSQL 16, a column
-- indexed only by BRIN does not keep an update from being HOT. Pages keep room for the new versions (fillfactor).
DROP INDEX workflow_instances_tenant_updated;
CREATE INDEX workflow_instances_updated_brin ON workflow_instances USING brin (updated_at) WITH (autosummarize = on);
ALTER TABLE workflow_instances SET (fillfactor = 85);
