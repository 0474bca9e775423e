-- The instance outbox: whatever changes an instance commits here first, and the instance's Temporal workflow
-- (`workflow-instance-{id}`, one for the instance's whole life) is told afterwards by a relay on the worker
-- (src/temporal/outbox-relay.ts). A crash between the commit and the telling loses nothing: the row stays
-- until the workflow was told. One row per instance: changes made while it waits coalesce, and `seq` says
-- whether the instance changed again while a relay was telling it (then it is told once more).
--
-- The workflow is told only what it needs: that the instance exists (an insert), a status or sub-status
-- change (its search attributes), a version change (its memo), and work it must run (scheduled work
-- changed while the instance can run it: an outbound call, a step with a resilience strategy). A plan that
-- only modifies variables, or whose scheduled step ran inline, adds no row.
CREATE SEQUENCE instance_outbox_seq;

CREATE TABLE instance_outbox (
  instance_id    text PRIMARY KEY,
  tenant_id      text NOT NULL,
  seq            bigint NOT NULL DEFAULT nextval('instance_outbox_seq'),
  -- A relay holds the row until then while it tells the workflow; a relay that died is replaced after it.
  claimed_until  timestamptz,
  -- Failed attempts to tell the workflow (Temporal unreachable): the relay backs off.
  attempts       integer NOT NULL DEFAULT 0,
  enqueued_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX instance_outbox_tenant_seq ON instance_outbox (tenant_id, seq);

-- A bulk load of instances that must not each get a workflow (the benches' and tests' seeded rows, an
-- import from another engine) sets `SET LOCAL wfa.outbox = 'off'` in its transaction.
CREATE FUNCTION wfa_instance_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('wfa.outbox', true) = 'off' THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id) VALUES (NEW.id, NEW.tenant_id)
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0;
  RETURN NULL;
END $$;

CREATE TRIGGER workflow_instances_outbox_insert AFTER INSERT ON workflow_instances
  FOR EACH ROW EXECUTE FUNCTION wfa_instance_outbox();

CREATE TRIGGER workflow_instances_outbox_update AFTER UPDATE ON workflow_instances
  FOR EACH ROW WHEN (
    OLD.status IS DISTINCT FROM NEW.status
    OR OLD.sub_status IS DISTINCT FROM NEW.sub_status
    OR OLD.version IS DISTINCT FROM NEW.version
    OR (NEW.scheduled IS DISTINCT FROM OLD.scheduled AND NEW.status = 'Running' AND NEW.sub_status <> 'Faulted'
        AND NEW.scheduled <> '[]'::jsonb)
  ) EXECUTE FUNCTION wfa_instance_outbox();

-- The upgrade: instances of the previous release ran as one short workflow run per dispatch, closed when
-- the instance suspended. Every instance still Running gets its lifelong workflow now.
INSERT INTO instance_outbox (instance_id, tenant_id)
SELECT id, tenant_id FROM workflow_instances WHERE status = 'Running'
ORDER BY created_at, id;
