-- Foundation: credentials, workflow definitions, instances and what their execution records.
-- The default tenant is stored as '' (so unique constraints and equality behave); the API shows it as null.

CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  tenant_id     text NOT NULL DEFAULT '',
  name          text NOT NULL,
  key_hash      text NOT NULL UNIQUE,
  permissions   text[] NOT NULL,
  is_bootstrap  boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now()
);
-- At most one generated bootstrap key, even when two processes start at once.
CREATE UNIQUE INDEX api_keys_single_bootstrap ON api_keys (is_bootstrap) WHERE is_bootstrap;

CREATE TABLE workflow_definitions (
  id                  text PRIMARY KEY,
  tenant_id           text NOT NULL,
  definition_id       text NOT NULL,
  version             integer NOT NULL CHECK (version >= 1),
  is_latest           boolean NOT NULL,
  is_published        boolean NOT NULL DEFAULT true,
  name                text,
  description         text,
  variables           jsonb NOT NULL,
  root                jsonb NOT NULL,
  options             jsonb NOT NULL,
  usable_as_activity  boolean NOT NULL DEFAULT false,
  created_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, definition_id, version)
);
CREATE UNIQUE INDEX workflow_definitions_one_latest ON workflow_definitions (tenant_id, definition_id) WHERE is_latest;

CREATE TABLE workflow_instances (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL,
  definition_id          text NOT NULL,
  definition_version_id  text NOT NULL REFERENCES workflow_definitions (id),
  version                integer NOT NULL,
  name                   text,
  correlation_id         text,
  status                 text NOT NULL CHECK (status IN ('Running', 'Finished')),
  sub_status             text NOT NULL CHECK (sub_status IN ('Pending', 'Executing', 'Suspended', 'Finished', 'Cancelled', 'Faulted')),
  is_system              boolean NOT NULL DEFAULT false,
  -- {variableId: value}
  variables              jsonb NOT NULL DEFAULT '{}',
  -- activity ids waiting to execute, in order
  scheduled              jsonb NOT NULL DEFAULT '[]',
  -- [{activityId, eventName}]
  bookmarks              jsonb NOT NULL DEFAULT '[]',
  -- [{activityId, activityType, message, timestamp}]
  incidents              jsonb NOT NULL DEFAULT '[]',
  incident_count         integer GENERATED ALWAYS AS (jsonb_array_length(incidents)) STORED,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  finished_at            timestamptz
);
-- Every filter field of the alteration filter is served by an index that starts with the tenant.
CREATE INDEX workflow_instances_tenant_created ON workflow_instances (tenant_id, created_at, id);
CREATE INDEX workflow_instances_tenant_updated ON workflow_instances (tenant_id, updated_at);
CREATE INDEX workflow_instances_tenant_finished ON workflow_instances (tenant_id, finished_at);
CREATE INDEX workflow_instances_tenant_correlation ON workflow_instances (tenant_id, correlation_id);
CREATE INDEX workflow_instances_tenant_name ON workflow_instances (tenant_id, name);
CREATE INDEX workflow_instances_tenant_definition ON workflow_instances (tenant_id, definition_id);
CREATE INDEX workflow_instances_tenant_definition_version ON workflow_instances (tenant_id, definition_version_id);
CREATE INDEX workflow_instances_tenant_status ON workflow_instances (tenant_id, status, sub_status);
CREATE INDEX workflow_instances_tenant_incidents ON workflow_instances (tenant_id, (incident_count > 0));
CREATE INDEX workflow_instances_tenant_system ON workflow_instances (tenant_id, is_system);
CREATE INDEX workflow_instances_bookmarks ON workflow_instances USING gin (bookmarks jsonb_path_ops);

-- One row per activity execution, in execution order (id).
CREATE TABLE activity_records (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance_id    text NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
  tenant_id      text NOT NULL,
  activity_id    text NOT NULL,
  node_id        text NOT NULL,
  activity_type  text NOT NULL,
  name           text,
  status         text NOT NULL CHECK (status IN ('Running', 'Completed', 'Canceled', 'Faulted')),
  inputs         jsonb NOT NULL DEFAULT '{}',
  started_at     timestamptz NOT NULL,
  completed_at   timestamptz
);
CREATE INDEX activity_records_instance ON activity_records (instance_id, id);
CREATE INDEX activity_records_activity ON activity_records (tenant_id, activity_id, status, instance_id);
CREATE INDEX activity_records_node ON activity_records (tenant_id, node_id, status, instance_id);
CREATE INDEX activity_records_name ON activity_records (tenant_id, name, status, instance_id);

CREATE TABLE journal_entries (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance_id  text NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
  activity_id  text NOT NULL,
  message      text NOT NULL,
  timestamp    timestamptz NOT NULL
);
CREATE INDEX journal_entries_instance ON journal_entries (instance_id, id);
