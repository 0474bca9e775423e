-- A step that an instance's own workflow runs (its local activities: the first part of a step, the last part
-- of an outbound call, the pure steps after them) no longer queues a word to that same workflow. The
-- workflow reads where the step left the instance from the step's result and shows it (status, bookmarks,
-- the steps it ran), and it completes by itself when its step finished the instance; the word that followed
-- only made it wake for what it knew already: a signal, a workflow task, and, for the last one, a workflow
-- task failed as "UnhandledCommand" when the signal came in while the workflow was completing (the task then
-- ran again). Seen in bench:engine's outbound-call phase: two signals and two or three workflow tasks more per
-- instance than its workflow needed (bench/README.md).
--
-- Such a step's transaction says so (`SELECT set_config('wfa.outbox', 'own-step', true)`). It still queues its
-- word when the workflow could not tell the change from the result: a fault or any change of the incidents
-- (the story counts them), a version change (the memo), and an end other than Finished (a cancellation ends
-- the workflow Canceled through the relay). A row queued before by another change stays, and is told.
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
     AND NEW.sub_status IS DISTINCT FROM 'Faulted'
     AND (NEW.status IS DISTINCT FROM 'Finished' OR NEW.sub_status = 'Finished')
     AND NEW.incidents IS NOT DISTINCT FROM OLD.incidents
     AND NEW.version IS NOT DISTINCT FROM OLD.version THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id, created, cause)
  VALUES (NEW.id, NEW.tenant_id, TG_OP = 'INSERT', why)
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0, cause = EXCLUDED.cause;
  RETURN NULL;
END $$;
