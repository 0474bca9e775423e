-- A job row's plan is not looked up once per row any more. The foreign key made every job insert
-- run a lookup of its plan (1,000 per batch, ~8 µs each: about a third of the job insert's cost, measured in
-- bench/README.md). Jobs are inserted only by a batch that holds its plan row FOR SHARE in the same
-- transaction (src/alterations/processing.ts), so the plan exists and cannot go away before the jobs commit.
-- What the foreign key also did, removing a deleted plan's jobs, is this statement-level trigger.
ALTER TABLE alteration_jobs DROP CONSTRAINT alteration_jobs_plan_id_fkey;

CREATE FUNCTION wfa_delete_plan_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM alteration_jobs j USING gone WHERE j.plan_id = gone.id;
  RETURN NULL;
END $$;

CREATE TRIGGER alteration_plans_delete_jobs AFTER DELETE ON alteration_plans
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION wfa_delete_plan_jobs();

-- Jobs are no longer rewritten in place (a batch inserts each job once, with its result): the free space
-- kept for updates of Pending rows only made the table and its WAL larger.
ALTER TABLE alteration_jobs SET (fillfactor = 100);
