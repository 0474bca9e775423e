-- A plan whose set was fixed while it waited for approval runs exactly that set: a job whose instance no longer
-- matches the plan's filter when its batch runs ends Skipped (5), its instance left as it was. Each batch counts
-- its skipped jobs beside the completed and failed ones; the finished plan records how many instances match the
-- filter now that were not in its set (`drift_joined`).
-- The wider check is added NOT VALID: every existing row met the narrower one, so nothing is scanned while the
-- migration's transaction holds the table (a VALIDATE would read every job under that lock).
ALTER TABLE alteration_jobs DROP CONSTRAINT alteration_jobs_status_check;
ALTER TABLE alteration_jobs ADD CONSTRAINT alteration_jobs_status_check CHECK (status BETWEEN 0 AND 5) NOT VALID;
ALTER TABLE alteration_batch_counts ADD COLUMN skipped integer NOT NULL DEFAULT 0;
ALTER TABLE alteration_plans ADD COLUMN drift_joined integer;
