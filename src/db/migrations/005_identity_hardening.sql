-- API keys may expire, show when they were last used, and are listed per tenant.
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz, ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at, id);

-- Failed sign-ins and unknown API keys, per user name ('user:<lower name>') and per client address
-- ('addr:<address>'), kept in Postgres so that every API node throttles the same guesses.
CREATE TABLE auth_throttle (
  key            text PRIMARY KEY,
  failures       integer NOT NULL,
  window_start   timestamptz NOT NULL,
  block_seconds  integer NOT NULL DEFAULT 0,
  blocked_until  timestamptz
);
