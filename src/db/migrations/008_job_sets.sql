-- Jobs are written once, born with their result. Generation freezes a plan's matched set here, in chunks of
-- up to 1000 instance ids (ords first_ord .. first_ord + cardinality - 1), instead of writing one pending row
-- per instance that each batch then rewrites. A batch inserts the job rows of its range with their status,
-- log and before-image. A job with no row (or a Pending row, written before this migration) is Pending, or
-- Cancelled once its plan is Cancelled; the read model derives it from the set.
CREATE TABLE alteration_job_sets (
  plan_id       text NOT NULL REFERENCES alteration_plans (id) ON DELETE CASCADE,
  first_ord     integer NOT NULL,
  instance_ids  text[] NOT NULL,
  -- When the jobs were generated (every job of the set was created then).
  created_at    timestamptz NOT NULL,
  -- A revert plan's set: the ord of the reverted plan's job for each instance (what restores it).
  source_ords   integer[],
  PRIMARY KEY (plan_id, first_ord)
);

-- The id of a job that has no row yet: a UUIDv7 of its creation time and ord, as generation made them
-- before, with the random bits taken from the plan id and ord, so the same job reads with the same id
-- before and after it is processed.
CREATE FUNCTION wfa_job_id(plan_id text, ts timestamptz, seq bigint) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT (
    lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0')
    || '7' || lpad(to_hex((seq >> 26) & 4095), 3, '0')
    || to_hex(8 | ((seq >> 24) & 3))
    || lpad(to_hex(seq & 16777215), 6, '0')
    || substr(md5(plan_id || '/' || seq::text), 1, 9)
  )::uuid::text
$$;

-- Plans generated before: their sets from their job rows. Their Pending rows stay (with the ids already
-- shown) until a batch replaces them with the job's result.
INSERT INTO alteration_job_sets (plan_id, first_ord, instance_ids, created_at)
SELECT plan_id, ord / 1000 * 1000, array_agg(instance_id ORDER BY ord), min(created_at)
  FROM alteration_jobs GROUP BY plan_id, ord / 1000;
UPDATE alteration_job_sets s
   SET source_ords = (SELECT array_agg(o.ord ORDER BY m.k)
                        FROM unnest(s.instance_ids) WITH ORDINALITY AS m(instance_id, k)
                        JOIN alteration_jobs o ON o.plan_id = p.revert_of AND o.instance_id = m.instance_id)
  FROM alteration_plans p WHERE p.id = s.plan_id AND p.revert_of IS NOT NULL;

-- "One job per plan and instance" holds by construction now (a set is drawn from distinct rows), and a
-- revert finds the job it undoes by ord: the (plan, instance) index was only a cost on every job written.
ALTER TABLE alteration_jobs DROP CONSTRAINT alteration_jobs_plan_id_instance_id_key;
