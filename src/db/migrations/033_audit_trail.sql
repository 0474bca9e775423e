-- The audit trail: one entry per state-changing request, sign-in and refusal, each tenant's entries a hash chain
-- (`hash` = SHA-256 over `prev_hash` and the entry; src/audit/trail.ts). `audit_heads` holds each tenant's last
-- seq and hash: an append locks its tenant's head row, so concurrent writers (several API nodes) queue there and
-- the chain neither forks nor skips a seq.
CREATE TABLE audit_entries (
  tenant_id text NOT NULL,
  seq bigint NOT NULL,
  at timestamptz NOT NULL,
  actor_kind text NOT NULL CHECK (actor_kind IN ('user', 'apiKey', 'anonymous')),
  actor_id text,
  actor_name text,
  action text NOT NULL,
  target_kind text,
  target_id text,
  outcome integer NOT NULL,
  trace_id text,
  address text,
  detail jsonb NOT NULL,
  prev_hash text NOT NULL,
  hash text NOT NULL,
  PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX audit_entries_at ON audit_entries (tenant_id, at);
CREATE INDEX audit_entries_target ON audit_entries (tenant_id, target_id, seq) WHERE target_id IS NOT NULL;

CREATE TABLE audit_heads (
  tenant_id text PRIMARY KEY,
  seq bigint NOT NULL,
  hash text NOT NULL,
  -- The hash before the last entry's: the append's one statement reads it back for the entry it writes.
  prev_hash text NOT NULL
);

-- Append-only: no UPDATE, no TRUNCATE, and a DELETE only inside the retention purge's transaction (which sets
-- wfa.audit_purge; src/audit/trail.ts purgeAuditEntries).
CREATE FUNCTION audit_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('wfa.audit_purge', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'audit entries are append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_entries_append_only BEFORE UPDATE OR DELETE ON audit_entries
  FOR EACH ROW EXECUTE FUNCTION audit_entries_append_only();
CREATE TRIGGER audit_entries_no_truncate BEFORE TRUNCATE ON audit_entries
  FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_append_only();
