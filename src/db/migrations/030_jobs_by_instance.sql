-- An instance's changes (`GET /workflow-instances/{id}/alterations`): the jobs that touched it, newest first (a job
-- id is a UUIDv7 of its plan's generation time).
CREATE INDEX alteration_jobs_instance ON alteration_jobs (instance_id, id);
