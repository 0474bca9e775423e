-- An instance's workflow shows the instance's story in the Temporal UI (its current details and result:
-- workflows/instance-story.ts), read by the relay with where the instance stands. Two things its outbox did
-- not say:
--
-- - A change of what it waits on or of its incidents, with its status unchanged: a trigger that resumes an
--   instance which runs on to its next event (Suspended before and after, on another bookmark), a retry that
--   faults again with another message. The workflow went on saying "waiting on approve" when the instance
--   waited on "ship". Now such a change queues a row too. A ModifyVariable plan, or a ScheduleActivity whose
--   step ran inline and left the instance waiting where it waited, still queues nothing.
-- - What made the change: a transaction that says so (`SELECT set_config('wfa.cause', 'plan …', true)`, a
--   plan's batch) leaves it on the row, `cause`, and the relay tells it ("cancelled by plan cancel-1"). A later
--   change before the relay told the row replaces it (with nothing, if that one did not say).
ALTER TABLE instance_outbox ADD COLUMN cause text;

CREATE OR REPLACE FUNCTION wfa_instance_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  -- '' once a transaction that set it ended in this session: the same as never set.
  why text := nullif(current_setting('wfa.cause', true), '');
BEGIN
  IF current_setting('wfa.outbox', true) = 'off' THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id, created, cause)
  VALUES (NEW.id, NEW.tenant_id, TG_OP = 'INSERT', why)
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0, cause = EXCLUDED.cause;
  RETURN NULL;
END $$;

DROP TRIGGER workflow_instances_outbox_update ON workflow_instances;
CREATE TRIGGER workflow_instances_outbox_update AFTER UPDATE ON workflow_instances
  FOR EACH ROW WHEN (
    OLD.status IS DISTINCT FROM NEW.status
    OR OLD.sub_status IS DISTINCT FROM NEW.sub_status
    OR OLD.version IS DISTINCT FROM NEW.version
    OR OLD.bookmarks IS DISTINCT FROM NEW.bookmarks
    OR OLD.incidents IS DISTINCT FROM NEW.incidents
    OR (NEW.scheduled IS DISTINCT FROM OLD.scheduled AND NEW.status = 'Running' AND NEW.sub_status <> 'Faulted'
        AND NEW.scheduled <> '[]'::jsonb)
  ) EXECUTE FUNCTION wfa_instance_outbox();
