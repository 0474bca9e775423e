-- An instance's definition is its version's, and Postgres now holds it so: a foreign key from the pair
-- (definition_id, definition_version_id) to workflow_definitions (definition_id, id), beside the one from the
-- version alone. The service always wrote the pair so (an instance starts from a version and takes its
-- definition; Migrate moves it to another version of the same definition; nothing changes an instance's
-- definition_id, or a definition's id or definition_id).
--
-- What it gives: a count by definition (`POST /alterations/dry-run?countOnly=true` with definitionIds) counts the
-- instances of that definition's versions from the small (tenant_id, definition_version_id) index (its entries
-- deduplicated: about 6.5 MB for 1,000,000 instances), where a count by definition_id read the whole table (about
-- 290 MB for the same); src/alterations/filter.ts `countInstances`, bench/README.md.
--
-- Brief, and nothing is read here: the key is added NOT VALID (it holds for every row written from now on) and
-- checked over the existing rows by migration 023, in a transaction of its own, where reads and writes go on.
-- The tables are locked first, the stronger lock of the two statements at once, so that this transaction never
-- waits for a lock while it holds one another transaction waits for. Instances written or re-versioned pay one
-- check more (an index lookup in a small table); a plan's UPDATE that leaves the pair as it was pays none.
LOCK TABLE workflow_definitions, workflow_instances IN SHARE ROW EXCLUSIVE MODE;
CREATE UNIQUE INDEX workflow_definitions_definition_version ON workflow_definitions (definition_id, id);
ALTER TABLE workflow_instances
  ADD CONSTRAINT workflow_instances_version_of_definition
  FOREIGN KEY (definition_id, definition_version_id) REFERENCES workflow_definitions (definition_id, id) NOT VALID;
