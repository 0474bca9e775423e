-- Splitting a change must not get around an approval policy of `above N` (contract section 10): the instances a
-- tenant changed without a second principal's approval, by plans (counted when their jobs are made) and by runs,
-- over the last hour. A plan or run that would take the hour's count past N needs approval. Rows older than an
-- hour no longer matter and are dropped as the tenant's next change is counted.
CREATE TABLE unapproved_changes (
  tenant_id  text NOT NULL,
  at         timestamptz NOT NULL,
  instances  integer NOT NULL CHECK (instances > 0),
  -- The plan that made the change (null: a run of POST /alterations/run).
  plan_id    text
);
CREATE INDEX unapproved_changes_tenant_at ON unapproved_changes (tenant_id, at);
