-- Four eyes count creators: every user records the key or user that created it ({kind: 'user' | 'apiKey', id}),
-- as every API key does since 018, so that a user made by a plan's submitter cannot approve that plan. Users made
-- before this release have no recorded creator (null) and stand for themselves; so does the bootstrap `admin`.
ALTER TABLE users ADD COLUMN created_by jsonb;
