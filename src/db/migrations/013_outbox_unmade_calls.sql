-- An outbound call a step started (a Running activity record of Elsa.Http.SendHttpRequest) is made by the
-- instance's workflow. When the workflow task that was to make it was lost after the step committed, a word
-- from the relay that said "nothing to run" left the call unmade and the instance Executing for ever: the relay
-- now counts such a call as work for the workflow (src/engine/instance-state.ts, `workflowWorkSql`). Instances
-- left so by the release before are told once more now, so that their workflows make their calls.
INSERT INTO instance_outbox (instance_id, tenant_id)
SELECT i.id, i.tenant_id FROM workflow_instances i
 WHERE i.status = 'Running' AND i.sub_status <> 'Faulted'
   AND EXISTS (SELECT 1 FROM activity_records r
                WHERE r.instance_id = i.id AND r.status = 'Running' AND r.activity_type = 'Elsa.Http.SendHttpRequest')
ON CONFLICT (instance_id) DO UPDATE SET seq = nextval('instance_outbox_seq'), attempts = 0;
