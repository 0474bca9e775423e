-- A plan may check its effect (`verify`): after a job completes, its instance must come to match `verify.expect`
-- within `verify.withinSeconds`. A completed job of such a plan is Pending (0) until its instance matches (Verified,
-- 1) or the time passes (Unverified, 2, with the note its log shows); null for every other job.
ALTER TABLE alteration_plans ADD COLUMN verify jsonb;
ALTER TABLE alteration_jobs ADD COLUMN verification smallint CHECK (verification BETWEEN 0 AND 2);
ALTER TABLE alteration_jobs ADD COLUMN verified_at timestamptz;
ALTER TABLE alteration_jobs ADD COLUMN verification_note text;
-- The checks read only the jobs still Pending verification.
CREATE INDEX alteration_jobs_verifying ON alteration_jobs (plan_id, completed_at) WHERE verification = 0;
