-- The step of an instance's own workflow after which that workflow goes on at once (more work scheduled, or
-- an outbound call out that it makes next) queues no word to it either, as migration 020 did for the step that
-- finishes the instance. Such a word only repeated what the step's result shows, and it came in while the
-- workflow ran its next steps: when those finished the instance, the task completing the workflow failed
-- ("UnhandledCommand") and ran its local activities again (seen in instance-temporal-ui.test.ts's histories).
--
-- The workflow's last step of a run is still told whenever it leaves the instance other than Finished/Finished
-- (waiting, faulted, cancelled, changed in version or incidents): the word it finally shows is the latest, and
-- one told while its steps ran cannot stay the last. A step that finds the instance ended by an earlier
-- attempt of its own (its answer lost) tells the workflow itself (`StepResult.told`, src/engine/executor.ts).
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
     AND NEW.incidents IS NOT DISTINCT FROM OLD.incidents
     AND NEW.version IS NOT DISTINCT FROM OLD.version
     AND ((NEW.status = 'Finished' AND NEW.sub_status = 'Finished')
          OR (NEW.status = 'Running' AND NEW.sub_status = 'Executing'
              AND (NEW.scheduled <> '[]'::jsonb
                   OR EXISTS (SELECT 1 FROM activity_records r
                               WHERE r.instance_id = NEW.id AND r.status = 'Running'
                                 AND r.activity_type = 'Elsa.Http.SendHttpRequest')))) THEN
    RETURN NULL;
  END IF;
  INSERT INTO instance_outbox (instance_id, tenant_id, created, cause)
  VALUES (NEW.id, NEW.tenant_id, TG_OP = 'INSERT', why)
  ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0, cause = EXCLUDED.cause;
  RETURN NULL;
END $$;
