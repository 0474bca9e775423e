-- A plan's status change is announced when it commits (LISTEN wfa_plan_status; payload: the plan id), so an
-- event stream on any API node sends a pause, a resume or `done` at once instead of at its next poll
-- (src/alterations/status-listener.ts). Plan rows change status a few times per plan: the cost is nil.
CREATE FUNCTION wfa_notify_plan_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('wfa_plan_status', NEW.id);
  RETURN NULL;
END $$;

CREATE TRIGGER alteration_plans_notify_status AFTER UPDATE OF status ON alteration_plans
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION wfa_notify_plan_status();
