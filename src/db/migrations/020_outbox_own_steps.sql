-- The step of an instance's own workflow that finishes the instance (the last part of an outbound call, or the
-- step after it) no longer queues a word to that same workflow: the workflow reads the end from the step's
-- result and completes by itself. The word only came in while the workflow was completing: a signal, and its
-- last workflow task failed as "UnhandledCommand" and ran again (seen in bench:engine's outbound-call phase,
-- bench/README.md).
--
-- Such a step's transaction says so (`SELECT set_config('wfa.outbox', 'own-step', true)`). Only an end as
-- Finished/Finished, with the incidents and the version unchanged, goes untold; every other change of an own
-- step still queues its word, as before: a word carries the instance's revision, and one that an own step's
-- change did not queue could leave an older word (told while the steps ran) as the last the workflow shows.
-- A row queued before by another change stays, and is told (to a closed workflow: nothing happens).
CREATE OR REPLACE FUNCTION wfa_instance_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  mode text := current_setting('wfa.outbox', true);
  -- '' once a transaction that set it ended in this session: the same as never set.
  why text := nullif(current_setting('wfa.cause', true), '');
BEGIN
  IF mode = 'off' THEN
    RETURN NULL;
  END IF;
  IF mode = 'own-step' AND TG_OP = 'UPDATE'
     AND NEW.status = 'Finished' AND NEW.sub_status = 'Finished'
     AND NEW.incidents IS NOT DISTINCT FROM OLD.incidents
     AND NEW.version IS NOT DISTINCT FROM OLD.version THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id, created, cause)
  VALUES (NEW.id, NEW.tenant_id, TG_OP = 'INSERT', why)
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0, cause = EXCLUDED.cause;
  RETURN NULL;
END $$;
