-- A new instance's workflow is started with where the instance stands as its input (the relay's
-- `workflow.start`, eager where the worker is in the same process), not with a signal-with-start: one request,
-- no signal event, and the first workflow task handed straight to the relay's worker instead of through
-- Temporal's matching. `created` marks a row whose instance has had no workflow yet: set by the insert, kept
-- while the row waits, cleared once a relay started the workflow. A row without it is told by signal-with-start,
-- as before (which also starts a workflow where none is running: the upgrade's rows, a reopened instance).
ALTER TABLE instance_outbox ADD COLUMN created boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION wfa_instance_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('wfa.outbox', true) = 'off' THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id, created) VALUES (NEW.id, NEW.tenant_id, TG_OP = 'INSERT')
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0;
  RETURN NULL;
END $$;
