-- Instance writes that change no indexed column are heap-only (HOT): the new row version goes on the same page and
-- no index gets a new entry. `updated_at` changes on every write, and its B-tree (tenant_id, updated_at) made every
-- write, a ModifyVariable plan's included, add an entry to each of the table's thirteen indexes. It goes: a filter
-- by UpdatedAt now reads the tenant's instances through the other indexes that start with the tenant (the one
-- filter field 001's rule no longer serves by an index of its own; docs/operations.md, Upgrades). Pages written
-- from now on keep room for new versions (fillfactor), which heap-only writes need on the row's own page.
-- The index is dropped last: its lock, which stops reads too, is held only for the rest of this transaction.
ALTER TABLE workflow_instances SET (fillfactor = 85);
DROP INDEX workflow_instances_tenant_updated;
