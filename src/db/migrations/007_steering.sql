-- Steering plans (contract section 7): pause and resume (status Paused 7), rollout controls, revert.
ALTER TABLE alteration_plans DROP CONSTRAINT alteration_plans_status_check;
ALTER TABLE alteration_plans ADD CONSTRAINT alteration_plans_status_check CHECK (status BETWEEN 0 AND 7);
-- {rate?, canary?, stopOnFailureRatio?} as submitted and patched; null: no rollout controls.
ALTER TABLE alteration_plans ADD COLUMN rollout jsonb;
-- Why a Paused plan is paused: 'manual' (POST …/pause), 'canary' or 'failures'; null unless Paused.
ALTER TABLE alteration_plans ADD COLUMN pause_reason text;
-- The plan this one reverts. One revert per plan: a second is a 409 naming the first.
ALTER TABLE alteration_plans ADD COLUMN revert_of text REFERENCES alteration_plans (id);
-- Grows with every pause, resume, rollout change and cancel: the plan workflow ignores a reading of the
-- row older than one it already has (a batch that read it before a resume answers after it).
ALTER TABLE alteration_plans ADD COLUMN steering integer NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX alteration_plans_revert_of ON alteration_plans (revert_of) WHERE revert_of IS NOT NULL;
DROP INDEX alteration_plans_unfinished;
CREATE INDEX alteration_plans_unfinished ON alteration_plans (status) WHERE status < 4 OR status = 7;

-- Every write of an instance (execution steps, alterations, run, retry) adds one: what a revert compares to
-- know whether anything changed an instance since the job it undoes.
ALTER TABLE workflow_instances ADD COLUMN revision bigint NOT NULL DEFAULT 0;

-- A job that changed its instance records what restores it: `undo` holds the changed parts only, as
-- [[JSON pointer, value before]] ([pointer] alone: absent before), and `revision` the instance revision it
-- wrote. Null for a job that changed nothing (failed, cancelled, pending).
ALTER TABLE alteration_jobs ADD COLUMN undo jsonb;
ALTER TABLE alteration_jobs ADD COLUMN revision bigint;
