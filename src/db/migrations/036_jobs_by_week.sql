-- The jobs table partitioned by week (contract section 13, retention): a job's created_at is its set's, the time its
-- plan's jobs were generated, so a plan's jobs lie in the week it was generated (two, when generation spans a
-- Monday). Retention (src/alterations/retention.ts) drops a week's partition whole once no plan with jobs in it is
-- left, instead of deleting its rows (no dead tuples, no lock on the table requests use but SHARE UPDATE
-- EXCLUSIVE, which no request takes).
--
-- Partitions are named alteration_jobs_YYYYMMDD after their Monday (UTC) and made by wfa_job_partition: by this
-- migration for this week and the next four, by each worker's retention sweep four weeks ahead, and by job
-- generation for the week of its own clock when that week has none yet.

-- A purged plan's id is not used again (src/alterations/plan-store/submission.ts), in any tenant.
CREATE INDEX purged_plans_id ON purged_plans (id);

-- Which plans have jobs in a week: their sets (one row per 1,000 jobs), by time.
CREATE INDEX alteration_job_sets_created ON alteration_job_sets (created_at);

-- The table as the releases before left it, kept whole (its rows are not copied): a partition for everything
-- before the next Monday.
ALTER TABLE alteration_jobs RENAME TO alteration_jobs_legacy;
ALTER TABLE alteration_jobs_legacy RENAME CONSTRAINT alteration_jobs_pkey TO alteration_jobs_legacy_pkey;
ALTER INDEX alteration_jobs_instance RENAME TO alteration_jobs_legacy_instance;
ALTER INDEX alteration_jobs_verifying RENAME TO alteration_jobs_legacy_verifying;

CREATE TABLE alteration_jobs (
  plan_id           text NOT NULL,
  ord               integer NOT NULL,
  id                text NOT NULL,
  instance_id       text NOT NULL,
  status            smallint NOT NULL DEFAULT 0 CONSTRAINT alteration_jobs_status_check CHECK (status BETWEEN 0 AND 5),
  log               jsonb,
  created_at        timestamptz NOT NULL,
  started_at        timestamptz,
  completed_at      timestamptz,
  undo              jsonb,
  revision          bigint,
  verification      smallint CONSTRAINT alteration_jobs_verification_check CHECK (verification BETWEEN 0 AND 2),
  verified_at       timestamptz,
  verification_note text,
  -- (plan_id, ord) is unique too: every job of an ord has its set's created_at.
  PRIMARY KEY (plan_id, ord, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX alteration_jobs_instance ON alteration_jobs (instance_id, id);
CREATE INDEX alteration_jobs_verifying ON alteration_jobs (plan_id, completed_at) WHERE verification = 0;

-- The partition of the week holding `at`, made unless a partition holds `at` already; its name. A table made on its
-- own with its bounds checked, then attached: ATTACH takes SHARE UPDATE EXCLUSIVE on alteration_jobs (CREATE TABLE
-- ... PARTITION OF would take ACCESS EXCLUSIVE), and finds its rows proven by the check instead of reading them.
CREATE FUNCTION wfa_job_partition(at timestamptz) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  lo timestamptz := date_trunc('week', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  hi timestamptz := lo + interval '7 days';
  part text := 'alteration_jobs_' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD');
  holder text;
BEGIN
  holder := wfa_job_partition_holding(at);
  IF holder IS NOT NULL THEN RETURN holder; END IF;
  -- Two makers of one week take turns; the second finds it made.
  PERFORM pg_advisory_xact_lock(7304119512);
  holder := wfa_job_partition_holding(at);
  IF holder IS NOT NULL THEN RETURN holder; END IF;
  EXECUTE format('CREATE TABLE %I (LIKE alteration_jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L)',
                 part, part || '_week', lo, hi);
  EXECUTE format('ALTER TABLE alteration_jobs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
  RETURN part;
END $$;

-- The partitions of alteration_jobs with their bounds (lo is NULL for the one from MINVALUE), those being
-- detached included.
CREATE FUNCTION wfa_job_partitions(OUT name text, OUT lo timestamptz, OUT hi timestamptz, OUT detaching boolean)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
  SELECT c.relname::text,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)')::timestamptz,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz,
         i.inhdetachpending
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'alteration_jobs'::regclass
$$;

CREATE FUNCTION wfa_job_partition_holding(at timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT name FROM wfa_job_partitions() WHERE (lo IS NULL OR lo <= at) AND at < hi LIMIT 1
$$;

-- The rows written before: attached as they are when there are any (their week partitions follow), else dropped.
DO $$
DECLARE
  next_monday timestamptz := date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '7 days';
BEGIN
  IF EXISTS (SELECT 1 FROM alteration_jobs_legacy) THEN
    -- The one check a release before left unproven (032), proven now so that the partition matches its table.
    ALTER TABLE alteration_jobs_legacy VALIDATE CONSTRAINT alteration_jobs_status_check;
    -- Its old key, (plan_id, ord), gives way to the table's (plan_id, ord, created_at), which ATTACH builds.
    ALTER TABLE alteration_jobs_legacy DROP CONSTRAINT alteration_jobs_legacy_pkey;
    EXECUTE format('ALTER TABLE alteration_jobs ATTACH PARTITION alteration_jobs_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                   next_monday);
  ELSE
    DROP TABLE alteration_jobs_legacy;
  END IF;
  FOR w IN 0..4 LOOP
    PERFORM wfa_job_partition(now() + make_interval(days => 7 * w));
  END LOOP;
END $$;

-- A plan purged by retention leaves its jobs to their partition (the purge says so with wfa.keep_jobs); any other
-- delete of a plan takes its jobs with it, as before.
CREATE OR REPLACE FUNCTION wfa_delete_plan_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('wfa.keep_jobs', true) = 'on' THEN RETURN NULL; END IF;
  DELETE FROM alteration_jobs j USING gone WHERE j.plan_id = gone.id;
  RETURN NULL;
END $$;
