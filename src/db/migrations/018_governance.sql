-- Plan governance (four-eyes approval, maintenance windows): plan status AwaitingApproval 8, who submitted a
-- plan, its approval and schedule, the tenant's approval policy, and who created each API key (an approver
-- may not be the submitter's own key, nor the key's owner).
ALTER TABLE alteration_plans DROP CONSTRAINT alteration_plans_status_check;
ALTER TABLE alteration_plans ADD CONSTRAINT alteration_plans_status_check CHECK (status BETWEEN 0 AND 8);
-- {kind: 'user' | 'apiKey', id, name} of the principal that submitted it (null: stored before this release).
ALTER TABLE alteration_plans ADD COLUMN submitted_by jsonb;
-- {state, requestedBy, matchedCount, expiresAt, decidedBy, decidedAt, comment}; null: it needed none.
ALTER TABLE alteration_plans ADD COLUMN approval jsonb;
-- {notBefore?, windows?} as submitted; null: no schedule (or dropped by a resume with ignoreSchedule).
ALTER TABLE alteration_plans ADD COLUMN schedule jsonb;
-- When a plan paused by its schedule goes on by itself; null unless pause_reason = 'schedule'.
ALTER TABLE alteration_plans ADD COLUMN resumes_at timestamptz;
DROP INDEX alteration_plans_unfinished;
CREATE INDEX alteration_plans_unfinished ON alteration_plans (status) WHERE status < 4 OR status >= 7;

CREATE TABLE alteration_policies (
  tenant_id             text PRIMARY KEY,
  approval              text NOT NULL CHECK (approval IN ('never', 'always', 'above')),
  approval_threshold    integer CHECK (approval_threshold IS NULL OR approval_threshold >= 1),
  approval_ttl_seconds  integer NOT NULL CHECK (approval_ttl_seconds BETWEEN 60 AND 2592000),
  updated_at            timestamptz NOT NULL,
  updated_by            jsonb,
  CHECK (approval <> 'above' OR approval_threshold IS NOT NULL)
);

-- The principal that created the key ({kind, id}); null for the bootstrap key and keys made before this.
ALTER TABLE api_keys ADD COLUMN created_by jsonb;
