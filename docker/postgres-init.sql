-- The service's own database beside Temporal's (`temporal` and `temporal_visibility`, created and brought to
-- their schema by the compose file's temporal-schema step with Temporal's temporal-sql-tool).
CREATE DATABASE workflow_alterations;
