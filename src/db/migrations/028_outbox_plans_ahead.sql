-- A plan's effect does not queue behind instances still being told to Temporal: the relay tells the rows a plan's
-- batch wrote (their cause names the plan, migration 019) before the others of their tenant. Only those rows are
-- in this index, so the writes of every other change (a start, a trigger, a step) do not maintain it.
CREATE INDEX instance_outbox_plans_ahead ON instance_outbox (tenant_id, seq) WHERE cause LIKE 'plan %';
