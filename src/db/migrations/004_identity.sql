-- Users, roles and sessions. User names are unique across tenants (login names no tenant).
CREATE TABLE roles (
  id           text PRIMARY KEY,
  tenant_id    text NOT NULL,
  name         text NOT NULL CHECK (btrim(name) <> ''),
  permissions  text[] NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

CREATE TABLE users (
  id             text PRIMARY KEY,
  tenant_id      text NOT NULL,
  name           text NOT NULL CHECK (btrim(name) <> ''),
  password_hash  text NOT NULL,
  permissions    text[] NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_name_unique ON users (lower(name));

CREATE TABLE user_roles (
  user_id  text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role_id  text NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  PRIMARY KEY (user_id, role_id)
);

-- A session is one sign-in; its refresh tokens rotate. Deleting the user deletes its sessions.
CREATE TABLE sessions (
  id              text PRIMARY KEY,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  tenant_id       text NOT NULL,
  created_at      timestamptz NOT NULL,
  revoked_at      timestamptz,
  revoked_reason  text
);
CREATE INDEX sessions_user ON sessions (user_id);

-- One row per refresh token issued (by its jti); a token used once is rotated and may not be used again.
CREATE TABLE refresh_tokens (
  jti         text PRIMARY KEY,
  session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  issued_at   timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);
