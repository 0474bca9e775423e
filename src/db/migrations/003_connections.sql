-- Connection configurations: named JSON settings for external systems, per tenant ('*' = every tenant).
CREATE TABLE connection_configurations (
  id                       text PRIMARY KEY,
  tenant_id                text NOT NULL,
  name                     text NOT NULL CHECK (btrim(name) <> ''),
  description              text,
  connection_type          text NOT NULL,
  -- Exactly one of: the JSON in the clear, or AES-256-GCM ciphertext when CONNECTIONS_ENCRYPTION_KEY is set.
  configuration            jsonb,
  configuration_encrypted  bytea,
  created_at               timestamptz NOT NULL,
  updated_at               timestamptz NOT NULL,
  CONSTRAINT connection_configurations_name_unique UNIQUE (tenant_id, name),
  CHECK ((configuration IS NULL) <> (configuration_encrypted IS NULL))
);
CREATE INDEX connection_configurations_type ON connection_configurations (tenant_id, connection_type, name);
