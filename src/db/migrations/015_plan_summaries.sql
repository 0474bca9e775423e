-- What a plan summary shows of its alterations (GET /alterations, contract section 8 "Plan lists"): the
-- distinct alteration types in order of first use and how many alterations there are. Kept in columns of
-- their own, computed by Postgres from the body when a row is written (stored generated columns: every
-- writer gets them right, and adding them computes them for every plan already stored, in one rewrite of
-- the table under its lock), so that a page of summaries reads neither the body nor its TOAST. Computed at
-- read time from `alterations` they would decompress the whole body (up to MAX_BODY_BYTES) of every plan on
-- the page: measured, 100 plans of 1 MiB took 110 ms a page that way and 1 ms from these columns.
-- Lenient on purpose: a row an older version or a test wrote (a body that is not an array, an entry without
-- a type) gets what can be read of it, never an error that would refuse the row or this migration.
CREATE FUNCTION wfa_alteration_types(alterations jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(t ORDER BY first_use), '{}')
    FROM (SELECT e ->> 'type' AS t, min(i) AS first_use
            FROM jsonb_array_elements(CASE jsonb_typeof(alterations) WHEN 'array' THEN alterations ELSE '[]' END)
                 WITH ORDINALITY AS x(e, i)
           WHERE e ->> 'type' IS NOT NULL
           GROUP BY 1) d
$$;

ALTER TABLE alteration_plans
  ADD COLUMN alteration_types text[] NOT NULL GENERATED ALWAYS AS (wfa_alteration_types(alterations)) STORED,
  ADD COLUMN alteration_count integer NOT NULL GENERATED ALWAYS AS (
    CASE jsonb_typeof(alterations) WHEN 'array' THEN jsonb_array_length(alterations) ELSE 0 END) STORED;
