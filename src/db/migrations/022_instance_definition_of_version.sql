-- An instance's definition is its version's, and Postgres now holds it so: the foreign key from the instance's
-- version goes to the pair (definition, version) instead of the version alone. The service always wrote the pair
-- so (an instance starts from a version and takes its definition; Migrate moves it to another version of the
-- same definition), and no statement changes an instance's definition_id.
--
-- What it gives: a count by definition (`POST /alterations/dry-run?countOnly=true` with definitionIds) can count
-- the instances of that definition's versions from the small (tenant_id, definition_version_id) index (its
-- entries deduplicated: about 6 MB for 1,000,000 instances), where a count by definition_id read the whole table
-- (about 290 MB for the same); src/alterations/filter.ts `countInstances`, bench/README.md.
--
-- VALIDATE reads every instance once, under a lock that lets reads and writes go on.
CREATE UNIQUE INDEX workflow_definitions_definition_version ON workflow_definitions (definition_id, id);
ALTER TABLE workflow_definitions
  ADD CONSTRAINT workflow_definitions_definition_version UNIQUE USING INDEX workflow_definitions_definition_version;
ALTER TABLE workflow_instances
  ADD CONSTRAINT workflow_instances_version_of_definition
  FOREIGN KEY (definition_id, definition_version_id) REFERENCES workflow_definitions (definition_id, id) NOT VALID;
ALTER TABLE workflow_instances VALIDATE CONSTRAINT workflow_instances_version_of_definition;
-- The pair's key holds the version's alone: one check per instance written, as before.
ALTER TABLE workflow_instances DROP CONSTRAINT workflow_instances_definition_version_id_fkey;
