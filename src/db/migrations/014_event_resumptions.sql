-- Resumptions an event trigger recorded and a worker has yet to run (src/engine/resumptions.ts). A trigger that
-- reaches more instances than TRIGGER_INLINE_INSTANCES records one row per instance here and answers, instead of
-- resuming them all inside its request; workers take the rows oldest first, tenants in turn, and resume each
-- instance's bookmarks on the event as the trigger would have (the same code, 1,000 instances a transaction).
-- Until then the instance stays as it was (Running/Suspended, its bookmark kept): the row is the event's
-- delivery to it, durable from the trigger's commit. One row per instance and event: a second trigger of the
-- same event before the first was run finds its row and adds nothing (the bookmark is resumed once).
CREATE TABLE instance_resumptions (
  instance_id   text NOT NULL,
  event_name    text NOT NULL,
  tenant_id     text NOT NULL,
  seq           bigint GENERATED ALWAYS AS IDENTITY,
  triggered_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance_id, event_name)
);
CREATE INDEX instance_resumptions_tenant_seq ON instance_resumptions (tenant_id, seq);
